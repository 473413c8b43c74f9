"""openHarness env mode against real processes: the exit-status gates, and the ``OH_*``
variables each event sets."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.oh_files import config, ctx_for, one_hook, read_env

from launchers import openharness as oh
from launchers.openharness import EVENTS, TOOL_EVENTS, Context
from launchers.openharness.answers import PROMPT_BLOCKED
from sandbox.session import Session

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


# -- env mode: the exit-status gates --------------------------------------------------

GATES: dict[str, tuple[str | None, str | None]] = {
    "preToolUse": ("allow", "deny"),
    "userPromptSubmit": ("allow", "deny"),
    "permissionRequest": ("ask", "deny"),
}


@pytest.mark.parametrize("code", [0, 3])
@pytest.mark.parametrize("event", EVENTS)
def test_env_mode_exit_status_gates_as_the_table_says(
    tmp_path: Path, runner: oh.CommandRunner, event: str, code: int
) -> None:
    marker = tmp_path / "ran"
    cfg = config(tmp_path, one_hook(event, f"echo $OH_EVENT > {marker}; exit {code}"))
    result = oh.fire(cfg, event, ctx_for(event), runner=runner)
    expected = GATES.get(event, (None, None))[0 if code == 0 else 1]
    assert result.decision == expected
    assert result.ran == (f"{event}[0]",)
    assert marker.read_text() == f"{event}\n"
    if expected is None:
        assert result.reason is None


def test_a_denied_prompt_gets_the_generic_message(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("userPromptSubmit", "echo secret detail >&2; exit 1"))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="hi"), runner=runner)
    assert (result.decision, result.reason) == (
        "deny", "prompt blocked by hook userPromptSubmit[0]")
    assert PROMPT_BLOCKED.format(label="userPromptSubmit[0]") == result.reason


def test_a_denied_tool_call_gives_the_hooks_stderr_as_reason(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("preToolUse", "echo '  no rm -rf here ' >&2; exit 2"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "no rm -rf here")


def test_a_silent_deny_names_the_hook_and_code(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, one_hook("permissionRequest", "exit 7"))
    result = oh.fire(cfg, "permissionRequest", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "deny", "hook permissionRequest[0] exited with code 7", "permissionRequest[0]")


def test_a_failing_notify_hook_is_ignored_with_a_warning(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("postToolUseFailure", "exit 4"))
    result = oh.fire(cfg, "postToolUseFailure", Context(tool_name="Bash"), runner=runner)
    assert result.decision is None
    assert result.warnings == ("hook postToolUseFailure[0] failed (exited with code 4)",)


def test_a_gating_hook_that_times_out_denies(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, one_hook("preToolUse", "sleep 30", "      timeout: 300\n"))
    start = time.monotonic()
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert time.monotonic() - start < 5
    assert (result.decision, result.reason) == (
        "deny", "hook preToolUse[0] failed (timed out after 300 ms)")
    assert result.warnings == ("hook preToolUse[0] failed (timed out after 300 ms)",)


def test_a_notify_hook_that_times_out_changes_nothing(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("sessionEnd", "sleep 30", "      timeout: 200\n"))
    result = oh.fire(cfg, "sessionEnd", Context(), runner=runner)
    assert result.decision is None
    assert result.warnings == ("hook sessionEnd[0] failed (timed out after 200 ms)",)


# -- env mode: the variables ----------------------------------------------------------

COMMON = {"OH_EVENT", "OH_SESSION_ID", "OH_MODEL", "OH_PROVIDER", "OH_PERMISSION_MODE"}
TOOL_VARS = {"OH_TOOL_NAME", "OH_TOOL_ARGS", "OH_TOOL_OUTPUT", "OH_TOOL_INPUT_JSON"}
EXPECTED_VARS: dict[str, set[str]] = {
    "preToolUse": TOOL_VARS,
    "postToolUse": TOOL_VARS,
    "postToolUseFailure": TOOL_VARS | {"OH_TOOL_ERROR", "OH_ERROR_MESSAGE"},
    "permissionRequest": TOOL_VARS | {"OH_PERMISSION_ACTION"},
    "fileChanged": TOOL_VARS,
    "userPromptSubmit": {"OH_PROMPT"},
    "turnStart": {"OH_TURN_NUMBER"},
    "turnStop": {"OH_TURN_NUMBER", "OH_TURN_REASON"},
}


@pytest.mark.parametrize("event", EVENTS)
def test_each_event_sets_its_oh_variables(
    tmp_path: Path, runner: oh.CommandRunner, event: str
) -> None:
    dump = tmp_path / "env"
    cfg = config(tmp_path, one_hook(event, f"env > {dump}"))
    ctx = Context(
        session_id="s-1", model="anthropic/claude-opus-4-7", provider="anthropic",
        permission_mode="ask", tool_name="Bash", tool_input={"command": "ls -l"},
        tool_output="out", error_message="boom", prompt="hello", permission_action="ask",
        turn_number=4, turn_reason="max_turns",
    )
    oh.fire(cfg, event, ctx, runner=runner)
    env = read_env(dump)
    got = {k for k in env if k.startswith("OH_")}
    assert got == COMMON | EXPECTED_VARS.get(event, set())
    assert env["OH_EVENT"] == event
    assert (env["OH_SESSION_ID"], env["OH_MODEL"], env["OH_PROVIDER"],
            env["OH_PERMISSION_MODE"]) == ("s-1", "anthropic/claude-opus-4-7", "anthropic", "ask")
    if event in TOOL_EVENTS:
        assert env["OH_TOOL_NAME"] == "Bash"
        assert json.loads(env["OH_TOOL_INPUT_JSON"]) == {"command": "ls -l"}
        assert json.loads(env["OH_TOOL_ARGS"]) == {"command": "ls -l"}
        assert env["OH_TOOL_OUTPUT"] == "out"
    if event == "postToolUseFailure":
        assert (env["OH_TOOL_ERROR"], env["OH_ERROR_MESSAGE"]) == ("true", "boom")
    if event == "permissionRequest":
        assert env["OH_PERMISSION_ACTION"] == "ask"
    if event in ("turnStart", "turnStop"):
        assert env["OH_TURN_NUMBER"] == "4"
    if event == "turnStop":
        assert env["OH_TURN_REASON"] == "max_turns"
    if event == "userPromptSubmit":
        assert env["OH_PROMPT"] == "hello"


def test_oh_prompt_is_cut_at_8192_bytes_without_splitting_a_character(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    count = tmp_path / "count"
    seen = tmp_path / "envelope"
    cfg = config(tmp_path, one_hook(
        "userPromptSubmit", f'printf %s "$OH_PROMPT" | wc -c > {count}; cat > {seen}',
        "      jsonIO: true\n"))
    # 8,191 ASCII bytes, then a 2-byte character across the 8,192 boundary.
    prompt = "a" * 8191 + "é" + "tail"
    oh.fire(cfg, "userPromptSubmit", Context(prompt=prompt), runner=runner)
    assert int(count.read_text()) == 8191
    # The JSON envelope carries the whole prompt.
    assert json.loads(seen.read_text())["prompt"] == prompt


def test_cut_utf8_keeps_a_character_that_ends_on_the_limit() -> None:
    assert oh.cut_utf8("a" * 8190 + "é" + "zzz", 8192) == "a" * 8190 + "é"
    assert oh.cut_utf8("a" * 8191 + "é", 8192) == "a" * 8191
    assert oh.cut_utf8("a" * 8189 + "€x", 8192) == "a" * 8189 + "€"
    assert oh.cut_utf8("a" * 8190 + "€", 8192) == "a" * 8190
    assert oh.cut_utf8("short", 8192) == "short"
    assert oh.cut_utf8("nul\0here", 8192) == "nulhere"


def test_a_host_hook_runs_from_root_without_provider_keys(
    tmp_path: Path, project: Path
) -> None:
    private = tmp_path / "p2"
    private.mkdir()
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-secret", MY_API_KEY="k")
    out = tmp_path / "out"
    keys = "${ANTHROPIC_API_KEY:-none}${MY_API_KEY:-none}"
    cfg = config(tmp_path, one_hook("sessionStart", f'pwd > {out}; echo "{keys}" >> {out}'))
    with Session.open(str(project), env=env) as session:
        oh.fire(cfg, "sessionStart", Context(), runner=oh.session_runner(session))
    assert out.read_text() == "/\nnonenone\n"
