"""The bubblewrap options of the Linux box, as data: its namespaces and every mount.

:func:`box_args` turns a :class:`~sandbox.policy.Policy` into bwrap's options (the
command comes after them, from :mod:`sandbox.linux.bwrap`). Pure: no I/O but
stat/readlink. The rule for bind sources is the backend's (see its module docstring):
no path bound here is ever a link's target, and a read-write bind whose source is
outside the read-write roots is a programming error.

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

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.errors import SandboxUnavailable
from sandbox.git import configcopy
from sandbox.linux import standin
from sandbox.linux.procfs import KEYRING_LISTS, PROC_READ_ONLY
from sandbox.policy import Policy
from sandbox.policy.caches import box_binds as _cache_binds
from sandbox.policy.caches import box_roots as rw_roots
from sandbox.process.pty import TTY_LINKS

if TYPE_CHECKING:
    from sandbox.linux.stagebinds import Bind

# Flags the box cannot do without: a bwrap that lacks one is refused, not worked around.
REQUIRED_FEATURES: tuple[str, ...] = ("--unshare-all", "--unshare-user", "--die-with-parent",
                                       "--new-session", "--cap-drop", "--remount-ro")


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


# Mount kinds, in the order they are applied to one path (a later one covers an earlier).
# A writable home's top (_HOME_TOP) is read-only over its read-write root, before the
# entries it keeps are bound read-write again one level down.
# A package manager's cache (_CACHE, sandbox/policy/caches.py) is bound over its tool's folder.
_TMP, _RUNTIME, _RW, _HOME_TOP, _PIN, _PROTECT, _EMPTY_RO, _HIDE_DIR, _HIDE_FILE, _CACHE = \
    range(10)


def _depth(path: str) -> int:
    return len([c for c in path.split("/") if c])


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _allowed_runtime_sockets(policy: Policy) -> list[str]:
    """The allowed Unix sockets (or their folders) that lie under the masked /run and
    exist, where they lead; elsewhere the Unix-socket guard lets the box reach them
    (sandbox/linux/warm/unixguard.py)."""
    out: list[str] = []
    for p in policy.allow_unix_sockets:
        real = os.path.realpath(p)
        if _under(real, MASKED_RUNTIME) and real != MASKED_RUNTIME and os.path.exists(real):
            out.append(real)
    return out


def _could_make(path: str) -> bool:
    """Whether the box could make ``path``: its folder is missing (made by the box on
    the way), writable to this user, or this user's own (its owner may ``chmod u+w``
    it first). The session makes a missing protected name it can; one nobody running as
    this user can make (a folder of another owner, not writable to us: a root-owned
    repository opened by another user) needs no cover."""
    parent = os.path.dirname(path)
    try:
        st = os.stat(parent)
    except OSError:
        return True
    return st.st_uid == os.getuid() or os.access(parent, os.W_OK | os.X_OK)


def box_args(
    policy: Policy,
    *,
    bwrap: str,
    features: Collection[str] | None = None,
    fds: Mapping[str, int] | None = None,
    shm_size: int | None = None,
    proc_belt: bool = True,
    staged: bool = False,
    root: str = "/",
) -> tuple[str, ...]:
    """bwrap and its options for the session's box, up to the command.

    ``fds`` maps pinned and protected paths to ``O_PATH`` descriptors the session
    opened when it checked them (:func:`sandbox.fs.beneath.open_path`); those are bound by
    descriptor (bwrap closes them before the command runs).

    ``shm_size`` (bytes) makes ``/dev/shm`` a tmpfs of that size (else it is a folder of
    /dev's tmpfs, which grows to half the machine's memory). ``/proc/keys`` and
    ``/proc/key-users`` are covered (``KEYRING_LISTS``), and the procfs entries that
    change the host's kernel are read-only (``PROC_READ_ONLY``). ``proc_belt=False``
    leaves the box's ``/proc`` without those covers, for a box whose own starter mounts
    a fresh one per command and covers that (:mod:`sandbox.linux.warm`): the kernel refuses a
    new procfs mount in a user namespace while the only one there is partly covered.

    ``staged`` leaves out the binds :func:`staged_binds` gives: the session's stage
    (:mod:`sandbox.linux.stage`) has made them, and the read-write binds carry them.
    ``root`` is the box's ``/``: a stage with many binds makes a copy of its ``/`` from
    before them (:func:`~sandbox.linux.stage.root_copy`), so that they are in the
    box once (:attr:`~sandbox.linux.stage.Stage.root`).

    The order of the mounts, and why: this module's docstring.
    """
    if not os.path.isabs(bwrap):
        raise ValueError(f"bwrap must be an absolute path, not {bwrap!r}")
    _require_features(bwrap, features)
    ops, read_only_last = _mount_ops(policy)
    args: list[str] = [bwrap, "--ro-bind", root, "/", "--dev", "/dev", "--proc", "/proc",
                       *(a for link in TTY_LINKS for a in ("--symlink", *link))]
    for name in PROC_READ_ONLY if proc_belt else ():
        args += ["--ro-bind-try", name, name]
    for name in KEYRING_LISTS if proc_belt else ():
        args += ["--ro-bind", "/dev/null", name]
    if shm_size is not None:
        args += ["--size", str(shm_size), "--tmpfs", "/dev/shm"]
    rw = rw_roots(policy)
    views = _views(policy)
    for _, kind, path in ops:
        if not (staged and _stageable(kind, path, rw)):
            args += _mount_args(policy, kind, path, fds or {}, views)
    for d in read_only_last:
        if not (staged and _stageable(_EMPTY_RO, d, rw)):
            args += ["--remount-ro", d]
    out = (*args, *_namespace_args(policy, features))
    # A staged box started by root is root's stand-in's: bwrap makes no user namespace
    # of its own there (sandbox/linux/standin.py).
    return standin.box_options(out) if staged and standin.needed() else out


def _views(policy: Policy) -> dict[str, str]:
    """Each protected path the session made a view of, and the view (the first named);
    and each tool folder a cache is bound over, and its folder in the cache."""
    out: dict[str, str] = {}
    for dest, src in (*policy.views, *((d, s) for s, d in _cache_binds(policy))):
        out.setdefault(dest, src)
    return out


def _stageable(kind: int, path: str, rw: Sequence[str]) -> bool:
    """Whether the stage makes this mount: a pin, a protected path or an empty cover
    below a read-write root."""
    return kind in (_PIN, _PROTECT, _EMPTY_RO) and any(_under(path, r) for r in rw)


def bindable_late(policy: Policy) -> bool:
    """Whether the stage may make its binds while bwrap makes the box, or after
    (:meth:`~sandbox.linux.stage.Stage.bind_late`): no bind of the stage is on or
    above a mount bwrap makes (a hidden path's cover, a read-write root inside another).
    A mount that arrives later on a folder covers whatever bwrap mounted below it."""
    ops, _ = _mount_ops(policy)
    rw = rw_roots(policy)
    staged = {path for _, kind, path in ops if _stageable(kind, path, rw)}
    for _, kind, path in ops:
        if not _stageable(kind, path, rw):
            d = path
            while True:
                if d in staged:
                    return False
                parent = os.path.dirname(d)
                if parent == d:
                    break
                d = parent
    return True


def staged_binds(policy: Policy, fds: Mapping[str, int]) -> list[Bind]:
    """The binds the session's stage makes for this box (:func:`_stageable`), in the
    order bwrap would make them, each with the device and inode of the descriptor the
    session holds for it (``fds``), if any."""
    from sandbox.linux.stagebinds import Bind

    ops, _ = _mount_ops(policy)
    rw = rw_roots(policy)
    views = _views(policy)
    out: list[Bind] = []
    for _, kind, path in ops:
        if not _stageable(kind, path, rw):
            continue
        root = max((r for r in rw if _under(path, r)), key=len)
        fd = fds.get(path)
        expect = None
        if fd is not None:
            st = os.fstat(fd)
            expect = (st.st_dev, st.st_ino)
        if kind == _PIN:
            out.append(Bind("pin", path, root, expect=expect))
        elif kind == _EMPTY_RO:
            out.append(Bind("empty", path, root))
        else:
            view = views.get(path)
            if view is not None:
                configcopy.prepare(view, policy.private_tmp)  # a link's copy, if it is one
                out.append(Bind("view", path, root, source=view, expect=expect))
            elif fd is not None or os.path.lexists(path) or _could_make(path):
                out.append(Bind("ro", path, root, expect=expect))
    return out


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


# The last policy's mounts: an open asks three times (the stage's binds, whether they
# may come late, bwrap's arguments), each some milliseconds with hundreds of git
# folders. Keyed by the (immutable) policy object, held here so its id is not reused.
_last_ops: tuple[Policy, tuple[list[_Op], list[str]]] | None = None


def _mount_ops(policy: Policy) -> tuple[list[_Op], list[str]]:
    """The mounts after /, /dev and /proc as (depth, kind, path), shallowest first, and
    the tmpfs mounts to make read-only at the end. Callers do not change them."""
    global _last_ops
    last = _last_ops
    if last is not None and last[0] is policy:
        return last[1]
    made = _make_mount_ops(policy)
    _last_ops = (policy, made)
    return made


def _make_mount_ops(policy: Policy) -> tuple[list[_Op], list[str]]:
    rw = list(rw_roots(policy))
    ops: list[_Op] = [(_depth("/tmp"), _TMP, "/tmp")]
    ops.append((_depth(MASKED_RUNTIME), _RUNTIME, MASKED_RUNTIME))
    ops += [(_depth(p), _RW, p) for p in rw]
    # Once each: a path named twice (a file git includes from two places) would be
    # bound twice by one descriptor, which bwrap closes after its first use.
    protected = list(dict.fromkeys(policy.protected_paths()))
    empty_ro = list(policy.missing_hook_dirs())
    pinned: list[str] = list(policy.pinned_dirs) if policy.protect else []
    tops = list(policy.home_tops) if policy.protect else []
    ops += [(_depth(t), _HOME_TOP, t) for t in tops]
    # Every folder between a read-write root and a protected path, or a read-write root
    # inside another, is bound onto itself: one the box could rename would take the
    # bind below it along and free its name (a writable home's ~/.local, above the
    # toolkit's ~/.local/share/harness; ~/work, above a project in a writable home,
    # which the box would then make anew with a .git of its own).
    held, roots = set(pinned), set(rw)
    nested = [r for r in rw if any(r != o and _under(r, o) for o in rw)]
    # Nothing inside a read-only home top can be renamed: a pin there would only make a
    # folder of it writable again (~/.config, above the toolkit's ~/.config/harness).
    for p in [*nested, *protected, *empty_ro, *(t for t in tops if t not in roots)]:
        for d in _folders_between(p, roots, held, tops):
            held.add(d)
            pinned.append(d)
    for g in _hidden_ancestors(policy, rw, tops):
        if g not in held:
            held.add(g)
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
    ops += [(_depth(d), _CACHE, d) for _, d in _cache_binds(policy)]
    # Stable: equal depth and kind keep the policy's order.
    ops.sort(key=lambda op: (op[0], op[1]))
    return ops, [*empty_ro, *hidden_dirs]


def _folders_between(path: str, roots: set[str], held: set[str],
                     tops: Sequence[str] = ()) -> list[str]:
    """The folders above ``path`` up to the read-write root that holds it, nearest
    first, stopping early at one in ``held`` (whose own are held already) or in a
    read-only home top (``tops``)."""
    out = []
    d = os.path.dirname(path)
    while d not in roots and d not in held and d != os.path.dirname(d) \
            and not any(_under(d, t) for t in tops):
        out.append(d)
        d = os.path.dirname(d)
    return out


def _hidden_ancestors(policy: Policy, rw: Sequence[str],
                      tops: Sequence[str] = ()) -> list[str]:
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
        while d != root and _under(d, root) and not any(_under(d, t) for t in tops):
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


def _mount_args(policy: Policy, kind: int, path: str, fds: Mapping[str, int],
                views: Mapping[str, str]) -> list[str]:
    if kind == _TMP:
        return ["--bind", policy.private_tmp, "/tmp"]
    if kind == _RUNTIME:
        return _runtime_args(policy)
    fd = fds.get(path)
    if kind in (_RW, _PIN):
        return ["--bind", path, path] if fd is None else ["--bind-fd", str(fd), path]
    if kind == _CACHE:
        return ["--bind", views[path], path]
    if kind == _PROTECT:
        return _protect_args(path, fd, views.get(path))
    if kind == _HOME_TOP:
        return ["--ro-bind", path, path]
    if kind in (_HIDE_DIR, _EMPTY_RO):
        return ["--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


def _runtime_args(policy: Policy) -> list[str]:
    """/run: an empty tmpfs, with what the policy shows again in it."""
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


def _protect_args(path: str, fd: int | None, view: str | None) -> list[str]:
    """A protected path, read-only: the session's view of it where it made one, else
    the path itself (by its descriptor when pinned)."""
    # A copy the session made outside the box's sight, not a path the box can change.
    # The link to the box's copy of git's config: the stage's to mount, not bwrap's.
    if view is not None and not configcopy.is_view(view):
        return ["--ro-bind", view, path]
    if fd is None and not os.path.lexists(path) and not _could_make(path):
        return []  # see _could_make: nothing to cover, and the box cannot make it
    return ["--ro-bind", path, path] if fd is None else ["--ro-bind-fd", str(fd), path]


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
