"""Admission: which hooks may run in a session, decided once, before it starts.

One place for the rule that ``audit``, the hook runner and the openHarness front end
share: a hook runs boxed only when it asks for the box and the session has one; its
command is checked by pathguard against the folders the agent can write (and, boxed,
the folders the box hides); a host hook in a boxed session looks its program up on
the PATH it will run with (pruned of the agent's folders), a boxed one on the session's.
A hook let through is an :class:`AdmittedHook`: before each run it checks again that its
files are what the guard accepted, then runs itself, on both fronts.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from pathguard.argv import CommandVerdict, Refusal, check_command, prune_path
from pathguard.guard import Guard
from pathguard.identity import Pins
from pathguard.records import NamedTuple
from sandbox.plan import RunResult
from sandbox.policy import Policy


def runs_boxed(asks: bool, session_boxed: bool) -> bool:
    """Whether a hook that asks for the box (``asks``) runs in it: only when the session
    has one."""
    return asks and session_boxed


class Runs(Protocol):
    """What an admitted hook needs to run: :meth:`sandbox.session.Session.run`."""

    def run(
        self, argv: Sequence[str], *, stdin: bytes = b"", timeout: float | None = None,
        cancel: threading.Event | None = None, boxed: bool = True,
        env_extra: Mapping[str, str] | None = None,
    ) -> RunResult: ...


def changed_since_start(path: str) -> RunResult:
    """The run that did not start because ``path`` is not what the guard checked: the
    failure reads ``could not start: <path> changed since the session started``."""
    return RunResult(outcome="failed_to_start",
                     error=f"{path} changed since the session started")


class AdmittedHook(NamedTuple):
    """A hook admission let through: the command it runs, whether in the box, and what
    the guard accepted (see :mod:`pathguard.identity`), compared again before each run."""

    argv: tuple[str, ...]
    boxed: bool
    pins: Pins = Pins()

    def run(self, session: Runs, *, stdin: bytes, timeout: float,
            cancel: threading.Event | None, env_extra: Mapping[str, str]) -> RunResult:
        """Re-check the pins, then run in ``session``: a hook whose files changed since
        the check does not start."""
        changed = self.pins.changed()
        if changed is not None:
            return changed_since_start(changed)
        return session.run(self.argv, stdin=stdin, timeout=timeout, cancel=cancel,
                           boxed=self.boxed, env_extra=env_extra)


class Admission:
    """Checks hook commands against one policy. The guard for boxed hooks and the one for
    host hooks are each built once, so a thousand hooks share one picture of the file
    system and the work of walking it."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._guards: dict[bool, Guard] = {}
        self._paths: dict[bool, str | None] = {}

    def boxed(self, sandbox: bool) -> bool:
        """Whether a hook with ``sandbox = <sandbox>`` runs in the box this session."""
        return runs_boxed(sandbox, self.policy.boxed)

    def guard(self, boxed: bool) -> Guard:
        guard = self._guards.get(boxed)
        if guard is None:
            guard = self._guards[boxed] = self.policy.guard(boxed=boxed)
        return guard

    def path_env(self, boxed: bool) -> str | None:
        """The PATH a bare ``command[0]`` is looked up on, once, at start."""
        if boxed not in self._paths:
            path = self.policy.env.get("PATH")
            if not boxed and self.policy.boxed:
                path = prune_path(path, self.guard(False))
            self._paths[boxed] = path
        return self._paths[boxed]

    def check(self, name: str, command: Sequence[str], *, sandbox: bool
              ) -> tuple[bool, CommandVerdict]:
        """(runs boxed, the verdict) for hook ``name``'s command. An empty command is
        refused rather than raised: a config loader lets none through, but a front end
        that builds commands itself might."""
        boxed = self.boxed(sandbox)
        if not command:
            empty = Refusal("", f"hook {name}: the command is empty.", "not-found")
            return boxed, CommandVerdict((), (empty,), ())
        verdict = check_command(name, command, project=self.policy.project,
                                guard=self.guard(boxed), path_env=self.path_env(boxed))
        if verdict.details:
            # A command written as for a shell: the refusal shows the fix.
            from launchers.command_fixes import with_fixes

            verdict = unexpanded(name, with_fixes(verdict, command, self.policy.env),
                                 command, self.policy)
        return boxed, verdict

    def admit(self, name: str, command: Sequence[str], *, sandbox: bool,
              runs: Sequence[str] | None = None) -> tuple[AdmittedHook | None, CommandVerdict]:
        """Hook ``name`` ready to run (None when its verdict refuses it), and the verdict.
        It runs the command as resolved, or ``runs`` when given (openHarness runs its
        words through ``/bin/sh -c``)."""
        boxed, verdict = self.check(name, command, sandbox=sandbox)
        if verdict.details:
            return None, verdict
        argv = tuple(runs) if runs is not None else tuple(verdict.argv)
        return AdmittedHook(argv, boxed, verdict.pins), verdict


def unexpanded(name: str, verdict: CommandVerdict, command: Sequence[str], policy: Policy
               ) -> CommandVerdict:
    """A later element refused as in the project because it starts with ``~`` or holds
    ``$VAR``: said as what it is. Nothing expands them, so the text is checked (and
    given to the hook) as written, a path relative to the project; the fix is the path
    written out. The refusal's kind and folder stay the guard's."""
    from launchers.command_fixes import expand
    from sandbox.text import escape

    details = []
    for r in verdict.details:
        text = r.path
        out, unset = expand(text, policy.env)
        shell = out != text or unset  # a variable or a leading ~ in it
        if r.kind != "project" or not shell or text == command[0] or text.startswith("/"):
            details.append(r)
            continue
        names = ", ".join(f"${n}" for n in dict.fromkeys(unset))
        fix = (f"write the path out ({names} {'is' if len(unset) == 1 else 'are'} not set "
               "here)" if unset else f"write the path out: {escape(out)}")
        details.append(r._replace(message=(
            f"hook {name}: {escape(text)} is not expanded: no shell runs the command, so "
            "variables and ~ stay as written, and as written it is a path relative to the "
            f"project ({escape(policy.project.rstrip('/') + '/' + text)}), which the agent "
            f"could create or change; {fix}.")))
    return verdict._replace(details=tuple(details))
