"""The macOS box of one session: nothing to keep warm.

Seatbelt applies a profile to the process ``sandbox-exec`` starts; there are no
namespaces to build, so there is nothing a later run could start inside (each run is one
``sandbox-exec``, a few milliseconds). What a :class:`MacBox` holds between runs is the
profile (computed at the first run, :class:`~.seatbelt.SeatbeltBackend`) and the
session's hardening, which on macOS is the reaping of what a run leaves (no filter, no
control group: a run is watched by its process group, as a host run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.box.base import BoxBase
from sandbox.macos.seatbelt import SeatbeltBackend
from sandbox.plan import BackendName, RunResult

if TYPE_CHECKING:
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes


class MacBox(BoxBase):
    """One session's box on macOS. The same life as :class:`~.linux.LinuxBox`:
    :meth:`open`, runs, :meth:`close`; its warm box is always None."""

    name: BackendName = "seatbelt"
    backend: SeatbeltBackend

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy)
        self.backend = SeatbeltBackend(policy)

    def proxy(self) -> Network | None:
        """The allow-list's proxy on 127.0.0.1: the box shares the host's network, and
        its profile opens the proxy's one port, which the box's policy now says."""
        if self.policy.network_allow is None:
            return None
        from sandbox.network.session import Network

        self.network = Network.open(self.policy, loopback=True)
        if self.network is not None and self.network.port:
            self.policy = self.policy._replace(proxy_port=self.network.port,
                                               proxy_token=self.network.proxy.token)
            self.backend = SeatbeltBackend(self.policy)
        return self.network

    def open(self, *, held: tuple[str, ...] | None, warm: bool,
             meanwhile: Callable[[], None]) -> None:
        """Check ``sandbox-exec``; ``held`` and ``warm`` mean nothing here (Seatbelt's
        rules name paths, which its profile resolves at the first run)."""
        from sandbox.box.harden import Hardening

        del held, warm
        meanwhile()
        self.backend.check()
        self.hardening = Hardening.open(self.policy.limits, boxed=False,
                                        private_tmp=self.policy.private_tmp)

    def _run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
             stdin: bytes, timeout: float | None, cancel: threading.Event | None,
             pipes: type[Pipes]) -> RunResult:
        """Under ``sandbox-exec``, watched by its process group."""
        return self.backend.read(self._supervised(argv, env_extra, box=False, stdin=stdin,
                                                  timeout=timeout, cancel=cancel,
                                                  pipes=pipes))
