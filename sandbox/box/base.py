"""What a backend and a session's box are (:class:`Backend`, :class:`Box`), what every
platform's box shares (:class:`BoxBase`: :class:`~sandbox.linux.linuxbox.LinuxBox`,
:class:`~sandbox.linux.landlockbox.LandlockBox`, :class:`~sandbox.macos.macbox.MacBox`),
and a run through the supervisor (:func:`supervised`).

Each backend turns ``argv`` into a :class:`~sandbox.plan.LaunchPlan` (data: it starts
nothing) and reads its own results back into a :class:`~sandbox.plan.RunResult` (bwrap's
execvp line, its namespace errors). A box owns what it holds from the session's open to
its end; its ``run`` is plan, supervisor, read, with what the proxy refused while it ran.
Each platform says how a command runs (``_run``) and what else it holds."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from sandbox.box.kind import BoxKind
from sandbox.plan import BackendName, LaunchPlan, RunResult

if TYPE_CHECKING:
    from sandbox.box.harden import Hardening
    from sandbox.linux.warm.client import WarmBox
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes


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
    # The session's filter, bounds and groups (sandbox/box/harden.py), from open() on.
    hardening: Hardening | None
    # The warm box (sandbox/linux/warm/), where boxed runs start; None on macOS, or warm=False.
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

    def appeared(self) -> tuple[str, ...]:
        """Protected names missing at the open that are there now, which the box would
        hold from now on (:meth:`adopt`); asked only while no run of any of the user's
        sessions is going (:mod:`sandbox.process.runs`), so what appeared is the host's."""

    def adopt(self, paths: tuple[str, ...]) -> None:
        """Hold ``paths``, which appeared on the host, as it holds what was there at the
        open: from the next run on."""

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


class BoxBase:
    """A session's box: built from the policy; ``open`` and ``proxy`` are the
    platform's; :meth:`close` gives back the hardening and the proxy."""

    backend: Backend

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.hardening: Hardening | None = None
        self.network: Network | None = None
        self.warm: WarmBox | None = None

    def check(self) -> None:
        """Raise :class:`~sandbox.errors.SandboxUnavailable` now if the box cannot be
        built here."""
        self.backend.check()

    @property
    def kind(self) -> BoxKind:
        """The box in force here and what it gives up (:mod:`.kind`)."""
        return BoxKind(self.backend.name)

    def said(self) -> list[str]:
        """Nothing to say, but in the Landlock box (:mod:`.landlockbox`)."""
        return []

    def appeared(self) -> tuple[str, ...]:
        """Nothing kept here (Seatbelt denies names, there or not)."""
        return ()

    def adopt(self, paths: tuple[str, ...]) -> None:
        """Nothing to do: Seatbelt's rules name the paths, there or not."""

    def close(self) -> None:
        if self.hardening is not None:
            self.hardening.close()
            self.hardening = None
        if self.network is not None:
            self.network.close()
            self.network = None

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        """The plan of one run in a box of its own (the backend's)."""
        return self.backend.plan(argv, env_extra)

    def run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
            stdin: bytes, timeout: float | None, cancel: threading.Event | None,
            pipes: type[Pipes]) -> RunResult:
        """Run ``argv`` in the box to its end, and everything it started; what the
        session's proxy refused meanwhile is in the result, and why a failed command
        failed where the box refused it (:mod:`sandbox.box.hints`)."""
        net = self.network
        mark = net.proxy.mark() if net is not None else 0
        result = self._run(argv, env_extra=env_extra, stdin=stdin, timeout=timeout,
                           cancel=cancel, pipes=pipes)
        if net is not None:
            result = result._replace(refused=net.proxy.since(mark))
        from sandbox.box.hints import with_hint

        return with_hint(result, self.policy)

    def _run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
             stdin: bytes, timeout: float | None, cancel: threading.Event | None,
             pipes: type[Pipes]) -> RunResult:
        raise NotImplementedError

    def _supervised(self, argv: Sequence[str], env_extra: Mapping[str, str] | None, *,
                    box: bool, stdin: bytes, timeout: float | None,
                    cancel: threading.Event | None, pipes: type[Pipes]) -> RunResult:
        """``argv`` in a box of its own, through the supervisor (:func:`supervised`)."""
        return supervised(self.backend.plan(argv, env_extra), self.hardening, box=box,
                          stdin=stdin, timeout=timeout, cancel=cancel,
                          output_cap=self.policy.output_cap, pipes=pipes)
