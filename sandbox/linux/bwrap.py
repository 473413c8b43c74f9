"""Linux: (Policy, argv) -> LaunchPlan for bubblewrap. Pure: no I/O but stat/readlink.

The box bash, exec and boxed hooks share. :func:`plan` builds bwrap's argv; the
supervisor runs it. Nothing here spawns.

The rule for bind sources: no path bound here is ever a link's target. The read-write
roots (the project, a real linked worktree's common dir, ``[sandbox] writable``) are
canonical paths the user named; every other path (pinned git folders, protected git
files, the files the git config names) was found by :mod:`sandbox.git.dirs` walking down
from one of those roots without following a link, and every folder between the root and
a protected path is pinned (bound onto itself), so that a boxed command cannot rename
it and put a link in its place for the next box to follow. A session binds those paths
by the descriptors it opened when it checked them (``--bind-fd``, ``--ro-bind-fd``), so
a path swapped for a link in between changes nothing. A read-write bind whose source is
outside the read-write roots is a programming error: :func:`box_args` raises.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.errors import StageRefused
from sandbox.linux.bwrap_args import (
    MAX_FDS,
    REQUIRED_FEATURES,
    RESOLVER_DIR,
    _could_make,
    bindable_late,
    box_args,
    staged_binds,
)
from sandbox.linux.kind import bound_proc_args, in_domain
from sandbox.linux.kind import choose as choose_kind
from sandbox.linux.procfs import KEYRING_LISTS, PROC_READ_ONLY
from sandbox.linux.standin import stdio_owner
from sandbox.linux.started import Started, exec_failure, read, with_var
from sandbox.plan import BackendName, LaunchPlan, RunResult
from sandbox.policy import Policy
from sandbox.policy.caches import box_roots
from sandbox.policy.layers import plan as warm_layers
from sandbox.policy.layers import refused
from sandbox.policy.layers import take as take_slot
from sandbox.policy.startenv import box_env

if TYPE_CHECKING:
    from sandbox.linux.stage import Stage

# The options live in bwrap_args.py; these are named here too, for callers of the box.
__all__ = ["KEYRING_LISTS", "LINKER_VARS", "PROC_READ_ONLY", "REQUIRED_FEATURES",
           "RESOLVER_DIR", "BwrapBackend", "args_by_fd", "box_args", "command",
           "exec_failure", "guarded", "plan"]

# Read by the dynamic linker when bwrap itself starts.
LINKER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")


def plan(
    policy: Policy,
    argv: Sequence[str],
    *,
    bwrap: str,
    features: Collection[str] | None = None,
    env_extra: Mapping[str, str] | None = None,
    prefix: Sequence[str] | None = None,
    pass_fds: tuple[int, ...] = (),
    seccomp_fd: int | None = None,
) -> LaunchPlan:
    """The bubblewrap command that runs ``argv`` in the session's box: :func:`box_args`
    (or ``prefix``, the same computed once by a session: it stats every protected and
    hidden path), then ``--`` and ``argv``."""
    if not argv:
        raise ValueError("an empty command cannot run in the box")
    head = tuple(prefix) if prefix is not None else box_args(policy, bwrap=bwrap,
                                                               features=features)
    env = box_env(policy, env_extra)
    description = shlex.join(argv)
    if policy.network_allow is not None:
        # The allow-list: the proxy's variables win over any the host had.
        from sandbox.network.box import proxy_env

        env.update(proxy_env(policy.network_allow))
    argv = command(policy, argv)
    # bwrap starts on the host: the dynamic linker would load what these name into it
    # before any namespace exists (a library the agent built in the project). They
    # reach the command in the box through --setenv instead.
    inner = [(k, env.pop(k)) for k in LINKER_VARS if k in env]
    setenv = tuple(x for k, v in inner for x in ("--setenv", k, v))
    return LaunchPlan(
        backend="bwrap",
        argv=(*head, *setenv, *(() if seccomp_fd is None else ("--seccomp", str(seccomp_fd))),
              "--", *argv),
        env=env,
        cwd=policy.project,
        description=description,
        # No marker, no watchdog: bwrap dies with its parent (--die-with-parent) and its
        # PID namespace ends everything inside when it does; a one-shot run pays for
        # no watchdog. The box's processes die with bwrap a little later than a group.
        watched=False,
        drain_idle=0.25,
        drain_max=1.0,
        # Held descriptors of the binds, and the filter's (``--seccomp``): one per run.
        pass_fds=(*pass_fds, *(() if seccomp_fd is None else (seccomp_fd,))),
        run_fds=() if seccomp_fd is None else (seccomp_fd,),
        stdio_owner=stdio_owner(),
    )


def command(policy: Policy, argv: Sequence[str]) -> tuple[str, ...]:
    """What bwrap starts in the box: ``argv``, or with an allow-list the forwarder that
    then becomes ``argv`` (sandbox/network/box.py)."""
    if policy.network_allow is None:
        return tuple(argv)
    from sandbox.network.box import wrap

    return wrap(argv)


def guarded(made: LaunchPlan, policy: Policy, guard: bytes, command_len: int,
            launcher: int | None = None) -> tuple[LaunchPlan, int]:
    """The same plan with its command started by the Unix-socket guard's launcher
    (:func:`sandbox.linux.sockets.guarded`: the compiled one when ``launcher`` is its sealed
    memfd, passed to bwrap), and the new command's length. The launcher is the box's
    PID 1 (``--as-pid-1``): bwrap's own init would be a process of the box that is
    under no filter and that the command could trace."""
    from sandbox.linux.sockets import guarded as wrap

    cut = len(made.argv) - command_len - 1
    if made.argv[cut] != "--":
        raise ValueError("a bwrap plan ends with -- and its command")
    options: tuple[str, ...] = made.argv[:cut]
    linker: tuple[str, ...] = ()
    if launcher is None:
        # The Python launcher's own start would load what these name, before it arms
        # the guard: they reach the command through it instead. (The compiled launcher
        # is linked statically where it can be, and gives its supervisor no variable.)
        options, linker = _without_linker_vars(options)
    wrapped = wrap(policy, guard, made.argv[cut + 1:], launcher, linker)
    if launcher is not None:
        made = made._replace(pass_fds=(*made.pass_fds, launcher))
    # The launcher's guard keeps CAP_SYS_PTRACE in the box's user namespace (to take a
    # socket of a caller that is not dumpable); it drops both before the command starts.
    caps = ("--cap-add", "CAP_SYS_PTRACE", "--cap-add", "CAP_SETPCAP")
    return made._replace(argv=(*options, *caps, "--as-pid-1", "--", *wrapped)), len(wrapped)


def _without_linker_vars(options: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """bwrap's options without the ``--setenv`` of :data:`LINKER_VARS` that :func:`plan`
    puts at their end (before ``--seccomp FD``), and those as ``NAME=VALUE``."""
    end = len(options) - (2 if options[-2:-1] == ("--seccomp",) else 0)
    at = end
    found: list[str] = []
    while at >= 3 and options[at - 3] == "--setenv" and options[at - 2] in LINKER_VARS:
        found.insert(0, f"{options[at - 2]}={options[at - 1]}")
        at -= 3
    return (*options[:at], *options[end:]), tuple(found)


def args_by_fd(made: LaunchPlan, command_len: int) -> LaunchPlan:
    """The same plan with bwrap's options read from a descriptor (``--args FD``).

    bwrap stays the box's PID 1, and ``/proc/1/cmdline`` in the box would otherwise
    show every option it was given: a map of each hidden, protected and bound path.
    Given by descriptor, the box sees ``bwrap --args N -- COMMAND...``. The descriptor is a
    memfd of this run, closed after it (``run_fds``).
    """
    # The options only: bwrap reads the command from its own argv ("--" onwards).
    # (Counted from the end: an option's value may itself be "--".)
    cut = len(made.argv) - command_len - 1
    if made.argv[cut] != "--":
        raise ValueError("a bwrap plan ends with -- and its command")
    data = b"".join(a.encode() + b"\0" for a in made.argv[1:cut])
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return made._replace(argv=(made.argv[0], "--args", str(fd), *made.argv[cut:]),
                         pass_fds=(*made.pass_fds, fd), run_fds=(*made.run_fds, fd))


class BwrapBackend:
    """The Linux box of one session. bwrap is found once (by absolute path, outside every
    folder the box can write) and the mounts are computed once: they stat every
    protected and hidden path."""

    name: BackendName = "bwrap"

    def __init__(self, policy: Policy, *, bwrap: str | None = None,
                 features: Collection[str] | None = None) -> None:
        self.policy = policy
        self._bwrap = bwrap
        self._features = features
        self._prefix: tuple[str, ...] | None = None
        self._lock = threading.Lock()
        # O_PATH descriptors of the pinned and protected paths (see hold()).
        self._fds: dict[str, int] = {}
        self._shm_size: int | None = None
        self._seccomp: Callable[[], int | None] | None = None
        # The session's stage (see stage()), made at the first box.
        self._stage: Stage | None = None
        self._unstaged = False
        self._stage_lock = threading.Lock()
        # The lock of the warm caches' slot the stage holds (sandbox/policy/layers.py).
        self._slot = -1
        # What the session is told once, at its next look (said()).
        self._said: list[str] = []
        self._cached = False
        self.guard: bytes | None = None
        # Where the compiled launcher comes from (sandbox/linux/initcache.py), and its sealed
        # memfd once made.
        self._launcher: Callable[[], bytes | None] | None = None
        self._launcher_fd: int | None = None
        # Whether each run reached its command (:mod:`.started`).
        self._started = Started()
        # The box this place allows (:mod:`.kind`): the container's /proc where a fresh
        # one is refused.
        self.kind = choose_kind()

    def harden(self, *, shm_size: int, seccomp: Callable[[], int | None],
               guard: bytes | None = None,
               launcher: Callable[[], bytes | None] | None = None) -> None:
        """Before the first plan: /dev/shm's size, where each run's system-call filter
        descriptor comes from (each plan gets its own), the Unix-socket guard's filter
        (each command is started under it: :func:`guarded`) and where the compiled
        launcher that arms it comes from (built at the first box; None: the Python one)."""
        self._shm_size, self._seccomp, self.guard = shm_size, seccomp, guard
        self._launcher = launcher

    def launcher(self) -> int | None:
        """The compiled launcher's sealed memfd, made at the first box and given to
        each (None: the Python launcher starts each command)."""
        if self._launcher is None:
            return None
        with self._lock:
            if self._launcher_fd is None:
                from sandbox.linux.initcache import sealed

                program = self._launcher()
                if program is None:
                    self._launcher = None
                    return None
                self._launcher_fd = sealed(program)
            return self._launcher_fd

    @property
    def features(self) -> Collection[str] | None:
        """The bwrap options this bwrap has, when the session was told them."""
        return self._features

    @property
    def held(self) -> Mapping[str, int]:
        """The descriptors of the pinned and protected paths (:meth:`hold`)."""
        return self._fds

    def program(self) -> str:
        """bwrap's absolute path, found once. Raises :class:`SandboxUnavailable`."""
        if self._bwrap is None:
            from sandbox.linux.bwrap_find import require_box

            with self._lock:
                if self._bwrap is None:
                    self._bwrap = require_box(self.policy)
        return self._bwrap

    def check(self) -> None:
        self.program()
        self._caches()

    def _caches(self) -> None:
        """The project's package caches (:mod:`sandbox.policy.caches`), made before a box."""
        if not self._cached:
            from sandbox.policy.caches import make

            self._cached = bool(make(self.policy.project, self.policy.env, self.policy.home))

    def prepare(self) -> None:
        """Everything a plan stands on that touches the kernel, made once, when the box
        opens (:meth:`~sandbox.linux.linuxbox.LinuxBox.open`; else at the first plan):
        the package caches' folders, the stage and its late binds, bwrap's options (they
        stat every protected and hidden path), and the compiled launcher. After it a plan
        opens only its run's own descriptors (the filter's, the start pipe)."""
        self._caches()
        stage = self.stage()
        if stage is not None:
            stage.bind_late()  # a box per run starts after all of them
        if self._prefix is None:
            self._prefix = box_args(self.policy, bwrap=self.program(), features=self._features,
                                    fds=self._fds, shm_size=self._shm_size,
                                    staged=stage is not None,
                                    root=stage.root if stage else "/")
            if self.kind.bound_proc:
                self._prefix = bound_proc_args(self._prefix)
        if self.guard is not None:
            self.launcher()

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        """The run of ``argv`` in a box of its own: data, from what :meth:`prepare` made
        (made now if the box was never opened), and the run's own descriptors."""
        if self._prefix is None:
            self.prepare()
        stage = self._stage
        fd = None if self._seccomp is None else self._seccomp()
        made = plan(self.policy, argv, bwrap=self.program(), features=self._features,
                    env_extra=env_extra, prefix=self._prefix,
                    pass_fds=self.bind_fds(), seccomp_fd=fd)
        size = len(command(self.policy, argv))
        read_end = None
        if self.guard is not None:
            made, size = guarded(made, self.policy, self.guard, size, self.launcher())
            read_end, write_end = self._started.pipe()
            made = with_var(made, size, write_end)
        made = args_by_fd(made, size)
        if self.kind.bound_proc:
            made = made._replace(argv=in_domain(made.argv))
        if stage is not None:
            made = made._replace(argv=(*stage.argv(), *made.argv))
        if read_end is not None:
            self._started.told(made, read_end)
        return made

    def said(self) -> list[str]:
        """What was found since the last call that the session says (a package cache
        the kernel would not lay the host's under)."""
        out, self._said = self._said, []
        return out

    def bind_fds(self) -> tuple[int, ...]:
        """The held descriptors bwrap binds by (``--bind-fd``): none once the stage has
        made those binds. (A descriptor bwrap does not use would reach the box's
        command, and through ``/proc/self/fd`` reopen the file below its cover.)"""
        return () if self._stage is not None else tuple(self._fds.values())

    def stage(self, *, late: bool = False) -> Stage | None:
        """The session's stage (:mod:`sandbox.linux.stage`), made once, at the first
        box (after the session's own mounts, which it copies): always for a session
        started by root, whose stage is its stand-in (:mod:`sandbox.linux.standin`),
        and for anyone else's box from :data:`~sandbox.linux.stage.STAGE_AT` binds
        on, or where git's config is the box's copy (:mod:`sandbox.git.configcopy`).
        None when bwrap makes the binds itself. ``late``, if it is made now and none of
        its binds would cover a mount of bwrap's (:func:`bindable_late`), leaves them
        to :meth:`~sandbox.linux.stage.Stage.bind_late` (for the warm box, which
        starts while they are made). Raises :class:`SandboxUnavailable` or, for a path
        that changed since the session held it, ``PolicyError``."""
        from sandbox.linux import stage as _stage
        from sandbox.linux import standin

        with self._stage_lock:
            if self._stage is None and not self._unstaged:
                binds = staged_binds(self.policy, self._fds)
                root = standin.needed()
                # git's config as a link to the box's copy (sandbox/git/configcopy.py) is
                # a mount only the stage makes: bwrap would follow the link.
                from sandbox.git.configcopy import is_view

                copies = any(b.kind == "view" and is_view(b.source) for b in binds)
                layers, _ = warm_layers(self.policy)
                if root or copies or layers or len(binds) >= _stage.STAGE_AT:
                    layers, self._slot = take_slot(layers, self._said)
                    # The slot is the stand-in's to write, as the box's folders are.
                    roots = (self.policy.private_tmp, *box_roots(self.policy),
                             *([layers[0].slot] if layers else []))
                    try:
                        self._stage = _stage.Stage.open(
                            roots, binds, stand_in=root,
                            late=late and bindable_late(self.policy), layers=layers)
                    except StageRefused:
                        self._unstaged = True  # the same box, its binds made by bwrap
                    else:
                        self._said += [refused(why) for why in self._stage.unlayered]
                else:
                    self._unstaged = True
            return self._stage
    def hold(self, roots: tuple[str, ...]) -> None:
        """Open, without following a link, the pinned and protected paths below
        ``roots``; the box binds them by these descriptors until :meth:`release`."""
        from sandbox.errors import PolicyError
        from sandbox.fs.beneath import open_path, relative
        from sandbox.text import escape

        # The read-write pins always (a swapped one could open a folder of the user's to
        # writes); the read-only binds while descriptors stay few (a repository with
        # hundreds of modules would pass thousands to every box): those are pinned in
        # every box of the session, so only another session's box could swap one.
        pinned = self.policy.pinned_dirs
        protected = self.policy.protected_paths()
        wanted = (*pinned, *protected) if len(pinned) + len(protected) <= MAX_FDS else pinned
        for p in wanted:
            where = relative(p, roots)
            if where is not None and p not in self._fds:
                try:
                    self._fds[p] = open_path(*where)
                except FileNotFoundError as err:
                    if not _could_make(p):
                        continue  # not there, and nobody running as us can make it
                    self.release()
                    raise _missing(p, err) from err
                except OSError as err:
                    self.release()
                    raise PolicyError(f"{escape(p)} changed while the session opened "
                                      f"({err.strerror}); try again") from err

    def release(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
        stage, self._stage = self._stage, None
        self._unstaged = False
        slot, self._slot = self._slot, -1
        if slot >= 0:
            os.close(slot)  # the warm caches' slot, free for the next session
        self._prefix = None  # its root is the stage's
        self._started.close()
        launcher, self._launcher_fd = self._launcher_fd, None
        if launcher is not None:
            os.close(launcher)
        if stage is not None:
            stage.close()

    def read(self, result: RunResult) -> RunResult:
        """bwrap's own failures out of the command's result (:func:`.started.read`)."""
        return read(result, self._started.reached(result.plan))


def _missing(path: str, err: OSError) -> Exception:
    """A protected name the session could not make, though the box could (after a
    ``chmod`` of its folder, which is this user's): say so, or that it went meanwhile."""
    from sandbox.errors import PolicyError
    from sandbox.text import escape

    parent = os.path.dirname(path)
    if os.path.isdir(parent) and not os.access(parent, os.W_OK):
        return PolicyError(
            f"{escape(path)} is missing and its folder {escape(parent)} is not writable, so "
            "the session cannot cover it, while the box could make it after a chmod; "
            f"make the folder writable (chmod u+w {shlex.quote(escape(parent))}) and try "
            "again")
    return PolicyError(f"{escape(path)} changed while the session opened "
                       f"({err.strerror}); try again")
