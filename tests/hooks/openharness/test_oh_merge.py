"""openHarness answers merged: which decision short-circuits, how contexts join, and
what a notify event's answer changes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from helpers.oh_files import config, json_hook, q

from launchers import openharness as oh
from launchers.cli.hook_openharness import describe
from launchers.openharness import Context, Result

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


def marked(marker: Path, answer: dict[str, Any] | None, *, code: int = 0) -> str:
    """A jsonIO hook entry that leaves ``marker`` and answers ``answer``."""
    body = f"cat > /dev/null; touch {marker}"
    if answer is not None:
        body += f"; printf '%s' {shlex.quote(json.dumps(answer))}"
    body += f"; exit {code}"
    return f"    - command: {q(body)}\n      jsonIO: true\n"


def test_first_deny_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(4)]
    text = "hooks:\n  preToolUse:\n" + (
        marked(m[0], {"decision": "allow"})
        + marked(m[1], None)
        + marked(m[2], {"decision": "deny", "reason": "second opinion: no"})
        + marked(m[3], {"decision": "deny", "reason": "never reached"})
    )
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "deny", "second opinion: no", "preToolUse[2]")
    assert result.ran == ("preToolUse[0]", "preToolUse[1]", "preToolUse[2]")
    assert [p.exists() for p in m] == [True, True, True, False]


def test_a_specific_deny_short_circuits_too(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], {"hookSpecificOutput": {"decision": "ask"}})
        + marked(m[1], {"hookSpecificOutput": {"decision": "deny"}})
        + marked(m[2], {"hookSpecificOutput": {"decision": "allow"}})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason) == ("deny", "denied by hook permissionRequest[1]")
    assert [p.exists() for p in m] == [True, True, False]


def test_an_env_mode_deny_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    later = tmp_path / "later"
    text = (
        "hooks:\n  preToolUse:\n    - command: 'exit 1'\n"
        f"    - command: 'touch {later}'\n"
    )
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result.decision == "deny"
    assert not later.exists()


def test_first_specific_allow_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], {"decision": "allow"})
        + marked(m[1], {"hookSpecificOutput": {"decision": "allow", "reason": "trusted"}})
        + marked(m[2], {"decision": "deny"})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "allow", "trusted", "permissionRequest[1]")
    assert [p.exists() for p in m] == [True, True, False]


def test_a_top_level_allow_does_not_short_circuit(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(2)]
    text = "hooks:\n  preToolUse:\n" + (
        marked(m[0], {"decision": "allow"}) + marked(m[1], {"decision": "deny"}))
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result.decision == "deny"
    assert all(p.exists() for p in m)


@pytest.mark.parametrize("event", ["preToolUse", "permissionRequest"])
def test_context_is_given_for_prompts_only(
    tmp_path: Path, runner: oh.CommandRunner, event: str
) -> None:
    cfg = config(tmp_path, json_hook(event, {"hookSpecificOutput": {
        "additionalContext": "not for a tool call", "decision": "allow"}}))
    result = oh.fire(cfg, event, Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.additional_context) == ("allow", None)
    assert "added context:" not in describe(result)


def test_contexts_join_in_list_order(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(4)]
    text = "hooks:\n  userPromptSubmit:\n" + (
        marked(m[0], {"hookSpecificOutput": {"additionalContext": "one"}})
        + marked(m[1], None)
        + marked(m[2], {"hookSpecificOutput": {"additionalContext": "two\nlines"}})
        + marked(m[3], {"decision": "allow",
                        "hookSpecificOutput": {"additionalContext": "three"}})
    )
    result = oh.fire(config(tmp_path, text), "userPromptSubmit", Context(prompt="hi"),
                     runner=runner)
    assert result.additional_context == "one\n\ntwo\nlines\n\nthree"
    assert result.decision == "allow"
    assert all(p.exists() for p in m)


def test_ask_when_a_hook_asks_and_none_denies_or_allows(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], None)
        + marked(m[1], {"hookSpecificOutput": {"decision": "ask", "reason": "check this"}})
        + marked(m[2], {"decision": "allow"})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "ask", "check this", "permissionRequest[1]")
    assert all(p.exists() for p in m)


def test_no_hooks_is_no_decision(tmp_path: Path, runner: oh.CommandRunner) -> None:
    result = oh.fire(config(tmp_path, "hooks: {}\n"), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result == Result("preToolUse")


def test_a_deny_on_a_notify_event_does_not_stop_later_hooks(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(2)]
    text = "hooks:\n  sessionStart:\n" + (
        marked(m[0], {"decision": "deny"}, code=1) + marked(m[1], None))
    result = oh.fire(config(tmp_path, text), "sessionStart", Context(), runner=runner)
    assert result.decision is None
    assert all(p.exists() for p in m)
