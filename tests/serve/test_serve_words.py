"""What ``serve`` says, in serve's words: a tool that is not one of harness's warns in
the hook's result; a table one edit from ``[sandbox]`` or ``[[hooks]]`` warns at open;
errors name params, not the CLI's options."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.serve_client import Serve

from launchers.config import load
from serve.test_serve import toml_hook

pytestmark = pytest.mark.isolation


def test_a_hook_call_naming_no_tool_here_warns_in_its_result(served: Serve) -> None:
    served.result("open")
    r = served.result("hook", {"event": "PreToolUse", "tool": "Bash",
                               "input": {"command": "rm -rf ~"}})
    assert r["outcome"] == "allowed"
    assert r["warnings"] == ['⚠ tool "Bash" is not a tool here, so no hook that lists '
                             "tools covers it; tool names are lower case, such as bash."]
    assert served.result("hook", {"event": "PreToolUse", "tool": "bash",
                                  "input": {"command": "ls"}})["warnings"] == []


@pytest.mark.parametrize(("table", "ours"), [("[sandbx]", "[sandbox]"),
                                             ("[sanbdox]", "[sandbox]"),
                                             ("[[hook]]", "[[hooks]]"),
                                             ("[hooksy]", "[[hooks]]")])
def test_a_table_one_edit_from_ours_warns_at_open(served: Serve, config: Path, table: str,
                                                  ours: str) -> None:
    config.write_text(f"{table}\nnetwork = true\n[model]\nname = 'x'\n")
    key = table.strip("[]")
    warning = (f'⚠ the config\'s table "{key}" is not read: did you mean {ours}? '
               "(tables other than [[hooks]] and [sandbox] belong to the harness)")
    assert served.result("open")["warnings"] == [warning]


@pytest.mark.parametrize("table", ["model", "harness", "sandboxes-extra", "hook_x", "ui"])
def test_the_harnesss_own_tables_are_not_warned_about(tmp_path: Path, table: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[{table}]\nx = 1\n")
    assert load(str(path), project=str(tmp_path / "proj")).warnings == ()


def test_serve_errors_name_params_not_options(served: Serve) -> None:
    served.result("open")
    said = [served.call("hook", params)["error"]["message"] for params in (
        {"event": "PreToolUse"},
        {"event": "PreToolUse", "tool": "bash", "prompt": "x"},
        {"event": "UserPromptSubmit", "tool": "bash"},
        {"event": "UserPromptSubmit"})]
    assert said == ['hook: PreToolUse needs "tool"',
                    'hook: "prompt" is for UserPromptSubmit; PreToolUse takes "input"',
                    'hook: "tool" and "input" are for PreToolUse; UserPromptSubmit takes '
                    '"prompt"',
                    'hook: UserPromptSubmit needs "prompt"']
    assert not any("--" in line for line in said)


def test_a_refused_session_keeps_the_protocols_words_and_adds_serves(served: Serve,
                                                                     project: Path,
                                                                     config: Path) -> None:
    inside = project / "hook.sh"
    inside.write_text("#!/bin/sh\nexit 0\n")
    inside.chmod(0o755)
    config.write_text(toml_hook("in-project", [str(inside)]))
    message = served.call("open")["error"]["message"]
    first, last = message.splitlines()
    assert first == (f"hook in-project: {inside} is in the project, so the agent could "
                     "change it. Move it outside (for example ~/.local/share/harness/"
                     "hooks/), or start with --no-hooks.")
    assert last == 'Through serve, --no-hooks is open\'s "no_hooks": true.'
