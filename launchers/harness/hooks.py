"""One event through the configured hooks.

:class:`HookRunner` is what a harness embeds. At construction it resolves and guards
every hook's command once (a refusal stops the session before it starts); after that
no name is looked up again. Each event runs the hooks that cover it in file order:

* the first block ends the run and later hooks do not start;
* a failure blocks (``on_failure = "block"``, with a fixed message that is not the
  hook's output) or is skipped (``"continue"``), with one warning per hook per turn;
* a cancel (Esc) stops the running hook's whole tree and the event is "interrupted";
* a blocked prompt keeps none of the contexts the hooks before it added.

Every run is recorded as an effect filed under its input digest, so a replay serves it
and starts nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from launchers.admission import Admission, AdmittedHook
from launchers.admission import changed_since_start as changed_since_start
from launchers.config import Config, Event, HookSpec
from launchers.errors import HookRefused as HookRefused
from launchers.failure_hints import Failure, block_hints, describe, places_of
from launchers.harness import protocol
from launchers.harness import records as rec
from launchers.placement import check_config, check_records
from pathguard.argv import Refusal
from pathguard.identity import Pins
from pathguard.records import NamedTuple
from sandbox.plan import RunResult
from sandbox.policy import Policy

DecisionOutcome = Literal["allowed", "blocked", "interrupted"]


class SessionLike(Protocol):
    """What the runner needs of :class:`sandbox.session.Session`."""

    @property
    def policy(self) -> Policy: ...

    def run(
        self, argv: Sequence[str], *, stdin: bytes = b"", timeout: float | None = None,
        cancel: threading.Event | None = None, boxed: bool = True,
        env_extra: Mapping[str, str] | None = None,
    ) -> RunResult: ...


class Decision:
    """How one event ended.

    ``message`` is the model's text for a blocked call, or the panel line for a blocked
    prompt; None when allowed or interrupted. ``contexts`` are the framed texts to put
    after the prompt (always empty for a blocked prompt). ``hook`` names the hook that
    decided (None when allowed). ``records`` are the records this event produced.
    ``failures``: each failure's stderr tail and hints, beside the seed's texts
    (failure_hints). (A plain class: the dataclasses module costs every ``hook``
    command several milliseconds to import.)
    """

    __slots__ = ("contexts", "failures", "hook", "message", "outcome", "records", "warnings")

    def __init__(self, outcome: DecisionOutcome, message: str | None = None, *,
                 contexts: list[str] | None = None, warnings: list[str] | None = None,
                 records: list[rec.Record] | None = None, hook: str | None = None,
                 failures: list[Failure] | None = None) -> None:
        self.outcome = outcome
        self.message = message
        self.contexts: list[str] = [] if contexts is None else contexts
        self.warnings: list[str] = [] if warnings is None else warnings
        self.records: list[rec.Record] = [] if records is None else records
        self.hook = hook
        self.failures: list[Failure] = [] if failures is None else failures

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"Decision({shown})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass's

    @property
    def blocked(self) -> bool:
        return self.outcome == "blocked"


class _Hook(NamedTuple):
    spec: HookSpec
    admitted: AdmittedHook

    @property
    def argv(self) -> tuple[str, ...]:
        return self.admitted.argv

    @property
    def boxed(self) -> bool:
        return self.admitted.boxed

    @property
    def pins(self) -> Pins:
        """What the guard accepted, compared again before each run."""
        return self.admitted.pins


class _Step(NamedTuple):
    """What one part of an event adds to its :class:`Decision`: records, warnings, a
    failure, a context, and, when ``outcome`` is set, how the event ends."""

    records: tuple[rec.Record, ...] = ()
    warnings: tuple[str, ...] = ()
    # (hook, text): said once per hook per turn.
    warn_once: tuple[str, str] | None = None
    failure: Failure | None = None
    context: str | None = None
    outcome: DecisionOutcome | None = None
    hook: str | None = None
    message: str | None = None


def guard_hooks(hooks: Sequence[HookSpec], policy: Policy
                ) -> tuple[tuple[_Hook, ...], list[tuple[str, Refusal]]]:
    """Resolve and check each hook's command; the resolved hooks and every refusal."""
    admission = Admission(policy)
    out: list[_Hook] = []
    refusals: list[tuple[str, Refusal]] = []
    for spec in hooks:
        admitted, verdict = admission.admit(spec.name, spec.command, sandbox=spec.sandbox)
        if admitted is None:
            refusals.extend((spec.name, r) for r in verdict.details)
            continue
        out.append(_Hook(spec, admitted))
    return tuple(out), refusals


class HookRunner:
    """The configured hooks of one session segment.

    ``recorded`` turns on a crash resume: the hook definitions the log recorded. Only
    those run, and only those that today's ``config`` defines identically; the rest are
    skipped as no objection, with a warning in :attr:`warnings`. ``replay`` serves
    recorded effects instead of starting the hooks (a served effect is not recorded
    again; an input the log has no effect for runs live, as a resumed session goes on
    past its log). ``recorder`` receives every record, ``hook.started`` included.
    """

    def __init__(
        self,
        config: Config,
        session: SessionLike,
        *,
        no_hooks: bool = False,
        recorder: rec.Recorder | None = None,
        replay: rec.Replay | None = None,
        session_id: str | None = None,
        recorded: Sequence[Mapping[str, Any]] | None = None,
        resumed: bool = False,
    ) -> None:
        self.session = session
        self.policy = session.policy
        # Where the box cannot change them, whichever entry point built this runner.
        check_config(config, self.policy)
        if recorder is not None:
            check_records(recorder.path, self.policy)
        self.no_hooks = no_hooks
        self.recorder = recorder
        self.replay = replay
        self.session_id = session_id
        self.warnings: list[str] = []
        self._skipped: dict[str, dict[str, Any]] = {}
        self._warned: set[str] = set()

        specs: Sequence[HookSpec] = config.hooks
        if recorded is not None:
            plan = rec.plan_resume(recorded, config.hooks)
            specs = plan.run
            self._skipped = {str(d.get("name")): d for d in plan.skipped}
            self.warnings.extend(plan.warnings)
            resumed = True
        self.specs: tuple[HookSpec, ...] = tuple(specs)

        if no_hooks:
            self.hooks: tuple[_Hook, ...] = ()
        else:
            self.hooks, refusals = guard_hooks(self.specs, self.policy)
            if refusals:
                raise HookRefused([r.message for _, r in refusals], refusals)
        self._write(rec.session_record(self.specs, no_hooks=no_hooks, session_id=session_id,
                                       resumed=resumed))

    # -- public ----------------------------------------------------------------------

    def argv(self, name: str) -> tuple[str, ...]:
        """The resolved command a hook runs (argv[0] absolute)."""
        for h in self.hooks:
            if h.spec.name == name:
                return h.argv
        raise KeyError(name)

    def new_turn(self) -> None:
        """A new turn: failing hooks warn again."""
        self._warned.clear()

    def pre_tool_use(
        self, tool_name: str, tool_input: Mapping[str, Any], *, tool_use_id: str,
        permission_mode: str = "auto", session_id: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Decision:
        """Run the PreToolUse hooks that cover ``tool_name``."""
        sid = self._sid(session_id)
        roots = (self.policy.project_as_written, self.policy.project)

        def envelope() -> bytes:
            return protocol.pre_tool_use(sid, self.policy.project_as_written, permission_mode,
                                         tool_name, tool_input, tool_use_id=tool_use_id,
                                         project=roots)

        return self._fire("PreToolUse", tool_name, envelope, cancel)

    def user_prompt_submit(
        self, prompt: str, *, permission_mode: str = "auto", session_id: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Decision:
        """Run the UserPromptSubmit hooks for a prompt that opens a turn."""
        sid = self._sid(session_id)

        def envelope() -> bytes:
            return protocol.user_prompt_submit(sid, self.policy.project_as_written,
                                               permission_mode, prompt)

        return self._fire("UserPromptSubmit", None, envelope, cancel)

    # -- the run ---------------------------------------------------------------------

    def _sid(self, session_id: str | None) -> str:
        sid = session_id if session_id is not None else self.session_id
        if sid is None:
            raise ValueError("a session id is needed: pass session_id to the runner or call")
        return sid

    def _covers(self, spec: HookSpec, event: Event, tool: str | None) -> bool:
        if spec.event != event:
            return False
        return event != "PreToolUse" or spec.tools is None or tool in spec.tools

    def _write(self, record: rec.Record) -> None:
        if self.recorder is not None:
            self.recorder.write(record)

    def _record(self, d: Decision, step: _Step) -> bool:
        """The one place an event's decision changes: ``step`` added to ``d``. True
        when the step ends the event."""
        if step.failure is not None:
            d.failures.append(step.failure)
        d.warnings.extend(step.warnings)
        for record in step.records:
            d.records.append(record)
            self._write(record)
        if step.warn_once is not None and step.warn_once[0] not in self._warned:
            self._warned.add(step.warn_once[0])
            d.warnings.append(step.warn_once[1])
        if step.context is not None:
            d.contexts.append(step.context)
        if step.outcome is None:
            return False
        d.outcome, d.hook, d.message = step.outcome, step.hook, step.message
        return True

    def _run_one(self, hook: _Hook, event: Event, tool: str | None, envelope: bytes, *,
                 cancel: threading.Event | None) -> tuple[RunResult, _Step]:
        """Run ``hook`` (or serve its recorded effect): the result, and the effect's
        record as a step."""
        key = rec.digest(envelope)
        if self.replay is not None:
            served = self.replay.take(hook.spec.name, key)
            if served is not None:
                return served, _Step()
        if cancel is not None and cancel.is_set():
            return RunResult(outcome="cancelled"), _Step()
        self._write(rec.started_record(hook.spec.name, event, tool, key))
        # The project, as the envelope's cwd names it: Claude Code's hooks cd there.
        result = hook.admitted.run(self.session, stdin=envelope, timeout=hook.spec.timeout,
                                   cancel=cancel, env_extra={
                                       "CLAUDE_PROJECT_DIR": self.policy.project_as_written})
        return result, _Step(records=(rec.effect_record(hook.spec.name, key, result),))

    def refuse_call(self, tool_name: str, problem: str) -> Decision:
        """The decision for a call whose arguments cannot be read at all (``problem``, a
        phrase such as "nest deeper than 100 levels"): blocked, as
        :meth:`pre_tool_use` blocks arguments it cannot give to a hook, when a hook
        covers ``tool_name``; allowed when none does."""
        d = Decision("allowed")
        for hook in self.hooks:
            if self._covers(hook.spec, "PreToolUse", tool_name):
                self._record(d, _unreadable(hook.spec.name, "PreToolUse", tool_name, problem))
                return d
        return d

    def _why(self, hook: _Hook, kind: str, result: RunResult, event: Event) -> Failure:
        places = places_of(self.policy.read_write_paths(), self.policy.hidden)
        return describe(hook.spec.name, kind, result.stderr,
                        prompt=event == "UserPromptSubmit", boxed=hook.boxed, places=places,
                        argv=hook.argv)

    def _fire(self, event: Event, tool: str | None, make_envelope: Callable[[], bytes],
              cancel: threading.Event | None) -> Decision:
        """Run the hooks that cover the event, answer from each, and record each step."""
        d = Decision("allowed")
        contexts: list[tuple[str, str]] = []
        envelope: bytes | None = None

        self._record_skipped(d, event, tool)
        for hook in self.hooks:
            if not self._covers(hook.spec, event, tool):
                continue
            if envelope is None:
                try:
                    envelope = make_envelope()
                except protocol.EnvelopeError as err:
                    self._record(d, _unreadable(hook.spec.name, event, tool, str(err)))
                    return d
            result, ran = self._run_one(hook, event, tool, envelope, cancel=cancel)
            self._record(d, ran)
            answer = protocol.parse(result, event, timeout=hook.spec.timeout, boxed=hook.boxed)
            if answer.kind == "none":
                if answer.context is not None:
                    contexts.append((hook.spec.name, answer.context))
            elif self._record(d, self._answer(hook, event, tool, result, answer)):
                return d

        # Allowed: only now is any context kept (a later block would have dropped it).
        for name, text in contexts:
            self._record(d, _context(name, text))
        return d

    def _answer(self, hook: _Hook, event: Event, tool: str | None, result: RunResult,
                answer: protocol.Answer) -> _Step:
        """What a hook's answer other than no objection does to the event."""
        name, call = hook.spec.name, tool is not None
        if answer.kind == "interrupted":
            return _Step(records=(rec.decided_record(name, event, tool, "interrupt"),),
                         outcome="interrupted", hook=name)
        if answer.kind == "block":
            return _Step(
                warnings=tuple(block_hints(name, result.stderr, boxed=hook.boxed)),
                records=(rec.decided_record(name, event, tool, "block", reason=answer.reason),),
                outcome="blocked", hook=name,
                message=(protocol.call_blocked(name, answer.reason) if call
                         else protocol.prompt_blocked(name, answer.reason)))
        kind = answer.failure or "failed"
        why = self._why(hook, kind, result, event)
        if hook.spec.on_failure == "block":
            return _Step(
                failure=why,
                records=(rec.decided_record(name, event, tool, "failure", failure=kind,
                                            stderr=why.stderr),),
                warn_once=(name, protocol.failing_warning(name, kind, event)),
                outcome="blocked", hook=name,
                message=(protocol.call_failed(name, kind) if call
                         else protocol.prompt_failed(name, kind)))
        return _Step(
            failure=why,
            records=(rec.decided_record(name, event, tool, "failure", failure=kind,
                                        went_ahead=True, stderr=why.stderr),),
            warn_once=(name, protocol.continued_warning(name, kind, event)))

    def _record_skipped(self, d: Decision, event: Event, tool: str | None) -> None:
        """A resume's skipped hooks that would have run: recorded as skipped."""
        for name, definition in self._skipped.items():
            tools = definition.get("tools")
            if definition.get("event") == event and (
                    tool is None or tools is None or tool in tools):
                self._record(d, _Step(records=(rec.decided_record(
                    name, event, tool, "skip", reason="changed in the config since recorded"),)))


def _unreadable(hook: str, event: Event, tool: str | None, problem: str) -> _Step:
    """Fail closed: an input no hook can be given is blocked, whatever on_failure."""
    return _Step(records=(rec.decided_record(hook, event, tool, "refuse", reason=problem),),
                 outcome="blocked", hook=hook,
                 message=(protocol.call_unreadable(problem) if tool is not None
                          else protocol.prompt_unreadable(problem)))


def _context(name: str, text: str) -> _Step:
    """A hook's context, kept: cut to its bound (with a warning when cut) and framed."""
    kept, warning = protocol.cut_context(name, text)
    return _Step(warnings=() if warning is None else (warning,),
                 records=(rec.context_record(name, kept),),
                 context=protocol.frame_context(name, kept))


def new_session_id() -> str:
    """A fresh random session id."""
    return os.urandom(13).hex().upper()
