"""``harness-sandbox hook --openharness FILE EVENT``: its document, exit statuses and
errors, cancel and Ctrl-C, run for real."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers.oh_files import config, one_hook, script, write

from launchers import openharness as oh
from launchers.cli.hook_openharness import cmd_hook_openharness, describe
from launchers.cli.main import main, parser
from launchers.openharness import Context, Result
from sandbox.errors import SandboxUnavailable

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


def hook_cmd(*argv: str) -> int:
    return cmd_hook_openharness(parser().parse_args(["hook", *argv]))


def test_cmd_hook_json_document_and_exit_0(
    tmp_path: Path, project: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = outside / "ctx.sh"
    s.write_text("#!/bin/sh\ncat >/dev/null\n"
                 "echo '{\"hookSpecificOutput\":{\"additionalContext\":\"be brief\"}}'\n")
    s.chmod(0o755)
    path = write(tmp_path, one_hook("userPromptSubmit", str(s), "      jsonIO: true\n"))
    code = hook_cmd("userPromptSubmit", "--openharness", path, "--project", str(project),
                    "--prompt", "hello", "--no-sandbox", "--json")
    out = capsys.readouterr()
    assert code == 0
    assert json.loads(out.out) == {
        "version": 1, "event": "userPromptSubmit", "decision": None, "reason": None,
        "additionalContext": "be brief", "ran": ["userPromptSubmit[0]"],
    }


def test_cmd_hook_deny_exits_1_and_says_why(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", 'echo "no $OH_TOOL_NAME today" >&2; exit 1'))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--input", '{"command": "ls"}', "--no-sandbox")
    assert code == 1
    assert capsys.readouterr().err == "preToolUse: denied by preToolUse[0]: no Bash today\n"


def test_cmd_hook_config_error_exits_2(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "hooks:\n  preToolUse:\n    - command: /bin/true\n      foo: 1\n")
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert code == 2
    assert capsys.readouterr().err == (
        f'harness-sandbox: {path}: hooks.preToolUse[0]: unknown key "foo"\n')


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["PreToolUse", "--tool", "Bash"], 'unknown event "PreToolUse" (did you mean preToolUse?)'),
        (["preToolUse"], "preToolUse needs --tool NAME"),
        (["preToolUse", "--tool", "Bash", "--input", "[1]"], "--input must be a JSON object"),
    ],
)
def test_cmd_hook_usage_errors_exit_125(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str],
    argv: list[str], message: str,
) -> None:
    path = write(tmp_path, "hooks: {}\n")
    code = hook_cmd(*argv, "--openharness", path, "--project", str(project), "--no-sandbox")
    assert code == 125
    assert capsys.readouterr().err == f"harness-sandbox: {message}\n"


def test_cmd_hook_refuses_a_hook_the_guard_refuses(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = script(project)
    marker = project / "ran"
    s.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path = write(tmp_path, one_hook("preToolUse", str(s), "      sandbox: true\n"))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert code == 2
    assert capsys.readouterr().err == (
        f"harness-sandbox: hook preToolUse[0]: {s} is in the project, so the agent could "
        "change it. Move it outside (for example ~/.local/share/harness/hooks/), "
        "or start with --no-hooks.\n")
    assert not marker.exists()


def test_cmd_hook_with_hooks_off_runs_nothing(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", "exit 1"))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-hooks", "--json")
    assert code == 0
    assert json.loads(capsys.readouterr().out)["ran"] == []


@pytest.mark.isolation
def test_cmd_hook_runs_a_boxed_hook_in_the_box(
    tmp_path: Path, project: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = outside / "gate.sh"
    s.write_text('#!/bin/sh\necho "$OH_TOOL_NAME" > seen.txt\nexit 0\n')
    s.chmod(0o755)
    path = write(tmp_path, one_hook("preToolUse", str(s), "      sandbox: true\n"))
    try:
        code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                        "--tool", "Bash", "--json")
    except SandboxUnavailable as err:  # pragma: no cover - machine without a box
        pytest.skip(str(err))
    out = capsys.readouterr()
    if code == 2 and "bwrap" in out.err:  # pragma: no cover
        pytest.skip(out.err)
    assert code == 0
    assert json.loads(out.out)["decision"] == "allow"
    assert (project / "seen.txt").read_text() == "Bash\n"


def test_describe_has_one_line_per_outcome() -> None:
    assert describe(Result("preToolUse", "ask", "check", None, ("preToolUse[0]",),
                              "preToolUse[0]")) == ["preToolUse: ask (from preToolUse[0]: check)"]
    assert describe(Result("sessionStart", ran=("sessionStart[0]",),
                              warnings=("hook sessionStart[0] failed (exited with code 1)",))) == [
        "warning: hook sessionStart[0] failed (exited with code 1)",
        "sessionStart: no objection (ran sessionStart[0])",
    ]



def test_cancel_ends_the_running_hook_and_starts_no_other(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    later = tmp_path / "later"
    text = (
        "hooks:\n  preToolUse:\n    - command: 'sleep 30'\n"
        f"    - command: 'touch {later}'\n"
    )
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner, cancel=cancel)
    assert time.monotonic() - start < 5
    assert (result.decision, result.reason) == ("deny", "hook preToolUse[0] failed (cancelled)")
    assert not later.exists()


def test_ctrl_c_during_cmd_hook_ends_the_hook_and_exits_130(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", "sleep 30"))
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert time.monotonic() - start < 5
    assert code == 130
    assert capsys.readouterr().err == (
        "harness-sandbox: preToolUse: interrupted; the running hook was ended\n")


def test_the_cli_hook_command_hands_openharness_files_here(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("permissionRequest", "exit 0"))
    code = main(["hook", "permissionRequest", "--openharness", path, "--project",
                 str(project), "--tool", "Bash", "--session-id", "s-1", "--no-sandbox",
                 "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": 1, "event": "permissionRequest", "decision": "ask", "reason": None,
        "additionalContext": None, "ran": ["permissionRequest[0]"],
    }


def test_a_huge_tool_output_is_cut_so_the_hook_still_starts(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    count = tmp_path / "count"
    cfg = config(tmp_path, one_hook(
        "postToolUse", f'printf %s "$OH_TOOL_OUTPUT" | wc -c > {count}'))
    # Past Linux's 128 KiB limit for one environment string.
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash", tool_output="x" * 200_000),
                     runner=runner)
    assert result.warnings == ()
    assert int(count.read_text()) == oh.ENV_VALUE_CAP == 65536
