"""Moving what the box made out of the project, without following a link. A leaf: the
standard library only, since the watchdog program (:mod:`sandbox.process.watchdog_main`)
moves through it too, when a harness dies with its session open
(:func:`sandbox.process.made.clean_session`); what is said about it is
:mod:`sandbox.session.moveout`'s.

Each row (a path relative to the project) is walked to from the project's folder, each
step opened without following a link: a row that is a link is moved as the link, and a
link on the way to a nested row is moved in its place, unless it was there at the open
(the user's, never followed). What is moved goes to the same path below a folder of the
session's in the data folder, or, where something is already there, below the next
free one (``BASE-2``, ...); on another file system it is copied the same way, links as
links, and then removed.

A folder of this user's on the way that the box closed to its owner (``chmod 0`` of the
project, ``chmod a-w .git`` after making a name in it) is opened to its owner for the
move, and its mode put back after: the box runs as that owner, so a mode alone could
otherwise keep what it made where the host reads it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Mapping

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# What moving one row came to: (the row, what was there on its way (the row itself or
# a link above it), where it went ("" when it did not), what that was a link to (None
# for no link), why it did not go: "" when it went, BEHIND for a row behind a link that
# was there at the open, or the OS's words).
Moved = tuple[str, str, str, "str | None", str]
BEHIND = "behind a link"


def _readlink(name: str, fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=fd)
    except OSError:
        return None


def move_rows(project: str, rows: Iterable[str], links: Mapping[str, str],
              base: str) -> list[Moved]:
    """Move each of ``rows`` that exists in ``project`` below ``base``. ``links``: the
    links on the way to a row that were there at the open, with what each read."""
    try:
        top = os.open(project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        # One listing of the top, not a look-up per row: this runs after every run.
        # (A top that cannot be listed is looked at row by row, as before.)
        try:
            names: set[str] | None = set(os.listdir(top))
        except OSError:
            names = None
        return [m for row in rows if (names is None or row.split("/", 1)[0] in names)
                and (m := _one(top, row, links, base)) is not None]
    finally:
        os.close(top)


def _one(top: int, row: str, links: Mapping[str, str], base: str) -> Moved | None:
    locked: list[tuple[int, int]] = []
    try:
        return _walk(top, row, links, base, locked)
    finally:
        for fd, mode in reversed(locked):  # each folder opened for the move, as it was
            with contextlib.suppress(OSError):
                os.fchmod(fd, mode)
            os.close(fd)


def _open_in(fd: int, part: str, locked: list[tuple[int, int]]) -> int:
    """The folder ``part`` in ``fd``, opened without following a link; one of this
    user's that its owner may not enter is opened to its owner first (in ``locked``,
    with its mode)."""
    try:
        return os.open(part, _DIR, dir_fd=fd)
    except PermissionError:
        path = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=fd)
        try:
            st = os.fstat(path)
            if st.st_uid != os.geteuid():
                raise
            mode = stat.S_IMODE(st.st_mode)
            os.chmod(f"/proc/self/fd/{path}", mode | 0o700)
            opened = os.open(f"/proc/self/fd/{path}", os.O_RDONLY | os.O_DIRECTORY
                             | os.O_CLOEXEC)
        finally:
            os.close(path)
        locked.append((os.dup(opened), mode))
        return opened


def _let_write(fd: int, locked: list[tuple[int, int]]) -> bool:
    """The folder ``fd`` made writable to its owner, this user, for the move (in
    ``locked``, with its mode); whether it was not before."""
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid() or mode & 0o300 == 0o300:
        return False
    os.fchmod(fd, mode | 0o300)
    locked.append((os.dup(fd), mode))
    return True


def _walk(top: int, row: str, links: Mapping[str, str], base: str,
          locked: list[tuple[int, int]]) -> Moved | None:
    parts = row.split("/")
    fd, opened = top, []
    try:
        for i, part in enumerate(parts):
            sub = "/".join(parts[:i + 1])
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as err:
                return row, sub, "", None, err.strerror or str(err)
            last = i == len(parts) - 1
            if stat.S_ISLNK(st.st_mode) and not last:
                text = _readlink(part, fd)
                if text is not None and links.get(sub) == text:
                    return row, sub, "", text, BEHIND
                return _move(fd, part, sub, row, base, locked=locked)
            if last:
                return _move(fd, part, sub, row, base, locked=locked)
            if not stat.S_ISDIR(st.st_mode):
                return None  # a file on the way: the tool reads nothing there
            try:
                fd = _open_in(fd, part, locked)
            except OSError as err:
                return row, sub, "", None, err.strerror or str(err)
            opened.append(fd)
        return None
    finally:
        for f in opened:
            os.close(f)


def _move(fd: int, name: str, sub: str, row: str, base: str, *,
          locked: list[tuple[int, int]] | None = None) -> Moved:
    text = _readlink(name, fd)
    try:
        where, into, fresh = _place(base, sub)
        try:
            try:
                _rename(fd, name, into, fresh, [] if locked is None else locked)
            except OSError as err:
                if err.errno != errno.EXDEV:
                    raise
                _copy(fd, name, into, fresh)
                _remove(fd, name)
        finally:
            os.close(into)
    except OSError as err:
        return row, sub, "", text, err.strerror or str(err)
    return row, sub, os.path.join(where, sub), text, ""


def _rename(fd: int, name: str, into: int, fresh: str,
            locked: list[tuple[int, int]]) -> None:
    """``name`` in ``fd`` renamed to ``fresh`` in ``into``; a folder of this user's the
    box made unwritable to its owner (the folder, or the name itself when a folder,
    whose ``..`` a rename rewrites) opened to its owner first."""
    try:
        os.rename(name, fresh, src_dir_fd=fd, dst_dir_fd=into)
        return
    except PermissionError:
        again = _let_write(fd, locked)
        with contextlib.suppress(OSError):
            sub = os.open(name, _DIR, dir_fd=fd)
            try:
                again = _let_write(sub, locked) or again
            finally:
                os.close(sub)
        if not again:
            raise
    os.rename(name, fresh, src_dir_fd=fd, dst_dir_fd=into)


def _place(base: str, sub: str) -> tuple[str, int, str]:
    """The session's folder (``base``, else the next free ``BASE-N``), an open
    descriptor of the folder ``sub``'s parent has in it, and ``sub``'s name there."""
    moved = os.path.dirname(base)
    os.makedirs(os.path.dirname(os.path.dirname(moved)), exist_ok=True)
    for folder in (os.path.dirname(moved), moved):  # harness/moved, each mode 700
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
    parent = os.open(moved, _DIR)
    try:
        leaf = os.path.basename(sub)
        for n in range(1, 1000):
            name = os.path.basename(base) + (f"-{n}" if n > 1 else "")
            into = _folders(parent, [name, *sub.split("/")[:-1]])
            if into is None:
                continue
            try:
                os.stat(leaf, dir_fd=into, follow_symlinks=False)
            except FileNotFoundError:
                return os.path.join(moved, name), into, leaf
            os.close(into)
    finally:
        os.close(parent)
    raise OSError(errno.EEXIST, f"no free folder in {moved}")


def _folders(parent: int, names: list[str]) -> int | None:
    """The folder ``names`` below ``parent``, made (mode 700) where missing, opened
    without following a link; None when something else stands on the way."""
    fd = os.dup(parent)
    for name in names:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=fd)
        try:
            nxt = os.open(name, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    return fd


def _copy(src: int, name: str, dst: int, new: str) -> None:
    """Copy ``name`` in ``src`` to ``new`` in ``dst``: a link as a link, a folder with
    what it holds; what is neither a file, a folder nor a link (a socket, a pipe) is
    left out."""
    st = os.stat(name, dir_fd=src, follow_symlinks=False)
    mode = stat.S_IMODE(st.st_mode) & 0o777
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=src), new, dir_fd=dst)
    elif stat.S_ISREG(st.st_mode):
        fin = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src)
        try:
            fout = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                           | os.O_CLOEXEC, mode, dir_fd=dst)
            try:
                while chunk := os.read(fin, 1 << 20):
                    os.write(fout, chunk)
            finally:
                os.close(fout)
        finally:
            os.close(fin)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(new, 0o700, dir_fd=dst)
        fin = os.open(name, _DIR, dir_fd=src)
        try:
            fout = os.open(new, _DIR, dir_fd=dst)
            try:
                for entry in os.listdir(fin):
                    _copy(fin, entry, fout, entry)
                os.fchmod(fout, mode)
            finally:
                os.close(fout)
        finally:
            os.close(fin)


def _remove(fd: int, name: str) -> None:
    """Remove ``name`` in the folder ``fd``, a folder with what it holds, no link
    followed."""
    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        import shutil

        shutil.rmtree(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)
