"""Admission: which hooks may run in a session, decided once, before it starts.

One place for the rule that ``audit``, the hook runner and the openHarness front end
share: a hook runs boxed only when it asks for the box and the session has one; its
command is checked by pathguard against the folders the agent can write (and, boxed,
the folders the box hides); a host hook in a boxed session looks its program up on
the PATH it will run with (pruned of the agent's folders), a boxed one on the session's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pathguard.argv import CommandVerdict, Refusal, check_command, prune_path
from pathguard.guard import Guard
from sandbox.policy import Policy


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
        return sandbox and self.policy.boxed

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
        return boxed, verdict
