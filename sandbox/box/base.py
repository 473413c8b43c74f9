"""What every platform's box shares (:class:`~.linux.LinuxBox`, :class:`~.macos.MacBox`):
its policy, hardening and proxy, a run's plan, and the run itself with what the proxy
refused while it ran. Each platform says how a command runs (``_run``) and what else
it holds."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.box import Backend, supervised
from sandbox.linux.kind import BoxKind
from sandbox.plan import LaunchPlan, RunResult

if TYPE_CHECKING:
    from sandbox.linux.harden import Hardening
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes
    from sandbox.warm.client import WarmBox


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
