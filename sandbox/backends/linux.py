"""The Linux box of one session: what it holds from the session's open to its end, and
how one command runs in it.

A :class:`LinuxBox` owns

- the bwrap backend (:mod:`.bwrap`): bwrap's path, the box's options, the descriptors
  of the pinned and protected paths it binds by, and the session's stage;
- the session's hardening (:mod:`sandbox.harden`): the system-call filter's
  descriptor, the Unix-socket guard, the control group, the ``/tmp`` tmpfs; it is
  handed to the backend here, once, and nowhere else;
- the warm box (:mod:`sandbox.warm`) and the allow-list's forwarder in it.

A run is plan, supervisor, read: in the warm box when the session has one, else in a box
of its own (``warm=False``), which the supervisor starts and reaps. :meth:`read` is the
one place a run's result is rewritten (bwrap's own failures taken out of it, a run the
memory bound killed said so).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.plan import BackendName, RunResult

from .box import BoxBase
from .bwrap import BwrapBackend

if TYPE_CHECKING:
    from collections.abc import Collection

    from sandbox.backends.kind import BoxKind
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes
    from sandbox.warm.seat import Forwarder


class LinuxBox(BoxBase):
    """One session's box on Linux. :meth:`open` holds, hardens and (``warm``) starts it;
    :meth:`close` gives everything back. Built and never opened (a bare
    :class:`~sandbox.session.Session`), each run is a plain box of its own, with no
    filter and no bounds."""

    name: BackendName = "bwrap"
    backend: BwrapBackend

    def __init__(self, policy: Policy, *, bwrap: str | None = None,
                 features: Collection[str] | None = None) -> None:
        super().__init__(policy)
        self.backend = BwrapBackend(policy, bwrap=bwrap, features=features)
        self._forwarder: Forwarder | None = None

    @property
    def kind(self) -> BoxKind:
        """The box this place allows (:mod:`.kind`): the container's /proc where a fresh
        one is refused."""
        return self.backend.kind

    def proxy(self) -> Network | None:
        """The allow-list's proxy on a Unix socket in the session's folder, which the
        warm box's forwarder relays to (the box has no network of its own to reach a
        port). Refused on a platform where this box is not Linux's."""
        if self.policy.network_allow is None:
            return None
        from sandbox.network.session import Network

        if self.policy.platform != "linux":
            from sandbox.errors import SandboxUnavailable

            raise SandboxUnavailable(  # refused, not run with no network or all of it
                f"[sandbox] network as a list has no box on {self.policy.platform}",
                "write network = false (no network) or true (all of it)")
        self.network = Network.open(self.policy, loopback=False)
        return self.network

    def open(self, *, held: tuple[str, ...] | None, warm: bool,
             meanwhile: Callable[[], None]) -> None:
        """Make the session's box: hold the binds below ``held`` (the git layout's
        roots), the filter, the guard and the bounds, and (``warm``) the warm box, with
        the allow-list's forwarder in it when :meth:`proxy` started the session's
        proxy. ``meanwhile`` runs while the warm box starts (else first). Raises
        :class:`~sandbox.errors.SandboxUnavailable`, or what ``meanwhile`` raises; what
        was made is then given back by :meth:`close`."""
        from sandbox.harden import Hardening

        # The warm box's starter mounts a fresh /proc for each run: not where one is
        # refused (the box with the container's /proc starts a box per run).
        warm = warm and not self.backend.kind.bound_proc
        if not warm:
            meanwhile()
        self.backend.check()
        if held is not None:
            self.backend.hold(held)
        limits = self.policy.limits
        self.hardening = h = Hardening.open(limits, boxed=True,
                                            private_tmp=self.policy.private_tmp,
                                            host_network=self.policy.network)
        self.backend.harden(shm_size=limits.shm_size, seccomp=h.seccomp_reader,
                            guard=h.guard, launcher=lambda: h.launcher().program)
        if warm:
            from sandbox.warm import seat

            self.warm = seat.open_box(self.backend, h, meanwhile=meanwhile)
            if self.policy.network_allow is not None:
                self._forwarder = seat.Forwarder.start(self)

    def close(self) -> None:
        """The forwarder, the warm box, the hardening and the proxy, then the held
        descriptors and the stage (the box's last users are gone by then)."""
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self.warm is not None:
            self.warm.close()
            self.warm = None
        super().close()
        self.backend.release()

    def _run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
             stdin: bytes, timeout: float | None, cancel: threading.Event | None,
             pipes: type[Pipes]) -> RunResult:
        """In the warm box when the session has one, else in a box of its own."""
        if self.warm is not None:
            from sandbox.warm import seat

            return self.read(seat.run(self, argv, env_extra=env_extra, stdin=stdin,
                                      timeout=timeout, cancel=cancel, pipes=pipes),
                             own_box=False)
        return self.read(self._supervised(argv, env_extra, box=True, stdin=stdin,
                                          timeout=timeout, cancel=cancel, pipes=pipes),
                         own_box=True)

    def read(self, result: RunResult, *, own_box: bool) -> RunResult:
        """``result`` as the command's own: a run in a box of its own (``own_box``) has
        bwrap's failures taken out of it (:meth:`BwrapBackend.read`, which raises for a
        box that could not be built; a warm run's start is said by the warm box's own
        PID 1, so its ``failed_to_start`` is the command's); a run the memory bound
        killed says so."""
        if own_box:
            result = self.backend.read(result)
        return result if self.hardening is None else self.hardening.memory_killed(result)
