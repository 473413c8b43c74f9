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

import errno as _errno
import os
import shlex
import threading
from collections.abc import Callable, Collection, Mapping, Sequence

from sandbox.env import box_env
from sandbox.errors import SandboxUnavailable
from sandbox.plan import BackendName, LaunchPlan, RunResult
from sandbox.policy import Policy

# Flags the box cannot do without: a bwrap that lacks one is refused, not worked around.
REQUIRED_FEATURES: tuple[str, ...] = (
    "--unshare-all",
    "--unshare-user",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "--remount-ro",
)
# Used when this bwrap has it (0.8.0 and later): no nested user namespaces in the box.
OPTIONAL_FEATURES: tuple[str, ...] = ("--disable-userns",)

# Masked by a fresh, empty tmpfs. /run holds the host's listening sockets (the system and
# session D-Bus, systemd, docker, gpg-agent...). A network namespace does not cut off
# pathname Unix sockets, and a read-only mount does not stop connect(2), so without this
# a boxed command could ask a host service to run something outside the box.
MASKED_RUNTIME = "/run"
# Kept when the policy allows the network: on systemd-resolved machines
# /etc/resolv.conf leads here.
RESOLVER_DIR = "/run/systemd/resolve"

# At most this many descriptors are held for the box's binds (see BwrapBackend.hold).
MAX_FDS = 256

# The box shares the harness's session keyring: the system-call filter keeps the keys'
# payloads out of reach, and these lists of every key the box could see (descriptions
# such as a token's name, sizes) are covered like hidden files, unreadable.
KEYRING_LISTS = ("/proc/keys", "/proc/key-users")

# The procfs entries that change the host's kernel, not the box's: bound read-only over
# the box's fresh /proc. bwrap covers these itself only when it finds them writable,
# and /proc/sys is mode 0555, so a box started by root (uid 0 without capabilities still
# passes the permission check on 0644 files) could otherwise set kernel.core_pattern --
# a program the kernel runs as root on the next crash -- or any vm.* and fs.* knob.
# The source is the host's entry: sysctls under /proc/sys/net still answer for the
# opener's network namespace. Entries a kernel lacks are skipped (``--ro-bind-try``).
PROC_READ_ONLY = (
    "/proc/sys",             # sysctls: core_pattern, randomize_va_space, protected_*
    "/proc/sysrq-trigger",   # SysRq: reboot, crash, kill all
    "/proc/irq",             # interrupt affinity
    "/proc/bus",             # PCI configuration space
    "/proc/mtrr",            # memory type ranges
    "/proc/fs",              # file-system tunables (nfsd, xfs)
    "/proc/acpi",            # ACPI events and wake-up sources
    "/proc/scsi",            # SCSI host add/remove
    "/proc/driver",          # driver tunables (rtc)
    "/proc/pressure",        # PSI triggers
    "/proc/kcore",           # the kernel's memory image
    "/proc/timer_list",
)

# bwrap reports a command it could not start as one line on stderr and exit status 1.
_EXEC_PREFIX = "bwrap: execvp "
_STRERROR = {os.strerror(n): n for n in sorted(_errno.errorcode, reverse=True)}


def exec_failure(result: RunResult) -> RunResult | None:
    """The box's "could not start the command" (bwrap's exit 1 with its one execvp
    line) as ``failed_to_start`` with the OS error, else None."""
    if result.outcome != "exited" or result.returncode != 1:
        return None
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith(_EXEC_PREFIX):
        return None
    _, _, error = lines[0][len(_EXEC_PREFIX):].rpartition(": ")
    if error not in _STRERROR:
        return None
    return result._replace(outcome="failed_to_start", returncode=None, error=error,
                   errno=_STRERROR[error])


# Mount kinds, in the order they are applied to one path (a later one covers an earlier).
_TMP, _RUNTIME, _RW, _PIN, _PROTECT, _EMPTY_RO, _HIDE_DIR, _HIDE_FILE = range(8)


def _depth(path: str) -> int:
    return len([c for c in path.split("/") if c])


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# Read by the dynamic linker when bwrap itself starts.
LINKER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT")


def _allowed_runtime_sockets(policy: Policy) -> list[str]:
    """The allowed Unix sockets (or their folders) that lie under the masked /run and
    exist, where they lead; elsewhere they are reachable anyway (see the README)."""
    out: list[str] = []
    for p in policy.allow_unix_sockets:
        real = os.path.realpath(p)
        if _under(real, MASKED_RUNTIME) and real != MASKED_RUNTIME and os.path.exists(real):
            out.append(real)
    return out


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
    )


def _could_make(path: str) -> bool:
    """Whether this user could make ``path`` (its folder exists and is writable to us):
    the session makes a missing protected name it can; one it cannot make, the box,
    running as the same user, cannot make either (a root-owned repository opened by
    another user)."""
    parent = os.path.dirname(path)
    return not os.path.isdir(parent) or os.access(parent, os.W_OK | os.X_OK)


def command(policy: Policy, argv: Sequence[str]) -> tuple[str, ...]:
    """What bwrap starts in the box: ``argv``, or with an allow-list the forwarder that
    then becomes ``argv`` (sandbox/network/box.py)."""
    if policy.network_allow is None:
        return tuple(argv)
    from sandbox.network.box import wrap

    return wrap(argv)


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


def box_args(
    policy: Policy,
    *,
    bwrap: str,
    features: Collection[str] | None = None,
    fds: Mapping[str, int] | None = None,
    shm_size: int | None = None,
    proc_belt: bool = True,
) -> tuple[str, ...]:
    """bwrap and its options for the session's box, up to the command.

    ``fds`` maps pinned and protected paths to ``O_PATH`` descriptors the session
    opened when it checked them (:func:`sandbox.beneath.open_path`); those are bound by
    descriptor (bwrap closes them before the command runs).

    ``shm_size`` (bytes) makes ``/dev/shm`` a tmpfs of that size (else it is a folder of
    /dev's tmpfs, which grows to half the machine's memory). ``/proc/keys`` and
    ``/proc/key-users`` are covered (``KEYRING_LISTS``), and the procfs entries that
    change the host's kernel are read-only (``PROC_READ_ONLY``). ``proc_belt=False``
    leaves the box's ``/proc`` without those covers, for a box whose own starter mounts
    a fresh one per command and covers that (:mod:`sandbox.warm`): the kernel refuses a
    new procfs mount in a user namespace while the only one there is partly covered.

    Mounts are applied in order, each covering what is beneath it:

    1. ``--ro-bind / /``: the whole host, read-only (reads are wide).
    2. ``--dev /dev``, ``--proc /proc``: a fresh minimal /dev (null, zero, random, tty,
       a private devpts and shm) and a /proc of the box's own PID namespace.
    3. Then, path by path from the shallowest to the deepest, so that a more specific
       rule always wins over a broader one (:func:`_mount_ops`):

       - the private temp folder bound read-write at ``/tmp``;
       - ``/run`` replaced by an empty tmpfs (host sockets; see ``MASKED_RUNTIME``);
       - the project, a linked worktree's common directory and ``[sandbox] writable``
         bound read-write at their own paths; these come after ``/tmp`` so a project
         under /tmp is still the project;
       - the project's ``.git``, and every folder between a read-write root and a
         protected path, bound onto itself, so that it is a mount point and cannot be
         renamed away and replaced by one whose hooks are writable, or by a link;
       - protected paths (``.git/hooks``, ``.git/config``, see :mod:`sandbox.git.dirs`)
         bound read-only onto themselves, after the read-write bind that contains
         them; a ``.git/hooks``
         that does not exist yet becomes an empty read-only tmpfs (bwrap leaves its
         empty mount point behind in the project, as git itself would make it);
       - hidden folders as an empty tmpfs, hidden files as ``/dev/null`` bound
         read-only (the box's bind mounts are ``nodev``, so opening it fails with
         "Permission denied": the file cannot be read). A hidden folder that contains
         the project is masked *before* the project is bound into it.
    4. The hidden folders' tmpfs mounts are made read-only last: a read-only tmpfs
       would stop bwrap from creating the mount points of deeper binds.

    Hidden paths under /tmp that no read-write bind shows are left out: the box's /tmp
    is the private folder, so the host's files there are not visible anyway.

    The namespaces and the rest: :func:`_namespace_args`. The environment is bwrap's own
    (``LaunchPlan.env``); bwrap passes it to the command unchanged. The command's
    ``argv[0]`` may be a bare name: bwrap looks it up on the box's PATH.
    """
    if not os.path.isabs(bwrap):
        raise ValueError(f"bwrap must be an absolute path, not {bwrap!r}")
    _require_features(bwrap, features)
    ops, read_only_last = _mount_ops(policy)
    args: list[str] = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for name in PROC_READ_ONLY if proc_belt else ():
        args += ["--ro-bind-try", name, name]
    for name in KEYRING_LISTS if proc_belt else ():
        args += ["--ro-bind", "/dev/null", name]
    if shm_size is not None:
        args += ["--size", str(shm_size), "--tmpfs", "/dev/shm"]
    for _, kind, path in ops:
        args += _mount_args(policy, kind, path, fds or {})
    for d in read_only_last:
        args += ["--remount-ro", d]
    return (*args, *_namespace_args(policy, features))


def _require_features(bwrap: str, features: Collection[str] | None) -> None:
    if features is None:
        return
    missing = [f for f in REQUIRED_FEATURES if f not in features]
    if missing:
        raise SandboxUnavailable(
            f"{bwrap} lacks {', '.join(missing)}",
            "install bubblewrap 0.4 or later: sudo apt-get install bubblewrap",
        )


_Op = tuple[int, int, str]


def _mount_ops(policy: Policy) -> tuple[list[_Op], list[str]]:
    """The mounts after /, /dev and /proc as (depth, kind, path), shallowest first, and
    the tmpfs mounts to make read-only at the end."""
    rw = list(policy.read_write_paths())
    ops: list[_Op] = [(_depth("/tmp"), _TMP, "/tmp")]
    ops.append((_depth(MASKED_RUNTIME), _RUNTIME, MASKED_RUNTIME))
    ops += [(_depth(p), _RW, p) for p in rw]
    # Once each: a path named twice (a file git includes from two places) would be
    # bound twice by one descriptor, which bwrap closes after its first use.
    protected = list(dict.fromkeys(policy.protected_paths()))
    empty_ro = list(policy.missing_hook_dirs())
    pinned: list[str] = list(policy.pinned_dirs) if policy.protect else []
    for p in [*protected, *empty_ro]:
        gitdir = os.path.dirname(p)
        if gitdir not in rw and gitdir not in pinned:
            pinned.append(gitdir)
    for g in _hidden_ancestors(policy, rw):
        if g not in pinned:
            pinned.append(g)
    for g in pinned:
        if not any(_under(g, r) for r in rw):
            raise ValueError(f"a read-write bind of {g!r} would lie outside the read-write "
                             "roots: the plan is wrong")
    ops += [(_depth(g), _PIN, g) for g in pinned]
    ops += [(_depth(p), _PROTECT, p) for p in protected]
    ops += [(_depth(p), _EMPTY_RO, p) for p in empty_ro]
    hidden_ops, hidden_dirs = _hidden_ops(policy, rw)
    ops += hidden_ops
    # Stable: equal depth and kind keep the policy's order.
    ops.sort(key=lambda op: (op[0], op[1]))
    return ops, [*empty_ro, *hidden_dirs]


def _hidden_ancestors(policy: Policy, rw: Sequence[str]) -> list[str]:
    """The folders between a read-write root and a hidden path beneath it. Each is bound
    onto itself (a mount point cannot be renamed): otherwise the box renames one, and
    the next session, which hides the configured path, finds nothing there while the
    secret sits readable at the new name."""
    out: list[str] = []
    for h in policy.hidden:
        real = os.path.realpath(h)
        roots = [r for r in rw if _under(real, r) and real != r]
        if not roots:
            continue
        root = max(roots, key=len)
        d = os.path.dirname(real)
        while d != root and _under(d, root):
            if d not in rw and d not in out:
                out.append(d)
            d = os.path.dirname(d)
    return out


def _hidden_ops(policy: Policy, rw: Sequence[str]) -> tuple[list[_Op], list[str]]:
    ops: list[_Op] = []
    hidden_dirs: list[str] = []
    for h in policy.hidden:
        real = os.path.realpath(h)
        if _under(real, "/tmp") and not any(_under(real, r) for r in rw):
            continue
        if os.path.isdir(real):
            if real not in hidden_dirs:
                hidden_dirs.append(real)
                ops.append((_depth(real), _HIDE_DIR, real))
        elif os.path.exists(real):
            ops.append((_depth(real), _HIDE_FILE, real))
    return ops, hidden_dirs


def _mount_args(policy: Policy, kind: int, path: str, fds: Mapping[str, int]) -> list[str]:
    if kind == _TMP:
        return ["--bind", policy.private_tmp, "/tmp"]
    if kind == _RUNTIME:
        out = ["--tmpfs", MASKED_RUNTIME]
        if policy.network and os.path.isdir(RESOLVER_DIR):
            out += ["--ro-bind", RESOLVER_DIR, RESOLVER_DIR]
        # [sandbox] allow_unix_sockets under /run, shown again. Read-only: connect(2) to
        # a socket needs no writable mount, and nothing else there can change.
        for sock in _allowed_runtime_sockets(policy):
            out += ["--ro-bind", sock, sock]
        if policy.network_allow is not None:
            from sandbox.network.box import BOX_SOCKET, host_socket

            out += ["--ro-bind", host_socket(policy), BOX_SOCKET]
        return out
    fd = fds.get(path)
    if kind == _PROTECT:
        # A copy the session made outside the box's sight, not a path the box can change.
        view = next((src for dest, src in policy.views if dest == path), None)
        if view is not None:
            return ["--ro-bind", view, path]
    if kind in (_RW, _PIN):
        return ["--bind", path, path] if fd is None else ["--bind-fd", str(fd), path]
    if kind == _PROTECT:
        if fd is None and not os.path.lexists(path) and not _could_make(path):
            return []  # see _could_make: nothing to cover, and the box cannot make it
        return ["--ro-bind", path, path] if fd is None else ["--ro-bind-fd", str(fd), path]
    if kind in (_HIDE_DIR, _EMPTY_RO):
        return ["--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


def _namespace_args(policy: Policy, features: Collection[str] | None) -> list[str]:
    """``--unshare-all`` (user, IPC, PID, network, UTS, cgroup), with the user namespace
    required (``--unshare-user``: fail rather than silently skip it when run as root)
    and, where bwrap supports it, ``--disable-userns``. ``--share-net`` only when the
    policy allows the network. ``--die-with-parent`` ends the box with the supervisor,
    ``--new-session`` takes away the controlling terminal (no TIOCSTI), ``--cap-drop
    ALL`` leaves no capability in any namespace."""
    args = ["--unshare-all", "--unshare-user"]
    if policy.network:
        args.append("--share-net")
    args += [f for f in OPTIONAL_FEATURES if features is None or f in features]
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    return [*args, "--chdir", policy.project]


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

    def harden(self, *, shm_size: int, seccomp: Callable[[], int | None]) -> None:
        """Before the first plan: /dev/shm's size, and where each run's system-call
        filter descriptor comes from (each plan gets its own)."""
        self._shm_size, self._seccomp = shm_size, seccomp

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
            from sandbox.probe import require_box

            with self._lock:
                if self._bwrap is None:
                    self._bwrap = require_box(self.policy)
        return self._bwrap

    def check(self) -> None:
        self.program()

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        if self._prefix is None:
            self._prefix = box_args(self.policy, bwrap=self.program(), features=self._features,
                                    fds=self._fds, shm_size=self._shm_size)
        fd = None if self._seccomp is None else self._seccomp()
        made = plan(self.policy, argv, bwrap=self.program(), features=self._features,
                    env_extra=env_extra, prefix=self._prefix,
                    pass_fds=tuple(self._fds.values()), seccomp_fd=fd)
        return args_by_fd(made, len(command(self.policy, argv)))

    def hold(self, roots: tuple[str, ...]) -> None:
        """Open, without following a link, the pinned and protected paths below
        ``roots``; the box binds them by these descriptors until :meth:`release`."""
        from sandbox.beneath import open_path, relative
        from sandbox.errors import PolicyError
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
                    raise PolicyError(f"{escape(p)} changed while the session opened "
                                      f"({err.strerror}); try again") from err
                except OSError as err:
                    self.release()
                    raise PolicyError(f"{escape(p)} changed while the session opened "
                                      f"({err.strerror}); try again") from err

    def release(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def read(self, result: RunResult) -> RunResult:
        """bwrap's own failures out of the command's result: bwrap that could not start
        at all, its execvp line (the command could not start: ``failed_to_start``), and
        a namespace error (raised, with the cause and the fix)."""
        if result.outcome == "failed_to_start":
            program = result.plan.argv[0] if result.plan else "bwrap"
            raise SandboxUnavailable(f"{program} could not start: {result.error}",
                                     "install the bubblewrap package: "
                                     "sudo apt-get install bubblewrap")
        if result.outcome == "exited" and result.returncode == 1:
            failed = exec_failure(result)
            if failed is not None:
                return failed
            from sandbox.probe import diagnose_start_failure, namespace_error

            error = namespace_error(result.stderr)
            if error is not None:
                raise diagnose_start_failure(error)
            _require_bind_fd(result)
        return result


def _require_bind_fd(result: RunResult) -> None:
    """A bwrap without ``--bind-fd`` (before 0.10, unless the distribution added it with
    its fix for CVE-2024-42472) cannot build a box that binds by descriptor."""
    if result.stderr.startswith(b"bwrap: Unknown option --bind-fd") or \
            result.stderr.startswith(b"bwrap: Unknown option --ro-bind-fd"):
        program = result.plan.argv[0] if result.plan else "bwrap"
        raise SandboxUnavailable(
            f"{program} lacks --bind-fd, which the box needs to bind git's files safely",
            "install bubblewrap 0.10 or later (or your distribution's update with the fix "
            "for CVE-2024-42472), or set [sandbox] protect = false")
