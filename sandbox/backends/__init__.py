"""The backends, chosen once per session, here.

Each backend turns ``argv`` into a :class:`~sandbox.plan.LaunchPlan` (pure data: it
starts nothing) and reads its own results back into a
:class:`~sandbox.plan.RunResult` (bwrap's execvp line, its namespace errors):

- ``bwrap`` (:mod:`.bwrap`): the Linux box;
- ``seatbelt`` (:mod:`.seatbelt`): the macOS box, ``/usr/bin/sandbox-exec``;
- ``host`` (:mod:`.host`): a hook on the machine, from ``/``, with a pruned environment.

Nothing outside this package names a backend to decide something: the supervisor reads
what the plan says (watched or not, drain times), the session asks :func:`choose`.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from sandbox.plan import BackendName

if TYPE_CHECKING:
    from sandbox.plan import LaunchPlan, RunResult
    from sandbox.policy import Policy


class Backend(Protocol):
    """What a session needs of a backend."""

    name: BackendName

    def check(self) -> None:
        """Raise :class:`~sandbox.errors.SandboxUnavailable` now if the backend cannot
        run here, before anything runs."""

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        """The plan that runs ``argv``. Pure."""

    def read(self, result: RunResult) -> RunResult:
        """``result`` as the command's own: the backend's own failures taken out of it
        (``failed_to_start``), or raised as :class:`~sandbox.errors.SandboxUnavailable`."""


def box_name(platform: str = sys.platform) -> BackendName:
    """The backend that builds the box on ``platform``."""
    return "seatbelt" if platform == "darwin" else "bwrap"


def choose(policy: Policy, *, bwrap: str | None = None,
           features: Collection[str] | None = None) -> Backend:
    """The backend for the session's boxed commands: the host runner for a session with
    no box, else the platform's box. The box's own module is imported only here."""
    if not policy.boxed:
        return host_backend(policy)
    if box_name(policy.platform) == "seatbelt":
        from .seatbelt import SeatbeltBackend

        return SeatbeltBackend(policy)
    from .bwrap import BwrapBackend

    return BwrapBackend(policy, bwrap=bwrap, features=features)


def host_backend(policy: Policy) -> Backend:
    """The backend for host commands (``sandbox = false`` hooks, ``run --host``)."""
    from .host import HostBackend

    return HostBackend(policy)
