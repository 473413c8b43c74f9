"""openHarness JSON-I/O mode against real processes: the camelCase envelope in, the
answer out, and what a malformed or failing answer means."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.oh_files import config, json_hook, one_hook

from launchers import openharness as oh
from launchers.openharness import Context

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


def test_json_mode_receives_the_camelcase_envelope(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    seen = tmp_path / "seen"
    cfg = config(tmp_path, one_hook("preToolUse", f"cat > {seen}", "      jsonIO: true\n"))
    ctx = Context(session_id="s-9", model="m", provider="p", permission_mode="ask",
                  cwd="/work/proj", tool_name="Bash", tool_input={"command": "ls"})
    oh.fire(cfg, "preToolUse", ctx, runner=runner)
    assert json.loads(seen.read_text()) == {
        "event": "preToolUse", "toolName": "Bash", "toolInput": {"command": "ls"},
        "sessionId": "s-9", "model": "m", "provider": "p", "permissionMode": "ask",
        "cwd": "/work/proj",
    }


def test_json_mode_prompt_envelope(tmp_path: Path, runner: oh.CommandRunner) -> None:
    seen = tmp_path / "seen"
    cfg = config(tmp_path, one_hook("userPromptSubmit", f"cat > {seen}", "      jsonIO: true\n"))
    oh.fire(cfg, "userPromptSubmit", Context(prompt="the user's prompt text", session_id="s",
                                             model="m", provider="p", permission_mode="ask"),
            runner=runner)
    assert json.loads(seen.read_text()) == {
        "event": "userPromptSubmit", "prompt": "the user's prompt text", "sessionId": "s",
        "model": "m", "provider": "p", "permissionMode": "ask",
    }


def test_json_mode_deny_with_reason(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", {"decision": "deny", "reason": "nope"}))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "nope")


def test_json_mode_specific_deny_as_in_the_gate_bash_example(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    answer = {"hookSpecificOutput": {"decision": "deny", "reason": "Bash is disabled by policy"}}
    cfg = config(tmp_path, json_hook("permissionRequest", answer, '      match: "Bash"\n'))
    result = oh.fire(cfg, "permissionRequest", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "Bash is disabled by policy")
    other = oh.fire(cfg, "permissionRequest", Context(tool_name="Read"), runner=runner)
    assert (other.decision, other.ran) == (None, ())


def test_json_mode_additional_context(tmp_path: Path, runner: oh.CommandRunner) -> None:
    text = "[system: always respond in under 200 words unless asked otherwise]"
    cfg = config(tmp_path, json_hook(
        "userPromptSubmit", {"hookSpecificOutput": {"additionalContext": text}}))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="hi"), runner=runner)
    assert (result.decision, result.additional_context) == (None, text)


@pytest.mark.parametrize("output", ["not json", "", "[1, 2]", '"deny"', '{"decision": '])
def test_json_mode_malformed_output_is_an_empty_answer(
    tmp_path: Path, runner: oh.CommandRunner, output: str
) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", output))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.ran) == (None, ("preToolUse[0]",))


def test_json_mode_unknown_fields_are_ignored(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", {"decision": "allow", "x": {"y": 1}}))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert result.decision == "allow"


def test_json_mode_nonzero_exit_denies_whatever_it_printed(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook(
        "preToolUse", 'cat >/dev/null; echo \'{"decision":"allow"}\'; exit 1',
        "      jsonIO: true\n"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "hook preToolUse[0] exited with code 1")


def test_json_mode_answers_on_a_notify_event_change_nothing(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, json_hook("postToolUse", {"decision": "deny"}))
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.ran) == (None, ("postToolUse[0]",))


def test_parse_answer_reads_every_field() -> None:
    a = oh.parse_answer(json.dumps({
        "decision": "allow", "reason": "r",
        "hookSpecificOutput": {"decision": "ask", "reason": "  why  ", "additionalContext": "c"},
    }))
    assert a == oh.OhAnswer("ask", "why", "c")
    assert oh.parse_answer('{"allowed": false}') == oh.OhAnswer("deny", None, None)
    assert oh.parse_answer('{"reason": "' + "x" * 3000 + '", "decision": "deny"}') == (
        oh.OhAnswer("deny", "x" * 2000, None))
    assert oh.parse_answer("{}") == oh.OhAnswer("none")
    assert oh.parse_answer("nope") is None
