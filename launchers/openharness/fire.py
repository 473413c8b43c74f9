"""One openHarness event through its hooks, over the session's runner.

Command hooks run through the session: on the host (from ``/``, provider keys removed,
PATH pruned) by default, in the box with ``sandbox: true``. Every command hook's words
are checked by pathguard before anything runs (:func:`check`), exactly as a
``[[hooks]]`` hook is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from launchers import bounded
from launchers.admission import Admission, AdmittedHook, runs_boxed
from launchers.openharness.answers import OhAnswer, _failed, answer_of_http, answer_of_run
from launchers.openharness.config import (
    CONTEXT_EVENTS,
    EVENTS,
    GATING_EVENTS,
    TOOL_EVENTS,
    OhConfig,
    OhHook,
)
from launchers.openharness.envelope import Context, env_vars, envelope
from launchers.openharness.http import post_json
from pathguard.records import NamedTuple
from sandbox.plan import RunResult

if TYPE_CHECKING:
    from pathguard.argv import CommandVerdict
    from sandbox.policy import Policy
    from sandbox.session import Session

OhDecision = Literal["allow", "deny", "ask"]


class CommandRunner(Protocol):
    """Runs one command hook to its end: in the box (in the project) when it asks for the
    box (``sandbox``) and the session has one, else on the host."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes,
        timeout: float,
        env_extra: Mapping[str, str],
        sandbox: bool,
        cancel: threading.Event | None,
    ) -> RunResult: ...


def session_runner(session: Session,
                   admitted: Mapping[tuple[str, bool], AdmittedHook] | None = None
                   ) -> CommandRunner:
    """Run command hooks through ``session``: a ``sandbox: true`` hook in its box when
    the session has one, every other hook on the host. ``admitted`` holds the hooks
    :func:`admit` let through, by command string and ``sandbox``: each checks its pins
    again before it runs, and one whose files changed since is not run."""

    def run(
        argv: Sequence[str],
        *,
        stdin: bytes,
        timeout: float,
        env_extra: Mapping[str, str],
        sandbox: bool,
        cancel: threading.Event | None,
    ) -> RunResult:
        hook = admitted.get((argv[-1], sandbox)) if admitted else None
        if hook is None:  # fired without admission: nothing to compare
            hook = AdmittedHook(tuple(argv), runs_boxed(sandbox, session.policy.boxed))
        return hook.run(session, stdin=stdin, timeout=timeout, cancel=cancel,
                        env_extra=env_extra)

    return run


@dataclass(frozen=True)
class Result:
    """An event's outcome after its hooks ran.

    ``decision`` is None when no hook gave one, and always None on a non-gating event.
    ``ran`` names each hook that ran, in order; ``decided_by`` the hook whose answer is
    the decision (deny, a hookSpecificOutput allow, or the first ask). ``warnings`` say
    which hooks failed.
    """

    event: str
    decision: OhDecision | None = None
    reason: str | None = None
    additional_context: str | None = None
    ran: tuple[str, ...] = ()
    decided_by: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def denied(self) -> bool:
        return self.decision == "deny"

    def to_json(self) -> dict[str, Any]:
        """The outcome as ``hook --openharness --json`` prints it (after its version)."""
        return {
            "event": self.event,
            "decision": self.decision,
            "reason": self.reason,
            "additionalContext": self.additional_context,
            "ran": list(self.ran),
        }


class UnreadableInput(dict[str, Any]):
    """Tool input that could not be read at all (the ``hook`` command's ``--input`` past
    a limit of :mod:`launchers.bounded`): every hook it reaches fails with ``problem``,
    which denies on a gating event, as input that cannot be given to a hook does."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


def _input_problem(ctx: Context) -> str | None:
    """Why the event's input cannot be given to a hook, or None. Iterative: the JSON
    writer recurses, so the limits are checked before it runs."""
    if isinstance(ctx.tool_input, UnreadableInput):
        return f"its tool input {ctx.tool_input.problem}"
    try:
        bounded.copy_json(dict(ctx.tool_input))
        bounded.copy_json(dict(ctx.extra))
    except bounded.BoundsError as err:
        return f"its input {err}"
    return None


def _given(hook: OhHook, ctx: Context) -> tuple[bytes, dict[str, str]]:
    """What a hook is given: its stdin (or HTTP body) and its variables."""
    data = b""
    if hook.http is not None or hook.json_io:
        data = json.dumps(envelope(hook.event, ctx), ensure_ascii=False).encode("utf-8",
                                                                               "replace")
    return data, env_vars(hook.event, ctx)


def run_hook(
    hook: OhHook,
    ctx: Context,
    *,
    runner: CommandRunner,
    cancel: threading.Event | None = None,
) -> OhAnswer:
    """Run one hook and say what its answer is. Input that cannot be given to it (past
    the limits, or not JSON) is a failure: a deny on a gating event."""
    timeout = hook.timeout_ms / 1000
    problem = _input_problem(ctx)
    if problem is None:
        try:
            data, env = _given(hook, ctx)
        except (TypeError, ValueError):  # an integer of more digits than Python writes
            problem = "its input cannot be written as JSON"
    if problem is not None:
        return _failed(hook.label, f"could not be given the event: {problem}")
    if hook.http is not None:
        reply, error = post_json(hook.http, data, timeout, cancel)
        return answer_of_http(hook, reply, error)
    assert hook.command is not None
    result = runner(
        _argv(hook.command),
        stdin=data,
        timeout=timeout,
        env_extra=env,
        sandbox=hook.sandbox,
        cancel=cancel,
    )
    return answer_of_run(hook, result)


def fire(
    config: OhConfig,
    event: str,
    ctx: Context,
    *,
    runner: CommandRunner,
    cancel: threading.Event | None = None,
) -> Result:
    """Run ``event``'s hooks in list order and merge their answers.

    The first deny ends the run (later hooks do not run), as does the first
    ``hookSpecificOutput.decision: "allow"``; ``additionalContext`` values join with a
    blank line in list order; "ask" when a hook asked and none denied or allowed; else
    "allow" when a hook allowed, else None. On a non-gating event every matching hook
    runs and the decision stays None.
    """
    if event not in EVENTS:
        raise ValueError(f'unknown openHarness event "{event}"')
    merge = _Merge(event)
    for hook in config.for_event(event):
        if event in TOOL_EVENTS and not hook.matches(ctx.tool_name):
            continue
        if cancel is not None and cancel.is_set():
            # Nothing more starts; on a gating event an unfinished run is a deny.
            if merge.gating:
                return merge.result("deny", "cancelled", None)
            break
        ended = merge.take(hook, run_hook(hook, ctx, runner=runner, cancel=cancel))
        if ended is not None:
            return ended
    return merge.end()


class _Merge:
    """The answers of one event's hooks so far, merged in list order."""

    def __init__(self, event: str) -> None:
        self.event = event
        self.gating = event in GATING_EVENTS
        self.ran: list[str] = []
        self.contexts: list[str] = []
        self.warnings: list[str] = []
        self.first_ask: tuple[str, OhAnswer] | None = None
        self.allowed = False

    def result(self, decision: OhDecision | None, reason: str | None,
               by: str | None) -> Result:
        return Result(
            event=self.event,
            decision=decision,
            reason=reason,
            additional_context="\n\n".join(self.contexts) if self.contexts else None,
            ran=tuple(self.ran),
            decided_by=by,
            warnings=tuple(self.warnings),
        )

    def take(self, hook: OhHook, answer: OhAnswer) -> Result | None:
        """Add one hook's answer; the event's result when the answer ends the run."""
        self.ran.append(hook.label)
        if answer.failure is not None:
            self.warnings.append(f"hook {hook.label} failed ({answer.failure})")
        if not self.gating:
            return None
        if answer.additional_context and self.event in CONTEXT_EVENTS:
            self.contexts.append(answer.additional_context)
        if answer.kind == "deny":
            return self.result("deny", answer.reason or f"denied by hook {hook.label}",
                               hook.label)
        if answer.kind == "allow!":
            return self.result("allow", answer.reason, hook.label)
        if answer.kind == "ask" and self.first_ask is None:
            self.first_ask = (hook.label, answer)
        if answer.kind == "allow":
            self.allowed = True
        return None

    def end(self) -> Result:
        """Every hook had its say: ask, allow, or no decision."""
        if self.first_ask is not None:
            return self.result("ask", self.first_ask[1].reason, self.first_ask[0])
        if self.allowed:
            return self.result("allow", None, None)
        return self.result(None, None, None)


class Admitted(NamedTuple):
    """An openHarness file's command hooks after the guard: the verdict on each, by
    label, and the hooks it let through, by command string and ``sandbox`` (as
    :func:`session_runner` finds them)."""

    checked: list[tuple[str, CommandVerdict]]
    hooks: dict[tuple[str, bool], AdmittedHook]

    @property
    def refusals(self) -> list[str]:
        return [msg for _, verdict in self.checked for msg in verdict.refusals]


def admit(config: OhConfig, *, policy: Policy) -> Admitted:
    """The guard's verdict on every command hook of ``config``, and those it admits.

    A ``sandbox: true`` hook is checked as a boxed ``[[hooks]]`` hook (the box's ``/tmp``
    and hidden folders count), any other as a host hook. An admitted hook runs its
    command through ``/bin/sh -c``, as :func:`run_hook` gives it.
    """
    admission = Admission(policy)
    checked: list[tuple[str, CommandVerdict]] = []
    hooks: dict[tuple[str, bool], AdmittedHook] = {}
    for hook in config.all_hooks():
        if hook.command is None:
            continue
        admitted, verdict = admission.admit(hook.label, hook.words, sandbox=hook.sandbox,
                                            runs=_argv(hook.command))
        checked.append((hook.label, verdict))
        if admitted is not None:
            hooks[(hook.command, hook.sandbox)] = admitted
    return Admitted(checked, hooks)


def check(config: OhConfig, *, policy: Policy) -> list[tuple[str, CommandVerdict]]:
    """The guard's verdict on every command hook of ``config`` (see :func:`admit`)."""
    return admit(config, policy=policy).checked


def _argv(command: str) -> tuple[str, ...]:
    """What runs for a command hook: its string, by the shell."""
    return ("/bin/sh", "-c", command)
