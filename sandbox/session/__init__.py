"""A session: the policy, its private temp folder, and the one box its commands share.

:meth:`Session.open` makes the private temp folder, checks the paths the user named,
finds the box (bwrap once, by absolute path), and removes the folder at the end.
:meth:`Session.run` plans one command (box or host) and hands it to the supervisor. When
the box cannot be built the error propagates: nothing ever runs on the host instead.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from sandbox.box.base import Box, supervised
from sandbox.box.host import HostBackend
from sandbox.dispatch import box_name, choose
from sandbox.errors import PolicyError
from sandbox.fs.systemtemp import mkdtemp
from sandbox.git.dirs import GitLayout
from sandbox.git.report import report
from sandbox.plan import LaunchPlan, RunResult
from sandbox.policy import (
    DEFAULT_OUTPUT_CAP,
    Policy,
    private_tmp_root,
    session_env,
    session_home,
    writable_roots,
)
from sandbox.process.made import clean_session, made_lock, remove_folder
from sandbox.process.pty import TtySize, terminal
from sandbox.process.watchdog import forget_session, watch_session
from sandbox.session import leftovers as _leftovers
from sandbox.session.moveout import MoveOut
from sandbox.session.prepared import git_layout, make_missing
from sandbox.session.turns import Turns
from sandbox.session.watched import Watched
from sandbox.settings import SandboxSettings
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.box.harden import Hardening
    from sandbox.linux.warm.client import WarmBox
    from sandbox.network.session import Network
    from sandbox.process.pipes import OnOutput, Pipes


def make_private_root(path: str) -> str:
    """The per-user folder private temp folders are made in: created mode 700, or, if it
    exists, a real folder (not a link) owned by us with mode 700. Anything else could
    let another user read or swap a session's temp files, and is refused."""
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise PolicyError(
            f"the private temp root {escape(path)} is a link; remove it and try again")
    if not stat.S_ISDIR(st.st_mode):
        raise PolicyError(
            f"the private temp root {escape(path)} is not a folder; remove it and try again")
    if st.st_uid != os.getuid():
        raise PolicyError(
            f"the private temp root {escape(path)} belongs to uid {st.st_uid}, not to you "
            f"(uid {os.getuid()}); remove it and try again")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise PolicyError(
            f"the private temp root {escape(path)} has mode {mode:04o}, not 0700; "
            "remove it and try again")
    return path


def _readable(project: str) -> None:
    """Refuse a project this user cannot list or enter: nothing could run there, and
    what the session reads of it (its git folder) would fail half-way. The box runs
    without capabilities, so root's override of the mode bits does not hold in it: for
    root the bits themselves decide."""
    try:
        st = os.stat(project)
    except OSError:
        return  # a project that is not there yet is the caller's to refuse or make
    if not stat.S_ISDIR(st.st_mode):
        return
    if not os.access(project, os.R_OK | os.X_OK):
        raise PolicyError(
            f"the project {escape(project)} cannot be read by you (uid {os.getuid()}): "
            "Permission denied; run as a user who may read it, or change its mode")
    if os.geteuid() == 0 and (st.st_mode >> _shift_for_root(st)) & 0o5 != 0o5:
        raise PolicyError(
            f"the project {escape(project)} has mode {stat.S_IMODE(st.st_mode):04o}: "
            "the box runs without root's override of the mode bits, so it could not "
            "list or enter it; give it read and search (chmod u+rx)")


def _shift_for_root(st: os.stat_result) -> int:
    """Which mode bits decide for a box started by uid 0: the owner's for root's
    stand-in (the project is its own through its mapping, sandbox/linux/standin.py), else
    the bits that class of user gets."""
    from sandbox.dispatch import stands_in

    if stands_in() or st.st_uid == 0:
        return 6
    return 3 if st.st_gid in (0, *os.getgroups()) else 0


def _private_root(writable: tuple[str, ...]) -> str:
    """The per-user private root, with what sessions whose harness died left behind
    cleared: their /tmp tmpfs unmounted first (a mount point cannot be removed)."""
    _leftovers.refuse_shared_root(os.path.realpath(private_tmp_root()), writable)
    root = make_private_root(private_tmp_root())
    from sandbox.box.harden import unmount_stale

    unmount_stale(root)
    _leftovers.sweep(root)
    return root


def _end(session: Session | None, manifest: str | None, tmp: str) -> None:
    """Remove what the session made, and tell the watchdog it need not."""
    if session is not None:
        if session._turns is not None:  # what the host made since the last run: its own
            session.warnings += session._turns.closing()
        session.close()  # the box (its filter, bounds, /tmp tmpfs and binds) first
        if session._moves is not None:  # what the box made of other tools' configs
            session.warnings += session._moves.end()
        from sandbox.git.configcopy import after_run  # git's config: the box's allowed keys
        session.warnings += after_run(session.policy.views, session.policy.private_tmp,
                                      session.policy.env)
    if manifest is not None:
        clean_session(manifest)
        forget_session(manifest)
    # The box's /tmp: whatever its commands left there goes with the session.
    remove_folder(tmp, ignore_errors=True)


class Opening:
    """What :meth:`Session.open` returns: a context manager, whose ``with`` gives the
    session; or, for callers that cannot use ``with``, :meth:`start` and :meth:`end`."""

    def __init__(self, manager: AbstractContextManager[Session]) -> None:
        self._manager = manager
        self._session: Session | None = None

    def __enter__(self) -> Session:
        return self._manager.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        return self._manager.__exit__(*exc)

    def start(self) -> Session:
        """Open the session (as ``with`` does); :meth:`end` must follow. The session
        holds this opening: ``session = Session.open(...).start()`` keeps it open (the
        opening dropped and collected would otherwise end it under the caller)."""
        self._session = self._manager.__enter__()
        self._session._opening = self
        return self._session

    def end(self) -> None:
        """End a session :meth:`start` opened; its warnings are then final."""
        if self._session is not None:
            self._session = None
            self._manager.__exit__(None, None, None)

    def __getattr__(self, name: str) -> Any:
        if name in Session.__dict__:
            raise AttributeError(
                f"Session.open(...) is not the session: write `with Session.open(...) as "
                f"session:` and call session.{name} inside, or session = "
                "Session.open(...).start() and .end() when done")
        raise AttributeError(name)


class Session:
    """Runs commands under one policy. Build it with :meth:`open` (which owns the private
    temp folder) or directly from a policy whose folders already exist."""

    def __init__(self, policy: Policy, *, bwrap: str | None = None,
                 features: tuple[str, ...] | None = None) -> None:
        self.policy = policy
        self._host = HostBackend(policy)
        # The platform's box (sandbox/dispatch.py), and the kind in force (sandbox/box/kind.py).
        self._box: Box | None = (
            choose(policy, bwrap=bwrap, features=features) if policy.boxed else None)
        self.box_kind = self._box.kind if self._box is not None else None
        # Said when the session ends (see :meth:`open`); read them after the with-block.
        self.warnings: list[str] = []
        # A session with no box: its host runs' groups and reaping, set by open().
        self._host_hardening: Hardening | None = None
        self._plan_fds: list[int] = []
        # Other tools' configs the box makes, moved out after each run (moveout.py).
        self._moves: MoveOut | None = None
        # Its boxed runs, and what appeared between them (turns.py).
        self._turns: Turns | None = None
        # The opening that made it, held while it lives (:meth:`Opening.start`).
        self._opening: Opening | None = None

    @property
    def hardening(self) -> Hardening | None:
        """The session's filter, bounds and groups (:mod:`sandbox.box.harden`): the box's,
        which host runs share, or a session with no box's own; None before
        :meth:`open`."""
        return self._box.hardening if self._box is not None else self._host_hardening

    @property
    def network(self) -> Network | None:
        """The allow-list's proxy (:mod:`sandbox.network`), when the policy has one."""
        return self._box.network if self._box is not None else None

    @property
    def warm(self) -> WarmBox | None:
        """The session's warm box (:mod:`sandbox.linux.warm`), where boxed runs start."""
        return self._box.warm if self._box is not None else None

    @classmethod
    def open(
        cls,
        project: str,
        settings: SandboxSettings | None = None,
        *,
        boxed: bool = True,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        warm: bool = True,
    ) -> Opening:
        """A session for ``project`` with ``[sandbox]`` ``settings`` (defaults if None),
        used as ``with Session.open(project) as session:`` (the session ends with the
        block: its folders, mounts and proxy are removed). Without ``with``, call
        ``.start()`` on what this returns, and ``.end()`` when done.

        On Linux a box session makes its box once, here, with a resident starter in it
        (the warm box, :mod:`sandbox.linux.warm`): each boxed run starts inside it, in a PID,
        mount and IPC namespace of its own, in about a millisecond or two. ``warm=False``
        builds a new box for every run instead (the cold box). On macOS there is nothing
        to keep warm: each run is its own ``sandbox-exec``.

        Raises :class:`PolicyError` for a path the user named that cannot be used and
        :class:`SandboxUnavailable` when the session needs the box and it cannot be built.

        What host git reads to decide what to run is found once, here (see
        :mod:`sandbox.git.dirs`); missing protected names are made, and removed at the
        end (or by the watchdog, or by the next session, if the harness dies). At the
        end, what the box could not stop (a new git folder, a re-pointed link, a nested
        repository staged as a gitlink) is reported in :attr:`warnings`
        (:mod:`sandbox.git.report`).
        """
        return Opening(cls._open(project, settings, boxed=boxed, env=env,
                                 output_cap=output_cap, warm=warm))

    @classmethod
    @contextmanager
    def _open(cls, project: str, settings: SandboxSettings | None, *, boxed: bool,
              env: Mapping[str, str] | None, output_cap: int, warm: bool
              ) -> Iterator[Session]:
        settings = settings if settings is not None else SandboxSettings()
        boxed = boxed and settings.enabled
        _readable(project)
        # The session's environment, home and writable roots, as the policy reads them.
        scrubbed = session_env(settings, env)
        home = session_home(scrubbed)
        named = writable_roots(settings.writable, home)
        root = _private_root((project, *named) if boxed else ())
        # The pid names the owner: a later session clears what a killed one left.
        tmp = mkdtemp(f"session-{os.getpid()}-", root)
        manifest: str | None = None
        session: Session | None = None
        try:
            layout: GitLayout | None = None
            roots: tuple[str, ...] = (tmp,)
            # In turn with other sessions' opens and ends (sandbox/process/made.py).
            with made_lock(root):
                if boxed and settings.protect and os.path.isdir(project):
                    layout, roots = git_layout(project, named, env, home, root)
                # What the box makes of other tools' configs is moved out after each run.
                moves = (MoveOut(os.path.realpath(project), settings.allow_tool_configs,
                                 os.environ if env is None else env, os.path.basename(tmp))
                         if layout is not None and box_name() == "bwrap" else None)
                manifest = _leftovers.start(tmp, moves.record() if moves else None)
                # The watchdog first: from here on a killed harness leaves nothing behind.
                watch_session(manifest)
                if layout is not None:
                    layout = make_missing(layout, manifest, roots, tmp=tmp, named=named,
                                          env=scrubbed, moves=moves,
                                          landlock=settings.box == "landlock")
            policy = Policy.from_settings(project, settings, boxed=boxed, private_tmp=tmp,
                                          env=env, git=layout)._replace(output_cap=output_cap)
            # The toolkit will not run from a folder the box can write (selfguard.py).
            from sandbox.session.selfguard import check as check_self

            check_self(policy)
            session = cls(policy)
            session._between_runs(moves, manifest)
            # Hard links to protected files are looked for while the warm box starts
            # (thousands of files in a repository with hundreds of modules); the box
            # runs nothing before the session is open.
            protected = policy.protected_paths() if policy.boxed else ()
            session._start(roots if layout is not None else None, warm,
                           meanwhile=lambda: _leftovers.refuse_linked(protected))
            started = time.time()
            made = Watched(policy)
            yield session
            if policy.boxed:
                session.warnings += made.report()
            if layout is not None:
                session.warnings += report(policy.project, layout, policy.env, started,
                                           roots[1:])
            if session.network is not None:
                session.warnings += session.network.report()
        finally:
            _end(session, manifest, tmp)

    def _between_runs(self, moves: MoveOut | None, manifest: str | None) -> None:
        """What the session looks at between its boxed runs: other tools' configs the
        box made (moveout.py), and what appeared on the host (turns.py)."""
        self._moves = moves
        if self._box is not None:
            self._turns = Turns(self._box, self.policy.private_tmp, moves, manifest)

    def _start(self, held: tuple[str, ...] | None, warm: bool = False,
               meanwhile: Callable[[], None] = lambda: None) -> None:
        """Open the box (fail now, before anything runs): the allow-list's proxy where
        the box reaches it, then the binds below ``held`` (the git layout's roots), the
        filter, the bounds and (``warm``) the warm box. A session with no box gets its
        host runs' hardening. ``meanwhile`` is a check called once before this returns
        (while the warm box starts, where there is one); what it raises is raised."""
        if self._box is not None:
            self._box.proxy()
            self.policy = self._box.policy  # with the proxy's port, on macOS
            self._box.open(held=held, warm=warm, meanwhile=meanwhile)
            return
        meanwhile()
        from sandbox.box.harden import Hardening

        self._host_hardening = Hardening.open(self.policy.limits, boxed=False,
                                              private_tmp=self.policy.private_tmp)

    def close(self) -> None:
        """Give back what :meth:`open` took: the box (with its proxy, warm box, filter,
        bounds and held binds), or the host runs' hardening."""
        if self._box is not None:
            self._box.close()
            self.warnings += self._box.said()
        if self._host_hardening is not None:
            self._host_hardening.close()
            self._host_hardening = None
        while self._plan_fds:
            os.close(self._plan_fds.pop())

    def host_env(self) -> Mapping[str, str]:
        """The environment a host command starts from (provider keys gone, PATH pruned
        in a boxed session), computed once: pruning PATH walks every entry."""
        return self._host.env()

    def plan(self, argv: Sequence[str], *, boxed: bool = True,
             env_extra: Mapping[str, str] | None = None) -> LaunchPlan:
        """The plan that runs ``argv``: in the box (``argv[0]`` may be a bare name, looked
        up on PATH inside the box), or on the host (``boxed=False`` or a session with no
        box; ``argv[0]`` must be absolute).

        A box plan may hold a descriptor of the session's system-call filter
        (``pass_fds``), which serves one run and is closed when the session ends."""
        made = (self._box.plan(argv, env_extra) if boxed and self._box is not None
                else self._host.plan(argv, env_extra))
        self._plan_fds += made.run_fds
        return made

    def run(  # noqa: PLR0913 (the keywords are the library's run options)
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        boxed: bool = True,
        env_extra: Mapping[str, str] | None = None,
        pipes: type[Pipes] | None = None,
        on_output: OnOutput | None = None,
        tty: TtySize | bool = False,
    ) -> RunResult:
        """Run ``argv`` to its end (and everything it started) and say how it ended.

        ``pipes`` reads the run's output (see :func:`sandbox.process.supervisor.run`):
        by default it is kept, capped, in the result. ``on_output(stream, chunk)`` also
        gets each chunk whole as it is read (on this thread; what it raises ends the run
        and is raised). ``result.exit`` is the status ``run`` and ``serve`` give.

        In the box, a command killed by signal N is reported as exited with status
        128+N: the box's init waits for it and exits that way, as a shell does.
        A command the box could not start is ``failed_to_start`` with the OS error.
        Raises :class:`SandboxUnavailable` when the box itself cannot be built.
        ``tty`` (True or a ``TtySize``): a boxed run on a terminal made for it, its
        controlling terminal, all its output in ``stdout`` (:mod:`sandbox.process.pty`).
        """
        from sandbox.process.pipes import Pipes, passing_on

        if isinstance(argv, (str, bytes)):
            raise TypeError("Session.run takes the command as a list of words, "
                            f"such as [{argv!r}], not as one string")
        reader = passing_on(on_output, pipes or Pipes) if on_output else pipes or Pipes
        if tty:
            reader, env_extra = terminal(tty, reader, env_extra, boxed and bool(self._box))
        if boxed and self._box is not None:
            moves, turns = self._moves, self._turns
            held, taken = turns.start() if turns is not None else (-1, [])
            self.warnings += taken
            if moves is not None:
                moves.run_starts()
            try:
                return self._box.run(argv, env_extra=env_extra, stdin=stdin,
                                     timeout=timeout, cancel=cancel, pipes=reader)
            finally:
                if moves is not None:
                    self.warnings += moves.run_ended()
                if turns is not None:
                    turns.end(held)
                from sandbox.git.configcopy import after_run  # git's config: the box's allowed keys
                self.warnings += after_run(self.policy.views, self.policy.private_tmp,
                                           self.policy.env)
                self.warnings += self._box.said()
        plan = self._host.plan(argv, env_extra)
        result = supervised(plan, self.hardening, box=False, stdin=stdin, timeout=timeout,
                            cancel=cancel, output_cap=self.policy.output_cap, pipes=reader)
        return self._host.read(result)
