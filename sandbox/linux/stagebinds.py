"""What a stage's child mounts (:mod:`sandbox.linux.stage`): the copy of ``/``, the
id-mapped read-write roots, and the binds, each made on the descriptor of what it
covers. Everything here runs in a forked child of a process with threads, so it imports
nothing as it goes: what it needs is imported with this module."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Literal

from pathguard.records import NamedTuple
from sandbox import libc
from sandbox.fs.beneath import create_beneath, open_path, relative
from sandbox.linux import standin

BindKind = Literal["pin", "ro", "view", "empty"]


class Bind(NamedTuple):
    """One mount of the stage, on ``path`` below the read-write ``root``: ``pin`` binds
    the folder onto itself, ``ro`` the path onto itself read-only, ``view`` the file
    ``source`` read-only over it, ``empty`` an empty read-only tmpfs (the folder is
    made first, as bwrap would). ``expect`` is the device and inode the session held,
    or None."""

    kind: BindKind
    path: str
    root: str
    source: str = ""
    expect: tuple[int, int] | None = None


def mount_layers(layers: Sequence[Any], *,  # pragma: no cover - in the child
                 own: bool) -> list[str]:
    """Each :class:`~sandbox.policy.layers.Layer`'s overlay, mounted on its target; for
    each one that could not be, ``tool: why``. Every path is opened first, none through
    a link, the lower checked to be the folder the session saw, and given to the kernel
    as ``/proc/self/fd/N``: a link planted on the way since (by a box that writes the
    home) cannot make the host's cache the upper one. ``own``: a plain user's stage,
    whose overlay keeps its marks in ``user.`` attributes."""
    failed = []
    for layer in layers:
        fds: list[int] = []
        try:
            fds.append(open_path(layer.top, os.path.basename(layer.target)))
            fds.append(open_path(layer.slot, layer.upper))
            fds.append(open_path(layer.slot, layer.work))
            fds.append(os.open(layer.lower, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
            st = os.fstat(fds[-1])
            if (st.st_dev, st.st_ino) != tuple(layer.lower_id):
                raise OSError(0, "it is another folder now")
            at, up, work, low = (f"/proc/self/fd/{fd}" for fd in fds)
            options = f"lowerdir={low},upperdir={up},workdir={work}"
            if own:
                libc.mount_overlay(at, options + ",userxattr")
            else:
                # The overlay writes its upper folder as its mounter: as the stand-in,
                # which the slot's idmapped mount maps (root is not mapped there).
                libc.setfsids(standin.UID, standin.GID)
                try:
                    libc.mount_overlay(at, options)
                finally:
                    libc.setfsids(0, 0)
        except OSError as err:
            failed.append(f"{layer.tool}: {err.strerror or err}")
        finally:
            for fd in fds:
                os.close(fd)
    return failed


def copy_root(copy: str) -> None:  # pragma: no cover - in the child
    """Mount on ``copy`` a copy of this namespace's ``/``, every mount below it with it,
    before any of the stage's binds is made."""
    if copy:
        tree = libc.open_tree_clone("/")
        try:
            libc.attach(tree, copy)
        finally:
            os.close(tree)


class Said(Exception):
    """What the child says went wrong: ``changed`` (a path is not what the session held)
    or ``unmapped`` (a folder the box writes refused its idmapped mount)."""

    def __init__(self, kind: str, path: str, why: str) -> None:
        super().__init__(path)
        self.kind, self.path, self.why = kind, path, why


def detach_others(private: str) -> None:  # pragma: no cover - in the child
    """Unmount, here, every mount in ``private``'s folder but ``private`` itself, and
    make that folder a private mount: another session's mount there later (on a host
    that shares its mounts) does not come here either."""
    folder = os.path.dirname(private)
    top = folder.rstrip("/") + "/"
    with open("/proc/self/mountinfo", "rb") as f:
        points = [os.fsdecode(_unescape(line.split()[4])) for line in f]
    for p in sorted(set(points), key=len, reverse=True):
        if p.startswith(top) and p != private and not p.startswith(private + "/"):
            libc.detach(p)
    libc.bind_private(folder)


def _unescape(field: bytes) -> bytes:
    """A mountinfo path field: blanks, tabs, newlines and backslashes are octal."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


def idmap_roots(idmaps: Sequence[standin.Idmap]) -> list[str]:  # pragma: no cover - in the child
    """Each ``(path, holder, required)`` mounted on itself through the mapping of the
    user namespace of the child ``holder``, shallowest first, every copy taken before
    any is attached (a folder inside another is copied from the host's); the paths not
    required that could not be."""
    order = sorted(range(len(idmaps)), key=lambda i: idmaps[i][0].count("/"))
    skipped: list[str] = []
    trees: dict[int, int] = {}
    spaces = {pid: os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
              for pid in {holder for _, holder, _ in idmaps}}
    for i in order:
        path, holder, required = idmaps[i]
        ns = spaces[holder]
        try:
            tree = libc.open_tree_clone(path)
            libc.idmap(tree, ns, path)
        except OSError as err:
            if required:
                raise Said("unmapped", path, err.strerror or str(err)) from err
            skipped.append(path)
            continue
        trees[i] = tree
    for i in order:
        if i in trees:
            libc.attach(trees[i], idmaps[i][0])
    return skipped


def share_roots(binds: Sequence[Bind]) -> None:  # pragma: no cover - in the child
    """Each read-write root of ``binds`` bound onto itself and made shared, for the
    binds :meth:`~sandbox.linux.stage.Stage.bind_late` makes later: every one bound
    before any is shared (a bind of a folder of a shared mount would join its group)."""
    tops = list(dict.fromkeys(b.root for b in binds))
    for top in tops:
        libc.bind_self(top)
    for top in tops:
        libc.share(top)


def bind_all(binds: Sequence[Bind]) -> None:  # pragma: no cover - in the child
    """``binds``, made here, in order."""
    roots: dict[str, int] = {}  # each root opened once, for every bind below it
    try:
        for b in binds:
            _bind_at(b, roots)
    finally:
        for fd in roots.values():
            os.close(fd)


def _bind_at(b: Bind, roots: dict[str, int]) -> None:  # pragma: no cover - in the child
    where = relative(b.path, (b.root,))
    if where is None:
        raise Said("changed", b.path, "not below its root")
    if b.kind == "empty" and not os.path.lexists(b.path):
        create_beneath(where[0], where[1], folder=True)
    try:
        rootfd = roots.get(b.root)
        if rootfd is None:
            rootfd = roots[b.root] = os.open(b.root, os.O_PATH | os.O_DIRECTORY
                                             | os.O_CLOEXEC)
        fd = open_path(*where, rootfd=rootfd)
    except OSError as err:
        raise Said("changed", b.path, err.strerror or str(err)) from err
    try:
        st = os.fstat(fd)
        if b.expect is not None and (st.st_dev, st.st_ino) != b.expect:
            raise Said("changed", b.path, "it is another file now")
        _bind_one(b, fd)
    finally:
        os.close(fd)


def _bind_one(b: Bind, fd: int) -> None:  # pragma: no cover - in the child
    if b.kind == "empty":
        libc.mount_tmpfs(f"/proc/self/fd/{fd}", "size=4k,mode=0755",
                         libc.MS_NOSUID | libc.MS_NODEV | libc.MS_RDONLY)
        return
    if b.kind == "view":
        src = os.open(b.source, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            tree = libc.clone_fd(src, b.source)
        finally:
            os.close(src)
    else:
        tree = libc.clone_fd(fd, b.path)
    try:
        # nosuid and nodev already, as bwrap would make them: it remounts every mount
        # below its binds that lacks a flag of theirs, one by one.
        libc.restrict(tree, b.path, read_only=b.kind != "pin")
        libc.attach_fd(tree, fd, b.path)
    finally:
        os.close(tree)
