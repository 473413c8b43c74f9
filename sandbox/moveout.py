"""Other tools' project configs the box made, moved out of the project.

A row of :mod:`sandbox.toolconfigs` missing at the session's open has no cover (a bind
needs a name that exists, and a name made for it would be a folder nobody made in the
user's project), so the box can make it. After each boxed run, once no other run is
going (the box's processes of that run have all ended), and again at the session's end
once the box is closed, each such row that exists is moved out of the project into the
user's data folder (``$XDG_DATA_HOME/harness/moved``, else
``~/.local/share/harness/moved``), in a folder of the session's own named by its start
time and its private folder's name. The session's warnings say, per row, which tool
would have run it, where it is now, and the one command that puts it back.

Every step is taken relative to a folder opened without following a link: a row that
is a link is moved as the link itself, and a link the box put on the way to a nested
row (``.kiro`` for ``.kiro/settings/mcp.json``) is moved instead of followed. On
another file system the data folder gets a copy made the same way (links as links),
and then the row is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import stat
import threading
import time
from collections.abc import Mapping

from sandbox.text import escape
from sandbox.toolconfigs import ToolConfig, guarded, on_the_way

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def data_folder(env: Mapping[str, str]) -> str:
    """Where what the box made is kept: ``$XDG_DATA_HOME/harness/moved``, else
    ``~/.local/share/harness/moved`` (a relative XDG_DATA_HOME is ignored, as for the
    trust store)."""
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        home = env.get("HOME") or os.path.expanduser("~")
        data_home = os.path.join(home, ".local", "share")
    return os.path.join(data_home, "harness", "moved")


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


class MoveOut:
    """The rows missing at the open, and moving out what is there after a run."""

    def __init__(self, project: str, allowed: tuple[str, ...], env: Mapping[str, str],
                 session: str) -> None:
        self.project = project
        self.rows = tuple(t for t in guarded(allowed)
                          if not os.path.lexists(os.path.join(project, t.name)))
        # A link on the way to a missing row that was there at the open is the user's:
        # never followed, never moved.
        self.links = {q: text for t in self.rows for q in on_the_way(t.name)
                      if (text := _readlink(os.path.join(project, q))) is not None}
        self.base = os.path.join(data_folder(env),
                                 time.strftime("%Y%m%d-%H%M%S-") + session)
        self._lock = threading.Lock()
        self._live = 0

    def run_starts(self) -> None:
        """A boxed run begins (it waits while a move is under way)."""
        with self._lock:
            self._live += 1

    def run_ended(self) -> list[str]:
        """A boxed run ended: when it was the last one going, what the box made is moved
        out; what to say."""
        with self._lock:
            self._live -= 1
            return self._sweep() if self._live == 0 else []

    def end(self) -> list[str]:
        """The session's end, its box closed: the last move; what to say."""
        with self._lock:
            return self._sweep()

    def _sweep(self) -> list[str]:
        if not self.rows:
            return []
        try:
            top = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            return [line for row in self.rows if (line := self._one(top, row))]
        finally:
            os.close(top)

    def _one(self, top: int, row: ToolConfig) -> str:
        """Move ``row`` out if it is there, walking to it without following a link."""
        parts = row.name.split("/")
        fd, opened = top, []
        try:
            for i, part in enumerate(parts):
                sub = "/".join(parts[:i + 1])
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    return ""
                except OSError as err:
                    return self._unmoved(sub, row, err)
                last = i == len(parts) - 1
                if stat.S_ISLNK(st.st_mode) and not last:
                    if self.links.get(sub) == _readlink(os.path.join(self.project, sub)):
                        return self._behind(sub, row)
                    return self._move(fd, part, sub, row)
                if last:
                    return self._move(fd, part, sub, row)
                if not stat.S_ISDIR(st.st_mode):
                    return ""  # a file on the way: the tool reads nothing there
                try:
                    fd = os.open(part, _DIR, dir_fd=fd)
                except OSError as err:
                    return self._unmoved(sub, row, err)
                opened.append(fd)
            return ""
        finally:
            for f in opened:
                os.close(f)

    def _move(self, fd: int, name: str, sub: str, row: ToolConfig) -> str:
        """Move ``name`` in the folder ``fd`` (``sub`` in the project) out; what to say."""
        text = _readlink(os.path.join(self.project, sub))
        try:
            where, into, fresh = self._place(sub)
            try:
                try:
                    os.rename(name, fresh, src_dir_fd=fd, dst_dir_fd=into)
                except OSError as err:
                    if err.errno != errno.EXDEV:
                        raise
                    _copy(fd, name, into, fresh)
                    _remove(fd, name)
            finally:
                os.close(into)
        except OSError as err:
            return self._unmoved(sub, row, err)
        src = os.path.join(self.project, sub)
        dest = os.path.join(where, os.path.dirname(sub), fresh)
        what = f" (a link to {escape(text)})" if text is not None else ""
        via = f" on the way to {row.name}" if sub != row.name else ""
        return (f"the box made {escape(src)}{what}{via}, read by {row.tool} ({row.why}); "
                f"it was moved out of the project to {escape(dest)}; to put it back once "
                f"you have checked it: {escape(put_back(dest, src))}")

    def _place(self, sub: str) -> tuple[str, int, str]:
        """The session's folder in the data folder, an open descriptor of the folder
        ``sub``'s parent has in it, and ``sub``'s name there. When something is already
        there (a second run made the row again), the next free folder: ``BASE-2``..."""
        moved = os.path.dirname(self.base)
        os.makedirs(os.path.dirname(os.path.dirname(moved)), exist_ok=True)
        for folder in (os.path.dirname(moved), moved):  # harness/moved, each mode 700
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
        parent = os.open(moved, _DIR)
        try:
            for n in range(1, 1000):
                name = os.path.basename(self.base) + (f"-{n}" if n > 1 else "")
                into = _folders(parent, [name, *sub.split("/")[:-1]])
                if into is None:
                    continue
                leaf = os.path.basename(sub)
                try:
                    os.stat(leaf, dir_fd=into, follow_symlinks=False)
                except FileNotFoundError:
                    return os.path.join(os.path.dirname(self.base), name), into, leaf
                os.close(into)
        finally:
            os.close(parent)
        raise OSError(errno.EEXIST, "no free folder in " + os.path.dirname(self.base))

    def _behind(self, sub: str, row: ToolConfig) -> str:
        path = os.path.join(self.project, row.name)
        if not os.path.lexists(path):
            return ""
        return (f"the box made {escape(path)}, read by {row.tool} ({row.why}), through "
                f"{escape(os.path.join(self.project, sub))}, a link that was there at the "
                "start: it is not moved (a link is not followed); check it before that "
                "tool opens the project")

    def _unmoved(self, sub: str, row: ToolConfig, err: OSError) -> str:
        return (f"the box made {escape(os.path.join(self.project, sub))}, read by "
                f"{row.tool} ({row.why}), and it could not be moved out of the project "
                f"({escape(err.strerror or str(err))}); check it before that tool opens "
                "the project")


def put_back(dest: str, src: str) -> str:
    """The one command that puts what was moved to ``dest`` back at ``src``: never over
    what is there now, never into a folder that is there now."""
    return f"mv -nT -- {shlex.quote(dest)} {shlex.quote(src)}"


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
