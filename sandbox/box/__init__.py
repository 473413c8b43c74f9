"""The backends, chosen once per session, here.

Each backend turns ``argv`` into a :class:`~sandbox.plan.LaunchPlan` (pure data: it
starts nothing) and reads its own results back into a
:class:`~sandbox.plan.RunResult` (bwrap's execvp line, its namespace errors):

- ``bwrap`` (:mod:`.bwrap`): the Linux box;
- ``seatbelt`` (:mod:`.seatbelt`): the macOS box, ``/usr/bin/sandbox-exec``;
- ``host`` (:mod:`.host`): a hook on the machine, from ``/``, with a pruned environment.

A session's box is one object per platform (:class:`Box`), which :func:`choose` makes:
:class:`~.linux.LinuxBox` (the bwrap backend, the filter, the bounds, the warm box) and
:class:`~.macos.MacBox`. It owns what the box holds from the session's open to its end,
and its ``run`` is plan, supervisor, read.

Nothing outside this package names a backend to decide something: the supervisor reads
what the plan says (watched or not, drain times), the session asks :func:`choose`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from sandbox.plan import BackendName
from sandbox.platform import PLATFORM

if TYPE_CHECKING:
    from sandbox.linux.harden import Hardening
    from sandbox.linux.kind import BoxKind
    from sandbox.network.session import Network
    from sandbox.plan import LaunchPlan, RunResult
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes
    from sandbox.warm.client import WarmBox


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


class Box(Protocol):
    """A session's box on one platform: what it holds between runs, and its runs."""

    name: BackendName
    # The session's filter, bounds and groups (sandbox/linux/harden.py), from open() on.
    hardening: Hardening | None
    # The warm box (sandbox/warm/), where boxed runs start; None on macOS, or warm=False.
    warm: WarmBox | None

    @property
    def backend(self) -> Backend:
        """The backend that plans a run and reads its result."""

    @property
    def kind(self) -> BoxKind:
        """The box in force here and what it gives up (:mod:`.kind`)."""

    def check(self) -> None:
        """Raise :class:`~sandbox.errors.SandboxUnavailable` now if the box cannot be
        built here."""

    # The session's proxy (sandbox/network/), from proxy() on, when it has an allow-list.
    network: Network | None
    # The policy the box was built for, with the proxy's port once proxy() started it.
    policy: Policy

    def proxy(self) -> Network | None:
        """Start the session's allow-list proxy where this box reaches it (None for a
        policy without an allow-list), before :meth:`open`. Raises
        :class:`~sandbox.errors.SandboxUnavailable`."""

    def open(self, *, held: tuple[str, ...] | None, warm: bool,
             meanwhile: Callable[[], None]) -> None:
        """Make what the session's box holds: the binds below ``held``, the hardening,
        the warm box (``warm``, where the platform has one). ``meanwhile`` is called
        once in the caller's thread before this returns, while the warm box starts
        where there is one; what it raises is raised, and :meth:`close` gives back
        what was made."""

    def close(self) -> None:
        """Give back everything :meth:`proxy` and :meth:`open` made."""

    def said(self) -> list[str]:
        """What the box did to keep a promise since the last call (the Landlock box's
        put-back files), for the session's warnings."""

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        """The plan of one run in a box of its own. Pure but for the descriptors it
        holds (``run_fds``)."""

    def run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
            stdin: bytes, timeout: float | None, cancel: threading.Event | None,
            pipes: type[Pipes]) -> RunResult:
        """Run ``argv`` in the box to its end (and everything it started)."""


def supervised(plan: LaunchPlan, hardening: Hardening | None, *, box: bool, stdin: bytes,
               timeout: float | None, cancel: threading.Event | None, output_cap: int,
               pipes: type[Pipes]) -> RunResult:
    """``plan`` through the supervisor (its one spawn point, which always reaps), under
    the session's ``hardening`` when it has one: bounded as a Linux box's run (``box``),
    else grouped as a host run. The plan's own descriptors are closed after it."""
    from sandbox.process import supervisor

    if hardening is None:
        try:
            return supervisor.run(plan, stdin=stdin, timeout=timeout, cancel=cancel,
                                  output_cap=output_cap, pipes=pipes)
        finally:
            for fd in plan.run_fds:
                os.close(fd)
    return hardening.supervise(plan, lambda start, spawn: supervisor.run(
        plan, stdin=stdin, timeout=timeout, cancel=cancel, output_cap=output_cap,
        on_start=start, spawn=spawn, pipes=pipes), box=box)


def box_name(platform: str = PLATFORM) -> BackendName:
    """The backend that builds the box on ``platform``."""
    return "seatbelt" if platform == "darwin" else "bwrap"


def choose(policy: Policy, *, bwrap: str | None = None,
           features: Collection[str] | None = None) -> Box:
    """The box of a session whose commands are boxed (``policy.boxed``): the platform's
    own. The one place the platform is chosen; its modules are imported only here."""
    if not policy.boxed:
        raise ValueError("a session with no box has no box to choose")
    if box_name(policy.platform) == "seatbelt":
        from sandbox.macos.macbox import MacBox

        return MacBox(policy)
    if policy.box == "landlock":
        from sandbox.linux.landlockbox import LandlockBox

        return LandlockBox(policy)
    from sandbox.linux.linuxbox import LinuxBox

    return LinuxBox(policy, bwrap=bwrap, features=features)


def host_backend(policy: Policy) -> Backend:
    """The backend for host commands (``sandbox = false`` hooks, ``run --host``)."""
    from sandbox.box.host import HostBackend

    return HostBackend(policy)
