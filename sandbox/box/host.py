"""The host runner: ``(Policy, argv) -> LaunchPlan`` for a hook that runs on the machine.

A host hook starts in ``/`` so that nothing it or its interpreter loads by a relative
name comes from the project. ``argv[0]`` was resolved to an absolute path by pathguard
when the session started; nothing is looked up again here or at run time.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from sandbox.plan import BackendName, LaunchPlan, RunResult
from sandbox.policy import Policy
from sandbox.policy.startenv import host_env


def plan(
    policy: Policy,
    argv: Sequence[str],
    *,
    env_extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """The plan for running ``argv`` on the host. Pure: builds data, starts nothing.

    ``base_env`` is ``host_env(policy)`` when the caller already has it (a session
    computes it once: pruning PATH walks every entry).

    Raises :class:`ValueError` for an empty command or a ``command[0]`` that is not an
    absolute path.
    """
    args = tuple(argv)
    if not args:
        raise ValueError("the command is empty")
    if not os.path.isabs(args[0]):
        raise ValueError(f"the program {args[0]} is not an absolute path")
    # The caller's additions scrubbed and pruned as the session's own are: no caller
    # hands a provider key to a hook by accident, nor a host run a loader the box wrote.
    env = host_env(policy, env_extra, base=base_env)
    return LaunchPlan(
        backend="host",
        argv=args,
        env=env,
        cwd="/",
        description=shlex.join(args),
    )


class HostBackend:
    """Host commands of one session. The environment is computed once: pruning PATH walks
    every entry."""

    name: BackendName = "host"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._env: Mapping[str, str] | None = None

    def env(self) -> Mapping[str, str]:
        """The environment a host command starts from."""
        if self._env is None:
            self._env = host_env(self.policy)
        return self._env

    def check(self) -> None:
        """The host is always there."""

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        return plan(self.policy, argv, env_extra=env_extra, base_env=self.env())

    def read(self, result: RunResult) -> RunResult:
        return result
