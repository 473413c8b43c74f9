"""openHarness hooks in the real box and on the host, and the path guard over their
commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.oh_files import config, json_hook, one_hook, script, write

from launchers import openharness as oh
from launchers.openharness import Context
from sandbox.policy import Policy
from sandbox.session import Session

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


# -- the box --------------------------------------------------------------------------


@pytest.mark.isolation
def test_a_boxed_hook_runs_in_the_project_without_provider_keys(
    tmp_path: Path, project: Path, session: Session
) -> None:
    cfg = config(tmp_path, one_hook(
        "postToolUse", 'echo "key=${ANTHROPIC_API_KEY:-none} tool=$OH_TOOL_NAME" > out.txt; '
        "pwd >> out.txt", "      sandbox: true\n"))
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.warnings == ()
    assert (project / "out.txt").read_text() == f"key=none tool=Bash\n{session.policy.project}\n"


@pytest.mark.isolation
def test_a_boxed_hook_cannot_write_outside_the_project(
    tmp_path: Path, outside: Path, session: Session
) -> None:
    target = outside / "planted"
    cfg = config(tmp_path, one_hook("preToolUse", f"touch {target}", "      sandbox: true\n"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.decision == "deny"
    assert not target.exists()


@pytest.mark.isolation
def test_a_host_hook_in_a_boxed_session_runs_from_root_and_can_write_outside(
    tmp_path: Path, outside: Path, session: Session
) -> None:
    target = outside / "written"
    cfg = config(tmp_path, one_hook(
        "preToolUse", f'pwd > {target}; echo "${{ANTHROPIC_API_KEY:-none}}" >> {target}'))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.decision == "allow"
    assert target.read_text() == "/\nnone\n"


@pytest.mark.isolation
def test_a_boxed_json_hook_answers_through_the_box(tmp_path: Path, session: Session) -> None:
    cfg = config(tmp_path, json_hook(
        "userPromptSubmit", {"hookSpecificOutput": {"additionalContext": "boxed"}},
        "      sandbox: true\n"))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="x"),
                     runner=oh.session_runner(session))
    assert result.additional_context == "boxed"


# -- the path guard -------------------------------------------------------------------


def test_guard_words_split_like_a_shell() -> None:
    g = oh.guard_words
    assert g('echo "$OH_TOOL_NAME" >&2; exit 3') == ("echo", "$OH_TOOL_NAME", "exit", "3")
    assert g("exit 1") == ("/bin/sh", "exit", "1")
    assert g("FOO=./a python3 x.py 2>/dev/null") == ("python3", "x.py", "/dev/null", "FOO=./a")
    assert g("/opt/h/gate.sh --rules=r.yaml|tee /x") == (
        "/opt/h/gate.sh", "--rules=r.yaml", "tee", "/x")
    assert g("sh -c 'cat ./inner.sh'") == ("sh", "-c", "cat ./inner.sh")


def test_a_boxed_hook_whose_script_is_in_the_project_is_refused(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    s = script(project)
    path = write(tmp_path, one_hook("preToolUse", f"{s} --check", "      sandbox: true\n"))
    ((label, verdict),) = oh.check(oh.load(path), policy=policy)
    assert label == "preToolUse[0]"
    assert verdict.refusals == (
        f"hook preToolUse[0]: {s} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks.",
    )


def test_a_host_hook_whose_script_is_in_the_project_is_refused_too(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    s = script(project)
    path = write(tmp_path, one_hook("preToolUse", f"/bin/sh {s}"))
    ((_, verdict),) = oh.check(oh.load(path), policy=policy)
    assert verdict.refusals == (
        f"hook preToolUse[0]: {s} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks.",
    )


def test_a_relative_command_is_refused(tmp_path: Path, project: Path, policy: Policy) -> None:
    path = write(tmp_path, one_hook("preToolUse", "./log.sh", "      match: Bash\n"))
    ((_, verdict),) = oh.check(oh.load(path), policy=policy)
    assert verdict.refusals == (
        "hook preToolUse[0]: ./log.sh must be an absolute path "
        "(a command with a / is not looked up on PATH).",
    )


def test_a_boxed_hook_under_tmp_is_refused_a_host_one_is_not(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    s = script(loose)
    text = (
        f"hooks:\n  preToolUse:\n    - command: {s}\n      sandbox: true\n"
        f"    - command: {s}\n"
    )
    (boxed, host) = oh.check(oh.load(write(tmp_path, text)), policy=policy)
    assert boxed[1].refusals == (
        f"hook preToolUse[0]: {s} is in the system temp folder (/tmp), so the agent could "
        "change it. Move it outside (for example ~/.local/share/harness/hooks/), "
        "or start with --no-hooks.",
    )
    assert host[1].ok


def test_a_boxed_hook_outside_every_writable_folder_passes(
    tmp_path: Path, project: Path, policy: Policy, outside: Path
) -> None:
    s = script(outside)
    text = (
        "hooks:\n  preToolUse:\n"
        f"    - command: '{s} --mode strict 2>/dev/null'\n      sandbox: true\n"
        "    - http: http://127.0.0.1:9/\n"
        "  sessionStart:\n    - command: 'exit 0'\n"
    )
    path = write(tmp_path, text)
    verdicts = oh.check(oh.load(path), policy=policy)
    assert [(label, v.ok) for label, v in verdicts] == [
        ("preToolUse[0]", True), ("sessionStart[0]", True)]
    assert [(h.label, h.words, h.sandbox) for h in oh.load(path).all_hooks() if h.command] == [
        ("preToolUse[0]", (str(s), "--mode", "strict", "/dev/null"), True),
        ("sessionStart[0]", ("/bin/sh", "exit", "0"), False),
    ]
