"""One event through real hook programs, boxed (real bwrap) and on the host.

Every hook here is a real program started by the real supervisor; the project is a real
temporary folder. ``where`` runs each test twice: hooks with sandbox = true (in the box)
and with sandbox = false (on the host, from /).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.procs import left_after, running_with

from launchers.config import Config, Event, HookSpec, OnFailure
from launchers.harness import records as rec
from launchers.harness.hooks import Decision, HookRefused, HookRunner
from sandbox.plan import RunResult
from sandbox.policy import Policy
from sandbox.session import Session

PUSH = {"command": "git push --force origin main"}
PULL = {"command": "git pull"}


@pytest.fixture(params=[pytest.param("boxed", marks=pytest.mark.isolation), "host"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def project(project: Path) -> Path:
    """The shared project, with a src folder."""
    (project / "src").mkdir()
    return project


class Hooks:
    """Builds hook specs for one test: programs by file name, boxed or on the host."""

    def __init__(self, programs: Path, where: str) -> None:
        self.programs = programs
        self.sandbox = where == "boxed"

    def __call__(self, name: str, program: str, *args: str, event: Event = "PreToolUse",
                 tools: Sequence[str] | None = None, timeout: int = 10,
                 on_failure: OnFailure = "block") -> HookSpec:
        return HookSpec(name=name, event=event,
                        command=(str(self.programs / program), *args),
                        tools=None if tools is None else tuple(tools), timeout=timeout,
                        sandbox=self.sandbox, on_failure=on_failure)


@pytest.fixture
def hook(programs: Path, where: str) -> Hooks:
    return Hooks(programs, where)


@pytest.fixture
def session(project: Path) -> Iterator[Session]:
    with Session.open(str(project)) as s:
        yield s


def runner(session: Session, *hooks: HookSpec, **kw: Any) -> HookRunner:
    kw.setdefault("session_id", "01MSESSION")
    return HookRunner(Config(path=None, hooks=hooks), session, **kw)


def call(r: HookRunner, tool: str = "bash", tool_input: Mapping[str, Any] = PUSH,
         **kw: Any) -> Decision:
    return r.pre_tool_use(tool, tool_input, tool_use_id="7EX", **kw)


def decided(d: Decision) -> list[dict[str, Any]]:
    return [x for x in d.records if x["type"] == "hook.decided"]


# -- answers -----------------------------------------------------------------------


def test_force_push_is_blocked_with_stderr_as_the_reason(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("no-force-push", "no-force-push.sh", tools=["bash", "exec"]))
    d = call(r)
    assert d.outcome == "blocked" and d.hook == "no-force-push"
    assert d.message == \
        'blocked by the user\'s hook "no-force-push": force-push is not allowed here'
    assert decided(d) == [{"type": "hook.decided", "hook": "no-force-push",
                           "event": "PreToolUse", "tool": "bash", "decision": "block",
                           "reason": "force-push is not allowed here", "failure": None,
                           "went_ahead": False}]
    assert call(r, tool_input=PULL).outcome == "allowed"


def test_json_deny_blocks_with_its_reason(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("deny-push", "deny-force-push.py"))
    d = call(r)
    assert (d.outcome, d.message) == \
        ("blocked", 'blocked by the user\'s hook "deny-push": no force-push, please')
    pulled = call(r, tool_input=PULL)
    assert pulled.outcome == "allowed" and pulled.message is None and decided(pulled) == []


def test_a_validator_that_allows_is_no_objection(session: Session, hook: Hooks) -> None:
    d = call(runner(session, hook("validator", "allow.py")))
    assert (d.outcome, d.message, d.contexts, d.warnings, d.hook) == \
        ("allowed", None, [], [], None)
    # A run with no objection leaves only its effect.
    assert [x["type"] for x in d.records] == ["hook.effect"]


def test_the_keyword_detector_adds_framed_context(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("keywords", "keyword-detector.py", event="UserPromptSubmit",
                             timeout=5, on_failure="continue"))
    d = r.user_prompt_submit("ooo seed my requirements")
    assert d.outcome == "allowed" and d.message is None
    [context] = d.contexts
    head, text = context.split("\n", 1)
    assert head == 'Context from the user\'s hook "keywords":'
    assert text.startswith("<skill-suggestion>") and "/ouroboros:seed" in text
    [row] = [x for x in d.records if x["type"] == "hook.context"]
    assert row == {"type": "hook.context", "hook": "keywords", "characters": len(text),
                   "text": text}
    assert list(rec.transcript_rows([row])) == \
        [f"· hook keywords added context ({len(text)} characters)"]
    assert r.user_prompt_submit("just a prompt").contexts == []


def test_plain_text_output_is_a_failure(session: Session, hook: Hooks) -> None:
    d = call(runner(session, hook("chatty", "plain-text.sh")))
    assert d.outcome == "blocked"
    assert d.message == (
        'the user\'s hook "chatty" failed (printed output that is not hook JSON), so this '
        "call was blocked. This is not a policy decision: retrying or rephrasing the call "
        "will not help. Tell the user their hook is failing.")


def test_a_hook_past_its_timeout_fails_and_is_ended(session: Session, hook: Hooks) -> None:
    marker = f"{300 + uuid.uuid4().int % 10_000}.5"
    r = runner(session, hook("slow", "sleeper.sh", marker, timeout=1))
    started = time.monotonic()
    d = call(r)
    assert time.monotonic() - started < 5
    assert d.message == (
        'the user\'s hook "slow" failed (timed out after 1 s), so this call was blocked. '
        "This is not a policy decision: retrying or rephrasing the call will not help. "
        "Tell the user their hook is failing.")
    assert d.warnings == [
        "⚠ hook slow is failing (timed out after 1 s), so the calls it covers are blocked. "
        'Fix it, set on_failure = "continue", or restart with --no-hooks.']
    assert decided(d)[0]["failure"] == "timed out after 1 s"
    assert_gone(marker)


def test_a_prompt_hook_past_its_timeout_blocks_the_prompt(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("keywords", "sleeper.sh", "30", event="UserPromptSubmit",
                             timeout=1))
    d = r.user_prompt_submit("ooo seed")
    assert (d.outcome, d.message, d.contexts) == \
        ("blocked", '✗ prompt blocked: hook "keywords" failed (timed out after 1 s)', [])
    assert d.warnings == [
        "⚠ hook keywords is failing (timed out after 1 s), so your prompts are blocked. "
        'Fix it, set on_failure = "continue", or restart with --no-hooks.']


def test_a_hook_that_is_not_executable_could_not_start(session: Session, hook: Hooks) -> None:
    # The guard lets it pass (it exists, outside the agent's folders); running it fails.
    d = call(runner(session, hook("broken", "not-executable.sh")))
    assert d.message is not None
    assert d.message.startswith(
        'the user\'s hook "broken" failed (could not start: Permission denied), so this call')


@pytest.mark.parametrize("sig", ["KILL", "TERM"])
def test_a_hook_killed_by_a_signal_fails(session: Session, hook: Hooks, sig: str) -> None:
    d = call(runner(session, hook("doomed", "self-kill.sh", sig)))
    assert d.warnings == [
        "⚠ hook doomed is failing (was killed by a signal), so the calls it covers are "
        'blocked. Fix it, set on_failure = "continue", or restart with --no-hooks.']


def test_context_over_10000_characters_is_cut_with_a_warning(session: Session,
                                                              hook: Hooks) -> None:
    r = runner(session, hook("big", "big-context.py", "11000", event="UserPromptSubmit"))
    d = r.user_prompt_submit("hello")
    assert d.contexts == ['Context from the user\'s hook "big":\n' + "c" * 10_000]
    assert d.warnings == [
        "⚠ hook big added 11,000 characters of context; only the first 10,000 are kept."]
    [row] = [x for x in d.records if x["type"] == "hook.context"]
    assert row["characters"] == 10_000


def test_a_5000_character_reason_is_cut_to_2000(session: Session, hook: Hooks) -> None:
    d = call(runner(session, hook("wordy", "long-reason.sh")))
    assert d.message == 'blocked by the user\'s hook "wordy": ' + "r" * 2000


def test_an_empty_reason_reads_as_no_reason_given(session: Session, hook: Hooks) -> None:
    d = call(runner(session, hook("terse", "block.sh", "")))
    assert d.message == 'blocked by the user\'s hook "terse" (no reason given)'
    p = runner(session, hook("terse", "block.sh", "", event="UserPromptSubmit"))
    assert p.user_prompt_submit("x").message == \
        '✗ prompt blocked by hook "terse" (no reason given)'


def test_a_prompt_hook_blocks_with_its_reason(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("keywords", "block.sh", "not on Fridays", event="UserPromptSubmit"))
    d = r.user_prompt_submit("deploy")
    assert (d.outcome, d.message) == \
        ("blocked", '✗ prompt blocked by hook "keywords": not on Fridays')


# -- order, tools, first block -------------------------------------------------------


def test_the_first_block_ends_the_run_and_later_hooks_never_start(
        session: Session, hook: Hooks, project: Path) -> None:
    r = runner(session,
               hook("first", "marker.py", "first"),
               hook("second", "block.sh", "stop here"),
               hook("third", "marker.py", "third"))
    d = call(r)
    assert (d.outcome, d.hook) == ("blocked", "second")
    assert (project / "ran-first").exists()
    assert not (project / "ran-third").exists()
    assert [x["hook"] for x in d.records if x["type"] == "hook.effect"] == ["first", "second"]


def test_a_hook_with_tools_runs_only_for_those_tools(session: Session, hook: Hooks,
                                                     project: Path) -> None:
    r = runner(session, hook("exec-only", "marker.py", "exec", tools=["exec"]),
               hook("every", "marker.py", "every"))
    assert call(r, "bash").outcome == "allowed"
    assert not (project / "ran-exec").exists()
    assert (project / "ran-every").read_text() == "x"
    call(r, "exec")
    assert (project / "ran-exec").exists()


def test_a_pre_tool_use_hook_does_not_run_for_prompts(session: Session, hook: Hooks,
                                                      project: Path) -> None:
    r = runner(session, hook("calls", "marker.py", "calls"))
    assert r.user_prompt_submit("hi").outcome == "allowed"
    assert not (project / "ran-calls").exists()


def test_a_blocked_prompt_keeps_none_of_the_contexts(session: Session, hook: Hooks) -> None:
    r = runner(session,
               hook("hint", "context.py", "a hint", event="UserPromptSubmit"),
               hook("gate", "block.sh", "no", event="UserPromptSubmit"))
    d = r.user_prompt_submit("ship it")
    assert (d.outcome, d.contexts) == ("blocked", [])
    assert [x for x in d.records if x["type"] == "hook.context"] == []


def test_contexts_of_several_hooks_keep_file_order(session: Session, hook: Hooks) -> None:
    r = runner(session,
               hook("one", "context.py", "first", event="UserPromptSubmit"),
               hook("two", "context.py", "second", event="UserPromptSubmit"))
    assert r.user_prompt_submit("x").contexts == [
        'Context from the user\'s hook "one":\nfirst',
        'Context from the user\'s hook "two":\nsecond']


# -- failures ------------------------------------------------------------------------


def test_on_failure_continue_skips_to_the_next_hook(session: Session, hook: Hooks,
                                                    project: Path) -> None:
    r = runner(session, hook("advisor", "exit-code.sh", "1", on_failure="continue"),
               hook("after", "marker.py", "after"))
    d = call(r)
    assert d.outcome == "allowed" and d.message is None
    assert d.warnings == [
        '⚠ hook advisor failed (exited with code 1); on_failure = "continue" let the call '
        "through."]
    assert (project / "ran-after").exists()
    [row] = decided(d)
    assert (row["decision"], row["failure"], row["went_ahead"]) == \
        ("failure", "exited with code 1", True)
    assert list(rec.transcript_rows(d.records)) == \
        ["· hook advisor failed (exited with code 1); the call went ahead"]


def test_on_failure_continue_lets_a_prompt_through(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("keywords", "exit-code.sh", "1", event="UserPromptSubmit",
                             on_failure="continue"))
    d = r.user_prompt_submit("x")
    assert d.outcome == "allowed"
    assert d.warnings == [
        '⚠ hook keywords failed (exited with code 1); on_failure = "continue" let the '
        "prompt through."]
    assert list(rec.transcript_rows(d.records)) == \
        ["· hook keywords failed (exited with code 1); the prompt went ahead"]


def test_on_failure_block_blocks_and_later_hooks_never_start(session: Session, hook: Hooks,
                                                             project: Path) -> None:
    r = runner(session, hook("enforcer", "exit-code.sh", "1"), hook("after", "marker.py", "a"))
    d = call(r)
    assert (d.outcome, d.hook) == ("blocked", "enforcer")
    assert d.message == (
        'the user\'s hook "enforcer" failed (exited with code 1), so this call was blocked. '
        "This is not a policy decision: retrying or rephrasing the call will not help. "
        "Tell the user their hook is failing.")
    assert not (project / "ran-a").exists()


def test_a_failure_warns_once_per_hook_per_turn(session: Session, hook: Hooks) -> None:
    r = runner(session, hook("enforcer", "exit-code.sh", "1"),
               hook("advisor", "exit-code.sh", "3", tools=["exec"], on_failure="continue"))
    first, second = call(r), call(r)
    assert first.warnings == [
        "⚠ hook enforcer is failing (exited with code 1), so the calls it covers are "
        'blocked. Fix it, set on_failure = "continue", or restart with --no-hooks.']
    assert second.outcome == "blocked" and second.warnings == []
    # Another hook failing in the same turn still gets its one warning.
    r2 = runner(session, hook("advisor", "exit-code.sh", "3", on_failure="continue"))
    assert len(call(r2).warnings) == 1 and call(r2).warnings == []
    r.new_turn()
    assert call(r).warnings == first.warnings


# -- cancel --------------------------------------------------------------------------


def assert_gone(marker: str) -> None:
    assert left_after(marker) == []


def test_cancel_interrupts_and_ends_the_hooks_whole_tree(session: Session, hook: Hooks,
                                                         project: Path) -> None:
    marker = f"{300 + uuid.uuid4().int % 10_000}.25"
    r = runner(session, hook("slow", "sleeper.sh", marker, timeout=60),
               hook("after", "marker.py", "after"))
    cancel = threading.Event()
    out: list[Decision] = []
    t = threading.Thread(target=lambda: out.append(call(r, cancel=cancel)))
    t.start()
    deadline = time.monotonic() + 10
    while not running_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running_with(marker), "the hook's child never started"
    cancel.set()
    t.join(5)
    assert not t.is_alive()
    [d] = out
    assert (d.outcome, d.hook, d.message) == ("interrupted", "slow", None)
    assert decided(d)[0]["decision"] == "interrupt"
    assert not (project / "ran-after").exists()
    assert_gone(marker)


def test_a_cancel_set_before_the_event_starts_nothing(session: Session, hook: Hooks,
                                                      project: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    d = call(runner(session, hook("m", "marker.py", "m")), cancel=cancel)
    assert d.outcome == "interrupted"
    assert not (project / "ran-m").exists()


# -- the envelope ----------------------------------------------------------------------


def test_the_hook_reads_the_envelope_the_seed_describes(session: Session, hook: Hooks,
                                                        project: Path) -> None:
    r = runner(session, hook("copy", "copy-stdin.py", "call"),
               hook("prompt-copy", "copy-stdin.py", "prompt", event="UserPromptSubmit"))
    inp = {"path": f"{project}/src/a.py", "root": str(project),
           "other": f"{project}-other/x", "command": f"cat {project}/src/a.py"}
    call(r, "read_file", inp, permission_mode="plan", session_id="SUBAGENT")
    raw = (project / "stdin-call").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    doc = json.loads(raw)
    assert doc == {"session_id": "SUBAGENT", "hook_event_name": "PreToolUse",
                   "cwd": str(project), "permission_mode": "plan", "tool_name": "read_file",
                   "tool_input": {"path": "src/a.py", "root": ".",
                                  "other": f"{project}-other/x",
                                  "command": f"cat {project}/src/a.py"},
                   "tool_use_id": "7EX"}
    r.user_prompt_submit("ooo seed")
    doc = json.loads((project / "stdin-prompt").read_bytes())
    assert doc == {"session_id": "01MSESSION", "hook_event_name": "UserPromptSubmit",
                   "cwd": str(project), "permission_mode": "auto", "prompt": "ooo seed"}
    assert "turn_id" not in doc and "transcript_path" not in doc


def test_an_mcp_call_carries_server_tool_and_arguments(session: Session, hook: Hooks,
                                                       project: Path) -> None:
    from launchers.harness.protocol import mcp_input

    r = runner(session, hook("mcp-audit", "copy-stdin.py", "mcp", tools=["mcp"]))
    call(r, "mcp", mcp_input("github", "create_issue", {"title": "t", "body": "b"}))
    doc = json.loads((project / "stdin-mcp").read_bytes())
    assert doc["tool_input"] == {"server": "github", "tool": "create_issue",
                                 "arguments": {"title": "t", "body": "b"}}


# -- guard at start, --no-hooks --------------------------------------------------------


def test_a_hook_in_the_project_refuses_to_start(session: Session, project: Path,
                                                where: str) -> None:
    check = project / "hooks" / "check.sh"
    check.parent.mkdir()
    check.write_text("#!/bin/sh\nexit 0\n")
    check.chmod(0o755)
    spec = HookSpec(name="no-force-push", event="PreToolUse", command=(str(check),),
                    sandbox=where == "boxed")
    with pytest.raises(HookRefused) as err:
        runner(session, spec)
    assert err.value.messages == (
        f"hook no-force-push: {check} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with "
        "--no-hooks.",)


def test_the_command_is_resolved_once_at_start(session: Session, where: str) -> None:
    spec = HookSpec(name="sh", event="PreToolUse", command=("sh", "-c", "exit 0"),
                    sandbox=where == "boxed")
    r = runner(session, spec)
    assert r.argv("sh")[0].startswith("/") and r.argv("sh")[1:] == ("-c", "exit 0")


def test_no_hooks_runs_nothing_and_is_recorded(session: Session, hook: Hooks, project: Path,
                                               tmp_path: Path) -> None:
    refused = HookSpec(name="inside", event="PreToolUse", command=(str(project / "x.sh"),))
    with rec.Recorder(tmp_path / "log") as rc:
        r = runner(session, hook("m", "marker.py", "m"), refused, no_hooks=True, recorder=rc)
        assert call(r).outcome == "allowed"
    assert not (project / "ran-m").exists()
    [started] = rec.read(tmp_path / "log")
    assert started["type"] == "session.started" and started["no_hooks"] is True
    assert [h["name"] for h in started["hooks"]] == ["m", "inside"]


# -- records, replay, resume -------------------------------------------------------------


def test_every_run_is_recorded_as_an_effect_under_its_input_digest(
        session: Session, hook: Hooks, tmp_path: Path) -> None:
    spec = hook("no-force-push", "no-force-push.sh")
    with rec.Recorder(tmp_path / "log") as rc:
        r = runner(session, spec, recorder=rc)
        call(r)
    started, running, effect, dec = rec.read(tmp_path / "log")
    assert started == {"type": "session.started", "hooks": [spec.definition()],
                       "no_hooks": False, "session_id": "01MSESSION"}
    assert running["type"] == "hook.started"
    assert effect["type"] == "hook.effect" and effect["hook"] == "no-force-push"
    from launchers.harness.protocol import pre_tool_use

    envelope = pre_tool_use("01MSESSION", session.policy.project_as_written, "auto", "bash",
                            PUSH, tool_use_id="7EX", project=session.policy.project)
    assert effect["input_digest"] == rec.digest(envelope)
    assert effect["result"]["outcome"] == "exited" and effect["result"]["returncode"] == 2
    assert effect["result"]["stderr"] == "force-push is not allowed here\n"
    assert dec["type"] == "hook.decided" and dec["decision"] == "block"


class NoRunSession:
    """A session whose run must never be called: a replay starts nothing."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def run(self, argv: Sequence[str], **kw: Any) -> RunResult:
        raise AssertionError(f"a replay started {argv[0]}")


def test_a_replay_serves_recorded_effects_and_starts_no_process(
        session: Session, hook: Hooks, project: Path, tmp_path: Path) -> None:
    specs = (hook("m", "marker.py", "m"), hook("keywords", "keyword-detector.py",
                                                event="UserPromptSubmit"),
             hook("no-force-push", "no-force-push.sh"))
    with rec.Recorder(tmp_path / "log") as rc:
        r = runner(session, *specs, recorder=rc)
        live = [r.user_prompt_submit("ooo seed"), call(r), call(r, tool_input=PULL)]
    (project / "ran-m").unlink()
    log = rec.read(tmp_path / "log")

    replayed = runner(NoRunSession(session.policy), *specs,  # type: ignore[arg-type]
                      replay=rec.Replay(log))
    again = [replayed.user_prompt_submit("ooo seed"), call(replayed),
             call(replayed, tool_input=PULL)]
    assert [(d.outcome, d.message, d.contexts) for d in again] == \
        [(d.outcome, d.message, d.contexts) for d in live]
    assert not (project / "ran-m").exists()


def test_a_resume_skips_a_changed_hook_with_a_warning(
        session: Session, hook: Hooks, project: Path, tmp_path: Path) -> None:
    old = (hook("no-force-push", "no-force-push.sh", timeout=10), hook("m", "marker.py", "m"))
    with rec.Recorder(tmp_path / "log") as rc:
        runner(session, *old, recorder=rc)
    recorded = rec.recorded_hooks(rec.read(tmp_path / "log"))
    assert recorded is not None
    today = (hook("no-force-push", "no-force-push.sh", timeout=20), old[1],
             hook("new", "block.sh", "new hooks wait for a clean resume"))
    with rec.Recorder(tmp_path / "log") as rc:
        r = runner(session, *today, recorded=recorded, recorder=rc)
        assert r.warnings == [
            "⚠ hook no-force-push is not run in this session: it is changed in your config "
            "since the session was recorded. Resume cleanly to use today's hooks."]
        d = call(r)
    assert d.outcome == "allowed"  # the changed blocker is skipped, the new one not run
    assert (project / "ran-m").exists()
    [skip] = decided(d)
    assert (skip["hook"], skip["decision"]) == ("no-force-push", "skip")
    resumed = [x for x in rec.read(tmp_path / "log") if x["type"] == "session.resumed"]
    assert [h["name"] for h in resumed[0]["hooks"]] == ["m"]
