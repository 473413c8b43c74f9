"""The Linux box of one session: what it holds from the session's open to its end, and
how one command runs in it.

A :class:`LinuxBox` owns

- the bwrap backend (:mod:`.bwrap`): bwrap's path, the box's options, the descriptors
  of the pinned and protected paths it binds by, and the session's stage;
- the session's hardening (:mod:`sandbox.box.harden`): the system-call filter's
  descriptor, the Unix-socket guard, the control group, the ``/tmp`` tmpfs; it is
  handed to the backend here, once, and nowhere else;
- the warm box (:mod:`sandbox.linux.warm`) and the allow-list's forwarder in it.

A run is plan, supervisor, read: in the warm box when the session has one, else in a box
of its own (``warm=False``), which the supervisor starts and reaps. :meth:`read` is the
one place a run's result is rewritten (bwrap's own failures taken out of it, a run the
memory bound killed said so).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.box.base import BoxBase
from sandbox.linux.bwrap import BwrapBackend
from sandbox.linux.replaced import Replaced
from sandbox.plan import BackendName, RunResult

if TYPE_CHECKING:
    from collections.abc import Collection

    from sandbox.box.kind import BoxKind
    from sandbox.linux.keeper import Keeper
    from sandbox.linux.sentry import Sentry
    from sandbox.linux.warm.seat import Forwarder
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes


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
        # The protected names the host replaced (:mod:`.replaced`), the runs going on,
        # and what open() was given, to make the box's mounts again.
        self._replaced: Replaced | None = None
        self._stale = False
        self._going = 0
        self._renewing = False
        self._turn = threading.Condition()
        self._opened: tuple[tuple[str, ...] | None, bool] = (None, False)
        self._said: list[str] = []
        # git's names missing at the open, which no bind can hold (:mod:`.keeper`),
        # and what moves out what a run makes there at once (:mod:`.sentry`).
        self._keeper: Keeper | None = None
        self._sentry: Sentry | None = None
        # The submodules whose objects git copied across the pinned .git (:mod:`copied`).
        from sandbox.git.copied import Copies

        self._copies = Copies(policy.common_dir or os.path.join(policy.project, ".git"))

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
        from sandbox.box.harden import Hardening

        # The warm box's starter mounts a fresh /proc for each run: not where one is
        # refused (the box with the container's /proc starts a box per run).
        warm = warm and not self.backend.kind.bound_proc
        if not warm:
            meanwhile()
        self.backend.check()
        self._opened = (held, warm)
        self._replaced = Replaced((*self.policy.protected_paths(),
                                   *self.policy.missing_hook_dirs()))
        self._keep()
        if held is not None:
            self.backend.hold(held)
        limits = self.policy.limits
        self.hardening = h = Hardening.open(limits, boxed=True,
                                            private_tmp=self.policy.private_tmp,
                                            host_network=self.policy.network)
        self.backend.harden(shm_size=limits.shm_size, seccomp=h.seccomp_reader,
                            guard=h.guard, launcher=lambda: h.launcher().program)
        if warm:
            self._warm_up(meanwhile)
        self.backend.prepare()  # what a plan stands on, made now: a plan is then data

    def _keep(self) -> None:
        """The keeper of git's names missing at the open: what a run makes there is
        moved out once no run is going (a name made for a bind would be a placeholder
        git reads, and lists)."""
        from sandbox.linux.keeper import Keeper
        from sandbox.linux.sentry import Sentry

        p = self.policy
        if p.kept_paths():
            self._keeper = Keeper(
                p.kept_paths(), (*p.read_write_paths(), p.private_tmp), p.env,
                os.path.basename(p.private_tmp),
                why="a name that did not exist when the session opened")
            self._sentry = Sentry(p.kept_paths(), self._seen)

    def _seen(self) -> None:
        """The sentry saw a kept name made: moved out now if a run is going (between
        runs it is the host's, :mod:`sandbox.session.turns`)."""
        with self._turn:
            if self._going and self._keeper is not None:
                self._said += self._keeper.check()

    def appeared(self) -> tuple[str, ...]:
        """git's names missing at the open that the host made since (a host
        ``pre-commit install``): no longer kept, to be held (:meth:`adopt`)."""
        with self._turn:
            if self._keeper is None or self._going:
                return ()
            return self._keeper.appeared()

    def adopt(self, paths: tuple[str, ...]) -> None:
        """Hold ``paths`` read-only from the next run on, with the folders on their way
        pinned, as what was there at the open: the box's mounts are made again."""
        from sandbox.fs import beneath

        with self._turn:
            p = self.policy
            roots = (*p.read_write_paths(), p.private_tmp)
            pins = list(p.pinned_dirs)
            for path in paths:
                where = beneath.relative(path, roots)
                if where is None:
                    continue
                root, rel = where
                parts = rel.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = os.path.join(root, *parts[:i])
                    if d not in pins and \
                            beneath.find(root, "/".join(parts[:i])).kind == "dir":
                        pins.append(d)
            new = p._replace(protected=(*p.protected, *paths), pinned_dirs=tuple(pins),
                             kept=tuple(k for k in p.kept if k not in paths))
            self.policy = self.backend.policy = new
            if self._replaced is not None:
                self._replaced.close()
            self._replaced = Replaced((*new.protected_paths(), *new.missing_hook_dirs()))
            self._stale = True

    def _warm_up(self, meanwhile: Callable[[], None]) -> None:
        """The warm box, and the allow-list's forwarder in it."""
        from sandbox.linux.warm import seat

        assert self.hardening is not None
        self.warm = seat.open_box(self.backend, self.hardening, meanwhile=meanwhile)
        if self.policy.network_allow is not None:
            self._forwarder = seat.Forwarder.start(self)

    def _cool_down(self) -> None:
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self.warm is not None:
            self.warm.close()
            self.warm = None

    def close(self) -> None:
        """The forwarder, the warm box, the hardening and the proxy, then the held
        descriptors and the stage (the box's last users are gone by then)."""
        self._cool_down()
        super().close()
        self.backend.release()
        if self._sentry is not None:
            self._sentry.close()
            self._sentry = None
        if self._keeper is not None:
            with self._turn:
                self._said += self._keeper.check()
        if self._replaced is not None:
            self._replaced.close()
            self._replaced = None

    def said(self) -> list[str]:
        """What the box made again, or repaired, since the last call."""
        with self._turn:
            out, self._said = self._said, []
        return out + self.backend.said() + self._copies.look()

    def _enter(self) -> None:
        """A run's start: the box's mounts made again first, once no run is going, if
        the host replaced a protected name since the last run."""
        with self._turn:
            while self._renewing:
                self._turn.wait()
            touched = self._replaced.touched() if self._replaced is not None else set()
            if touched:  # by the host, while no run of ours was going: its own change
                from sandbox.git.configcopy import settled

                p = self.policy
                self._said += settled(p.views, touched, p.private_tmp)
                self._stale = True
            if self._stale:
                self._renewing = True
                while self._going:
                    self._turn.wait()
                try:
                    self._renew()
                finally:
                    self._renewing = False
                    self._turn.notify_all()
            self._going += 1

    def _leave(self) -> None:
        """A run's end: what it could have written to a name replaced meanwhile,
        repaired (git's config: :func:`sandbox.git.configcopy.repair`) or said."""
        touched = self._replaced.touched() if self._replaced is not None else set()
        said = self._repaired(touched) if touched else []
        with self._turn:
            self._stale = self._stale or bool(touched)
            self._said += said
            self._going -= 1
            if self._going == 0 and self._keeper is not None:
                self._said += self._keeper.check()  # every process of the runs has ended
            self._turn.notify_all()

    def _repaired(self, touched: set[str]) -> list[str]:
        from sandbox.git.configcopy import repair
        from sandbox.text import escape

        p = self.policy
        said = repair(p.views, touched, p.private_tmp, p.env)
        configs = {c for c, _ in p.views}
        return said + [f"{escape(t)} was replaced on the host during a run: the box's "
                       "read-only bind of it went with the old file until the run ended"
                       for t in sorted(touched - configs)]

    def _renew(self) -> None:
        """The held descriptors, the stage and the warm box made again (the hardening
        and the proxy stay): the mounts on the replaced names are back."""
        from sandbox.errors import PolicyError, SandboxUnavailable

        held, warm = self._opened
        self._cool_down()
        self.backend.release()
        self._forget_gone()
        if held is not None:
            try:
                self.backend.hold(held)
            except PolicyError as err:  # a folder on the way swapped for a link, say
                raise SandboxUnavailable(
                    f"what the box holds read-only changed on the host during the session, "
                    f"and cannot be held again: {err}",
                    "end the session and open a new one") from err
        if warm:
            self._warm_up(lambda: None)
        self.backend.prepare()
        self._stale = False

    def _forget_gone(self) -> None:
        """The protected names the host removed (``rm -r .idea``, ``git clean`` of an
        ignored config): no mount can hold a name that is not there, so each is kept
        from now on as a name missing at the open is (moved out after a run that makes
        it), not a reason to end the session. Said once each."""
        from sandbox.linux.keeper import Keeper
        from sandbox.linux.sentry import Sentry
        from sandbox.text import escape

        p = self.policy
        gone = tuple(x for x in p.protected if not os.path.lexists(x))
        if not gone:
            return
        pins = tuple(d for d in p.pinned_dirs if os.path.isdir(d))
        self.policy = self.backend.policy = p = p._replace(
            protected=tuple(x for x in p.protected if x not in gone),
            pinned_dirs=pins, kept=(*p.kept, *gone))
        if self._keeper is None:
            self._keeper = Keeper(gone, (*p.read_write_paths(), p.private_tmp), p.env,
                                  os.path.basename(p.private_tmp),
                                  why="a name that did not exist when the session opened")
        else:
            self._keeper.add(gone)
        if self._sentry is not None:
            self._sentry.close()
        self._sentry = Sentry(p.kept_paths(), self._seen)
        if self._replaced is not None:  # the box's own making of them is no host's
            self._replaced.close()
            self._replaced = Replaced((*p.protected_paths(), *p.missing_hook_dirs()))
        self._said += [f"{escape(x)} was removed on the host during the session: what the "
                       "box makes there from now on is moved out once made" for x in gone]

    def _run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
             stdin: bytes, timeout: float | None, cancel: threading.Event | None,
             pipes: type[Pipes]) -> RunResult:
        """In the warm box when the session has one, else in a box of its own; the
        mounts made again first where the host replaced a protected name."""
        self._enter()
        try:
            return self._in_box(argv, env_extra=env_extra, stdin=stdin, timeout=timeout,
                                cancel=cancel, pipes=pipes)
        finally:
            self._leave()

    def _in_box(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
                stdin: bytes, timeout: float | None, cancel: threading.Event | None,
                pipes: type[Pipes]) -> RunResult:
        if self.warm is not None:
            from sandbox.linux.warm import seat

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
