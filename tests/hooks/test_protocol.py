"""The hook protocol: envelopes, answers and the exact texts (pure; no process runs)."""

from __future__ import annotations

import json

import pytest

from launchers.harness import protocol as p
from sandbox.plan import RunResult


def exited(code: int, stdout: bytes | str = b"", stderr: bytes | str = b"") -> RunResult:
    out = stdout.encode() if isinstance(stdout, str) else stdout
    err = stderr.encode() if isinstance(stderr, str) else stderr
    return RunResult(outcome="exited", returncode=code, stdout=out, stderr=err)


# -- envelopes ---------------------------------------------------------------------


def test_pre_tool_use_envelope_is_one_line_with_the_fields_in_order() -> None:
    raw = p.pre_tool_use("01M", "/home/p", "auto", "bash",
                         {"command": "git push --force origin main"}, tool_use_id="7EX",
                         project="/home/p")
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    doc = json.loads(raw)
    assert list(doc) == ["session_id", "hook_event_name", "cwd", "permission_mode",
                         "tool_name", "tool_input", "tool_use_id"]
    assert doc == {"session_id": "01M", "hook_event_name": "PreToolUse", "cwd": "/home/p",
                   "permission_mode": "auto", "tool_name": "bash",
                   "tool_input": {"command": "git push --force origin main"},
                   "tool_use_id": "7EX"}


def test_user_prompt_submit_envelope_has_the_prompt_and_never_a_turn_id() -> None:
    raw = p.user_prompt_submit("01M", "/home/p", "plan", "ooo seed\nmy requirements")
    assert raw.count(b"\n") == 1
    doc = json.loads(raw)
    assert list(doc) == ["session_id", "hook_event_name", "cwd", "permission_mode", "prompt"]
    assert doc["prompt"] == "ooo seed\nmy requirements"
    assert "turn_id" not in doc and "transcript_path" not in doc


def test_envelope_keeps_non_ascii_text_as_utf8() -> None:
    raw = p.user_prompt_submit("s", "/p", "auto", "café ✓")
    assert "café ✓".encode() in raw


def test_in_project_paths_are_made_relative_recursively() -> None:
    got = p.relative_input({
        "path": "/home/p/src/a.py",
        "root": "/home/p",
        "root_slash": "/home/p/",
        "other": "/home/p-other/x",
        "command": "cat /home/p/src/a.py",
        "nested": {"paths": ["/home/p/b", "/etc/passwd", 3, None], "deep": {"x": "/home/p/c/d"}},
        "n": 1,
    }, "/home/p")
    assert got == {
        "path": "src/a.py",
        "root": ".",
        "root_slash": ".",
        "other": "/home/p-other/x",
        "command": "cat /home/p/src/a.py",
        "nested": {"paths": ["b", "/etc/passwd", 3, None], "deep": {"x": "c/d"}},
        "n": 1,
    }


def test_the_project_where_it_leads_is_made_relative_too() -> None:
    got = p.relative_input({"a": "/real/p/x", "b": "/link/p/y"}, ("/link/p", "/real/p"))
    assert got == {"a": "x", "b": "y"}


def test_mcp_input_carries_server_tool_and_arguments() -> None:
    raw = p.pre_tool_use("s", "/p", "auto", "mcp",
                         p.mcp_input("github", "create_issue", {"title": "t"}),
                         tool_use_id="u", project="/p")
    assert json.loads(raw)["tool_input"] == {"server": "github", "tool": "create_issue",
                                             "arguments": {"title": "t"}}


# -- answers -----------------------------------------------------------------------


def test_exit_2_blocks_with_stderr_as_the_reason() -> None:
    a = p.parse(exited(2, stderr="  force-push is not allowed here\n"), "PreToolUse", timeout=10)
    assert a == p.Answer("block", reason="force-push is not allowed here")


def test_exit_2_ignores_stdout() -> None:
    a = p.parse(exited(2, stdout='{"decision":"approve"}', stderr="no"), "PreToolUse", timeout=1)
    assert a.kind == "block" and a.reason == "no"


def test_a_reason_is_cut_to_its_first_2000_characters() -> None:
    a = p.parse(exited(2, stderr="x" * 5000), "PreToolUse", timeout=10)
    assert a.reason == "x" * 2000


def test_an_empty_reason_is_no_reason_given() -> None:
    a = p.parse(exited(2, stderr=" \n "), "PreToolUse", timeout=10)
    assert a == p.Answer("block", reason=None)
    assert p.call_blocked("no-force-push", None) == \
        'blocked by the user\'s hook "no-force-push" (no reason given)'
    assert p.prompt_blocked("keywords", None) == \
        '✗ prompt blocked by hook "keywords" (no reason given)'


def test_exit_0_with_nothing_is_no_objection() -> None:
    assert p.parse(exited(0, stdout="\n"), "PreToolUse", timeout=10) == p.Answer("none")


@pytest.mark.parametrize("doc", [
    {"decision": "block", "reason": "nope"},
    {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                            "permissionDecisionReason": "nope"}},
    {"continue": False, "stopReason": "nope"},
])
def test_claude_code_block_shapes_block(doc: dict[str, object]) -> None:
    assert p.parse(exited(0, json.dumps(doc)), "PreToolUse", timeout=10) == \
        p.Answer("block", reason="nope")


@pytest.mark.parametrize("decision", ["allow", "ask"])
def test_allow_and_ask_are_no_objection(decision: str) -> None:
    doc = {"hookSpecificOutput": {"permissionDecision": decision,
                                  "permissionDecisionReason": "fine"},
           "systemMessage": "hello"}
    assert p.parse(exited(0, json.dumps(doc)), "PreToolUse", timeout=10) == p.Answer("none")


def test_additional_context_is_read_on_user_prompt_submit() -> None:
    doc = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                  "additionalContext": "<skill-suggestion>/ouroboros:seed"
                                                       "</skill-suggestion>"}}
    a = p.parse(exited(0, json.dumps(doc)), "UserPromptSubmit", timeout=5)
    assert a == p.Answer("none", context="<skill-suggestion>/ouroboros:seed</skill-suggestion>")


def test_additional_context_is_ignored_on_pre_tool_use() -> None:
    doc = {"hookSpecificOutput": {"additionalContext": "look here"}}
    assert p.parse(exited(0, json.dumps(doc)), "PreToolUse", timeout=5) == p.Answer("none")


@pytest.mark.parametrize("out", ["force-push is fine", "[1, 2]", '"text"', "{not json",
                                 '{"decision": 3}', '{"hookSpecificOutput": "x"}'])
def test_output_that_is_not_hook_json_is_a_failure(out: str) -> None:
    for event in ("PreToolUse", "UserPromptSubmit"):
        a = p.parse(exited(0, out), event, timeout=5)
        assert a == p.Answer("failure", failure="printed output that is not hook JSON")


def test_failure_kinds_read_as_the_seed_names_them() -> None:
    def kind(r: RunResult, timeout: float = 10) -> str | None:
        return p.parse(r, "PreToolUse", timeout=timeout).failure

    assert kind(exited(1)) == "exited with code 1"
    assert kind(exited(127)) == "exited with code 127"
    assert kind(RunResult(outcome="timed_out")) == "timed out after 10 s"
    assert kind(RunResult(outcome="timed_out"), timeout=5) == "timed out after 5 s"
    assert kind(RunResult(outcome="failed_to_start", error="Permission denied")) == \
        "could not start: Permission denied"
    assert kind(RunResult(outcome="signaled", signal=9)) == "was killed by a signal"


def test_a_cancelled_run_is_interrupted() -> None:
    assert p.parse(RunResult(outcome="cancelled"), "PreToolUse", timeout=1).kind == "interrupted"


# -- texts -------------------------------------------------------------------------


def test_call_texts() -> None:
    assert p.call_blocked("no-force-push", "force-push is not allowed here") == \
        'blocked by the user\'s hook "no-force-push": force-push is not allowed here'
    assert p.call_failed("no-force-push", "timed out after 10 s") == (
        'the user\'s hook "no-force-push" failed (timed out after 10 s), so this call was '
        "blocked. This is not a policy decision: retrying or rephrasing the call will not "
        "help. Tell the user their hook is failing.")


def test_prompt_texts() -> None:
    assert p.prompt_blocked("keywords", "not today") == \
        '✗ prompt blocked by hook "keywords": not today'
    assert p.prompt_failed("keywords", "timed out after 5 s") == \
        '✗ prompt blocked: hook "keywords" failed (timed out after 5 s)'


def test_warning_texts() -> None:
    assert p.failing_warning("no-force-push", "timed out after 10 s", "PreToolUse") == (
        "⚠ hook no-force-push is failing (timed out after 10 s), so the calls it covers are "
        'blocked. Fix it, set on_failure = "continue", or restart with --no-hooks.')
    assert p.failing_warning("keywords", "timed out after 5 s", "UserPromptSubmit") == (
        "⚠ hook keywords is failing (timed out after 5 s), so your prompts are "
        'blocked. Fix it, set on_failure = "continue", or restart with --no-hooks.')
    assert p.continued_warning("no-force-push", "exited with code 1", "PreToolUse") == \
        '⚠ hook no-force-push failed (exited with code 1); on_failure = "continue" let the ' \
        "call through."
    assert p.continued_warning("keywords", "exited with code 1", "UserPromptSubmit") == \
        '⚠ hook keywords failed (exited with code 1); on_failure = "continue" let the ' \
        "prompt through."
    assert p.resume_skipped_warning("no-force-push") == (
        "⚠ hook no-force-push is not run in this session: it is changed in your config since "
        "the session was recorded. Resume cleanly to use today's hooks.")


def test_context_is_framed_and_cut_at_10000_characters() -> None:
    assert p.frame_context("keywords", "use /ouroboros:seed") == \
        'Context from the user\'s hook "keywords":\nuse /ouroboros:seed'
    kept, warning = p.cut_context("keywords", "y" * 11_000)
    assert kept == "y" * 10_000
    assert warning == \
        "⚠ hook keywords added 11,000 characters of context; only the first 10,000 are kept."
    assert p.cut_context("keywords", "y" * 10_000) == ("y" * 10_000, None)


def test_transcript_row_texts() -> None:
    assert p.context_row("keywords", 171) == "· hook keywords added context (171 characters)"
    assert p.went_ahead_row("notify", "exited with code 1", "PreToolUse") == \
        "· hook notify failed (exited with code 1); the call went ahead"
    assert p.went_ahead_row("keywords", "timed out after 5 s", "UserPromptSubmit") == \
        "· hook keywords failed (timed out after 5 s); the prompt went ahead"
    assert p.killed_while_running("PreToolUse", "bash") == \
        "This session was killed before bash ran. It never ran."
    assert p.killed_while_running("UserPromptSubmit", None) == \
        "This session was killed while a prompt hook ran. The prompt was not sent."


def test_a_boxed_exit_status_past_128_reads_as_killed_by_a_signal() -> None:
    assert p.parse(exited(137), "PreToolUse", timeout=1, boxed=True).failure == \
        "was killed by a signal"
    assert p.parse(exited(137), "PreToolUse", timeout=1).failure == "exited with code 137"
    assert p.parse(exited(200), "PreToolUse", timeout=1, boxed=True).failure == \
        "exited with code 200"


def test_a_deny_blocks_a_prompt_too() -> None:
    doc = {"hookSpecificOutput": {"permissionDecision": "deny",
                                  "permissionDecisionReason": "not now"}}
    assert p.parse(exited(0, json.dumps(doc)), "UserPromptSubmit", timeout=5) == \
        p.Answer("block", reason="not now")


def test_continue_false_wins_over_other_fields() -> None:
    doc = {"continue": False, "stopReason": "stop", "decision": "block", "reason": "other"}
    assert p.parse(exited(0, json.dumps(doc)), "PreToolUse", timeout=5) == \
        p.Answer("block", reason="stop")
