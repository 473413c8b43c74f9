"""This process's C library, opened once, and the mount calls the session makes by name.

ctypes loads nothing here until :func:`libc` is first called (``import ctypes`` costs a
one-shot command a millisecond it may not need).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

# mount(2) flags (linux/mount.h) and umount2(2)'s.
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_RDONLY = 0x1
MNT_DETACH = 0x2


def seal(fd: int) -> None:
    """``fd``, a memfd made with ``MFD_ALLOW_SEALING``, sealed: it can no longer be
    written, grown, shrunk or unsealed (a box that holds it reads what the host put)."""
    import fcntl

    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)


def filled(fd: int, data: bytes) -> int:
    """``data`` written whole into the memfd ``fd``, which is then sealed; ``fd`` is
    closed when that fails."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sealed(name: str, data: bytes) -> int:
    """A new sealed memfd named ``name`` holding ``data`` (close-on-exec)."""
    return filled(os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING), data)


@cache
def libc() -> Any:
    """The C library this process already runs on, with errno kept for each call."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _failed(what: str, path: str) -> OSError:
    import ctypes

    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}", path)


def mount_tmpfs(path: str, options: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    """A tmpfs on ``path`` with ``options`` (``size=...,mode=...``). Raises OSError."""
    if libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        raise _failed("mounting a tmpfs failed", path)


def detach(path: str) -> bool:
    """Unmount ``path`` lazily (``MNT_DETACH``): gone from the tree now, freed when no
    one uses it. Whether it was unmounted."""
    return bool(libc().umount2(os.fsencode(path), MNT_DETACH) == 0)


# clone(2)/unshare(2) flags that make a namespace (linux/sched.h), and the new mount API
# (linux/mount.h); the system-call numbers are the same on every architecture since
# 5.1's unified table.
CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MS_SHARED = 1 << 20
MS_PRIVATE = 1 << 18
MS_BIND = 0x1000
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH = 4
MOVE_MOUNT_T_EMPTY_PATH = 0x40
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_IDMAP = 0x00100000
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442


def call(what: str, result: int, path: str = "") -> int:
    """``result`` of a C call, or the OSError its errno names (``what`` said first)."""
    if result < 0:
        raise _failed(what, path)
    return result


def bind_self(path: str) -> None:
    """Bind ``path`` onto itself, with what is mounted below it."""
    where = os.fsencode(path)
    call("binding a folder onto itself", libc().mount(where, where, None,
                                                     MS_BIND | MS_REC, None), path)


def bind_private(path: str) -> None:
    """Bind ``path`` onto itself, with what is mounted below it, as a private mount:
    nothing mounted there elsewhere reaches this namespace's copy."""
    bind_self(path)
    where = os.fsencode(path)
    call("making a mount private", libc().mount(None, where, None, MS_PRIVATE | MS_REC,
                                                None), path)


def unshare(kind: int) -> None:
    """A new namespace of ``kind`` for this process (a single-threaded child)."""
    call("unshare", libc().unshare(kind))


def setns(fd: int, kind: int) -> None:
    """Enter the namespace of ``kind`` the descriptor ``fd`` names (a single-threaded
    child)."""
    call("setns", libc().setns(fd, kind))


def share(path: str) -> None:
    """Make the mount on ``path`` shared, in a peer group of its own (mount
    --make-shared): what is mounted below it from here on reaches every copy of it made
    since, in any namespace."""
    call("making a mount shared", libc().mount(None, os.fsencode(path), None, MS_SHARED,
                                               None), path)


def make_rslave(path: str = "/") -> None:
    """Nothing mounted under ``path`` from here on reaches the namespace this one was
    copied from (mount --make-rslave)."""
    call("making the mounts private", libc().mount(None, os.fsencode(path), None,
                                                   MS_REC | MS_SLAVE, None), path)


def open_tree_clone(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (``open_tree(OPEN_TREE_CLONE |
    AT_RECURSIVE)``), as a descriptor."""
    flags = OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC
    return call("open_tree", libc().syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(path),
                                            flags), path)


@cache
def _mount_attr() -> Any:
    """``struct mount_attr``, made once (a stage sets the attributes of every bind)."""
    import ctypes

    class _Attr(ctypes.Structure):
        _fields_ = (("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64))

    return _Attr


def _setattr(tree: int, flags: int, attr_set: int, userns: int, path: str, *,
             propagation: int = 0) -> None:
    import ctypes

    attr = _mount_attr()(attr_set, 0, propagation, userns)
    call("mount_setattr", libc().syscall(SYS_MOUNT_SETATTR, tree, b"", flags,
                                         ctypes.byref(attr), ctypes.sizeof(attr)), path)


def idmap(tree: int, userns: int, path: str) -> None:
    """Give the detached ``tree``'s top mount the id mapping of ``userns``."""
    _setattr(tree, AT_EMPTY_PATH, MOUNT_ATTR_IDMAP, userns, path)


def restrict(tree: int, path: str, *, read_only: bool) -> None:
    """Make the detached ``tree``, with every mount in it, ``nosuid`` and ``nodev``
    (as bwrap makes each of its binds), ``read_only`` if asked, and private: a copy
    joins the peer group of the mount it was copied from, and would take every mount
    made there after it (where that mount is shared, see :func:`share`). Attached below
    a shared mount, the tree becomes shared in a group of its own."""
    attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (MOUNT_ATTR_RDONLY if read_only else 0)
    _setattr(tree, AT_EMPTY_PATH | AT_RECURSIVE, attrs, 0, path, propagation=MS_PRIVATE)


def clone_fd(fd: int, path: str) -> int:
    """A detached copy of the mount tree at the descriptor ``fd`` (what it names, with
    the mounts below it), as a descriptor."""
    flags = OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH | os.O_CLOEXEC
    return call("open_tree", libc().syscall(SYS_OPEN_TREE, fd, b"", flags), path)


def attach_fd(tree: int, target: int, path: str) -> None:
    """Mount the detached ``tree`` on what the descriptor ``target`` names."""
    call("move_mount", libc().syscall(SYS_MOVE_MOUNT, tree, b"", target, b"",
                                      MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
         path)


def attach(tree: int, path: str) -> None:
    """Mount the detached ``tree`` on ``path`` (``move_mount``)."""
    call("move_mount", libc().syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD,
                                      os.fsencode(path), MOVE_MOUNT_F_EMPTY_PATH), path)


def mount_overlay(target: str, options: str) -> None:
    """An overlay on ``target`` with ``options`` (``lowerdir=...,upperdir=...``), nosuid
    and nodev. Raises OSError."""
    if libc().mount(b"overlay", os.fsencode(target), b"overlay", MS_NOSUID | MS_NODEV,
                    options.encode()) != 0:
        raise _failed("mounting an overlay failed", target)


# prctl(2): PR_SET_SECUREBITS, and the bit that keeps the capabilities across a uid change.
PR_SET_SECUREBITS = 28
SECBIT_NO_SETUID_FIXUP = 1 << 2


def setfsids(uid: int, gid: int) -> None:
    """Set this thread's file-system uid and gid (``setfsuid``, ``setfsgid``), keeping
    its capabilities (a change away from 0 would drop those over files)."""
    call("prctl", libc().prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP if uid else 0,
                               0, 0, 0))
    libc().setfsgid(gid)
    libc().setfsuid(uid)
