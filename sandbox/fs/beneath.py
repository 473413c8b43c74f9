"""Finding a path below a folder without following any link. No spawning.

``openat2(2)`` with ``RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`` lets the kernel refuse
every link and every ``..`` on the way; where the kernel lacks it (before 5.6, a
seccomp filter answering ENOSYS, or not Linux) the same walk is done one component at
a time with ``O_NOFOLLOW``. Either way a path found here names what is really there, not what a
link placed by a boxed command points at.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Literal

from pathguard.records import NamedTuple
from sandbox.platform import LINUX

_SYS_OPENAT2 = 437  # the same number on x86_64, aarch64 and the other unified tables
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_O_PATH = getattr(os, "O_PATH", 0)

Kind = Literal["dir", "file", "link", "other", "missing", "blocked"]


class Found(NamedTuple):
    """What is at ``root/rel``: ``blocked`` when a folder on the way is a link (or not
    a folder), ``link`` when the last component is one (``target`` is its text)."""

    kind: Kind
    path: str
    target: str = ""
    ino: tuple[int, int] = (0, 0)


# The syscall's number is Linux's: elsewhere only the component walk is used.
_have_openat2: bool | None = None if LINUX else False


def _openat2(dirfd: int, rel: str, flags: int) -> int:
    # ctypes is imported here, on the first walk: not every import of the package
    # needs it.
    import ctypes

    from sandbox.libc import libc

    how = (ctypes.c_uint64 * 3)(flags, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH)
    fd = libc().syscall(_SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how),
                       ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def _walk(dirfd: int, rel: str, flags: int) -> int:
    """The component walk: each step ``O_NOFOLLOW``; ``..`` refused."""
    fd = os.dup(dirfd)
    try:
        for part in [p for p in rel.split("/") if p and p != "."]:
            if part == "..":
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), rel)
            nxt = os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_dir_beneath(root: str, rel: str) -> int:
    """An ``O_PATH`` descriptor of the folder ``root/rel``, reached without following a
    link; OSError (ELOOP, ENOTDIR, ENOENT, EXDEV) otherwise."""
    global _have_openat2
    flags = _O_PATH | os.O_DIRECTORY
    rootfd = os.open(root, flags | os.O_CLOEXEC)
    try:
        if not rel.strip("/."):
            return os.dup(rootfd)
        if _have_openat2 is not False:
            try:
                fd = _openat2(rootfd, rel, flags | os.O_CLOEXEC)
                _have_openat2 = True
                return fd
            except OSError as err:
                if err.errno not in (errno.ENOSYS, errno.EPERM) or _have_openat2:
                    raise
                _have_openat2 = False
        return _walk(rootfd, rel, flags)
    finally:
        os.close(rootfd)


def find(root: str, rel: str) -> Found:
    """What is at ``root/rel`` (``rel`` relative, no ``..``), never through a link."""
    path = os.path.join(root, rel) if rel else root
    parent, name = os.path.split(rel)
    try:
        fd = open_dir_beneath(root, parent)
    except OSError as err:
        return Found("missing" if err.errno == errno.ENOENT else "blocked", path)
    try:
        if not name:
            st = os.fstat(fd)
            return Found("dir" if stat.S_ISDIR(st.st_mode) else "other", path, "",
                         (st.st_dev, st.st_ino))
        return _found_at(fd, name, path)
    except OSError as err:
        return Found("missing" if err.errno == errno.ENOENT else "blocked", path)
    finally:
        os.close(fd)


def find_in(root: str, folder: str, names: tuple[str, ...]) -> list[Found]:
    """:func:`find` of each of ``names`` in the folder ``root/folder``, which is reached
    once for all of them (a git folder's protected names)."""
    base = os.path.join(root, folder) if folder else root
    try:
        fd = open_dir_beneath(root, folder)
    except OSError as err:
        kind: Kind = "missing" if err.errno == errno.ENOENT else "blocked"
        return [Found(kind, os.path.join(base, n)) for n in names]
    try:
        return [_found_at(fd, n, os.path.join(base, n)) for n in names]
    finally:
        os.close(fd)


def _found_at(fd: int, name: str, path: str) -> Found:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        target = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else ""
    except OSError as err:
        return Found("missing" if err.errno == errno.ENOENT else "blocked", path)
    ino = (st.st_dev, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        return Found("link", path, target, ino)
    kind: Kind = ("dir" if stat.S_ISDIR(st.st_mode)
                  else "file" if stat.S_ISREG(st.st_mode) else "other")
    return Found(kind, path, "", ino)


def read_beneath(root: str, rel: str, limit: int = 1 << 16) -> bytes | None:
    """The first ``limit`` bytes of the regular file ``root/rel``, or None when it is
    missing, a link, behind one, or not a regular file."""
    parent, name = os.path.split(rel)
    try:
        dfd = open_dir_beneath(root, parent)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def create_beneath(root: str, rel: str, *, folder: bool, content: bytes = b"",
                   folders: Folders | None = None) -> bool:
    """Make the file (or empty folder) ``root/rel`` if nothing is there, never through a
    link; True when made. Raises OSError when the place is unusable. ``folders`` keeps
    the folders reached for a batch of names (closed by its owner)."""
    parent, name = os.path.split(rel)
    dfd = folders.of(root, parent) if folders is not None else open_dir_beneath(root, parent)
    try:
        return _create_at(dfd, name, folder, content)
    finally:
        if folders is None:
            os.close(dfd)


def _create_at(dfd: int, name: str, folder: bool, content: bytes) -> bool:
    if folder:
        try:
            os.mkdir(name, 0o755, dir_fd=dfd)
        except FileExistsError:
            return False
        return True
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    except FileExistsError:
        return False
    with open(fd, "wb") as f:
        f.write(content)
    return True


class Folders:
    """Folders reached with :func:`open_dir_beneath`, each once for all the names made
    in it (a repository with hundreds of modules has two or three in each of hundreds
    of git folders). A folder that cannot be reached is tried again at its next name
    (one made in between may be there now)."""

    def __init__(self) -> None:
        self._fds: dict[tuple[str, str], int] = {}

    def of(self, root: str, rel: str) -> int:
        fd = self._fds.get((root, rel))
        if fd is None:
            fd = self._fds[(root, rel)] = open_dir_beneath(root, rel)
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def relative(path: str, roots: tuple[str, ...]) -> tuple[str, str] | None:
    """(root, path relative to it) for the first root ``path`` lies in, lexically."""
    for r in roots:
        if path == r:
            return r, ""
        if path.startswith(r.rstrip("/") + "/"):
            return r, path[len(r.rstrip("/")) + 1:]
    return None


def link_on_the_way(path: str, roots: tuple[str, ...]) -> str | None:
    """The first link on the way to ``path`` that lies in one of ``roots`` (folders a
    boxed command can write, so it could re-point the link), or None."""
    cur = "/"
    for part in [p for p in path.split("/") if p]:
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt) and relative(nxt, roots) is not None:
            return nxt
        cur = os.path.realpath(nxt)
    return None


def open_path(root: str, rel: str, rootfd: int | None = None) -> int:
    """An ``O_PATH`` descriptor of ``root/rel`` itself (a folder or a file), reached
    without following a link; OSError (ELOOP for a link) otherwise. The box binds it by
    descriptor, so that what was checked is what is bound. ``rootfd``: ``root``, opened
    already (for many paths below it)."""
    global _have_openat2
    if _have_openat2 is not False and rel.strip("/."):
        # One call: with no link allowed anywhere, one at the end is ELOOP too.
        fd_root = rootfd if rootfd is not None else os.open(
            root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = _openat2(fd_root, rel, _O_PATH | os.O_CLOEXEC)
            _have_openat2 = True
            return fd
        except OSError as err:
            if err.errno not in (errno.ENOSYS, errno.EPERM) or _have_openat2:
                raise
            _have_openat2 = False
        finally:
            if rootfd is None:
                os.close(fd_root)
    parent, name = os.path.split(rel)
    dfd = open_dir_beneath(root, parent)
    try:
        if not name:
            return os.dup(dfd)
        fd = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
    return fd
