"""Protected names the host replaced while the session was open.

The box holds git's inputs read-only by mounts on their names (a bind, or the config's
link: :mod:`sandbox.git.configcopy`). A mount sits on a name, not on a file: when a
program on the host renames a new file over one (``git config`` on the host writes
``config.lock`` and renames it over ``.git/config``) or removes it, the kernel takes
the mounts on that name away in every mount namespace, the session's stage and warm box
among them. From then on the box would see, and could write, the project's own file.

:class:`Replaced` watches the folders that hold the protected names (``inotify``: a
rename onto a name, a removal, a creation) and says which names were touched since it
was last asked; the box (:class:`~sandbox.linux.linuxbox.LinuxBox`) then makes its
mounts again before its next run, and repairs what a run going on meanwhile could have
written (:func:`sandbox.git.configcopy.repair`). Nothing the box does in its own
namespace reaches these events: a rename over a mounted name fails there (EBUSY).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections.abc import Iterable, Iterator

IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW = 0x400, 0x800, 0x4000
IN_ONLYDIR, IN_DONT_FOLLOW = 0x01000000, 0x02000000
WATCHED = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")


def watch(paths: Iterable[str], mask: int) -> tuple[int, dict[int, tuple[str, set[str]]]]:
    """A non-blocking inotify descriptor watching, for ``mask``, the folder of each of
    ``paths`` (a link not followed); each watch's folder and the names wanted in it."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"inotify_init1: {os.strerror(err)}")
    folders: dict[str, set[str]] = {}
    for path in paths:
        folders.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
    names: dict[int, tuple[str, set[str]]] = {}
    for folder, wanted in folders.items():
        wd = libc.inotify_add_watch(fd, os.fsencode(folder),
                                    mask | IN_ONLYDIR | IN_DONT_FOLLOW)
        if wd >= 0:
            names[int(wd)] = (folder, wanted)
    return fd, names


def events(fd: int) -> Iterator[tuple[int, int, str]]:
    """(watch, mask, name) of each event queued on ``fd``, until none is left."""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        at = 0
        while at + _EVENT.size <= len(data):
            wd, mask, _, size = _EVENT.unpack_from(data, at)
            name = os.fsdecode(data[at + _EVENT.size:at + _EVENT.size + size].rstrip(b"\0"))
            at += _EVENT.size + size
            yield wd, mask, name


class Replaced:
    """The folders of ``paths``, watched for their names being replaced."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._touched: set[str] = set()
        self.fd, self._names = watch(paths, WATCHED)

    def touched(self) -> set[str]:
        """The protected paths whose names were replaced, removed or made since the last
        call (all of them, if the kernel's queue overflowed, or a folder itself went)."""
        with self._lock:
            self._read()
            out, self._touched = self._touched, set()
            return out

    def _read(self) -> None:
        for wd, mask, name in events(self.fd):
            self._note(wd, mask, name)

    def _note(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self._touched |= {os.path.join(f, n) for f, ns in self._names.values()
                              for n in ns}
            return
        folder, names = self._names.get(wd, ("", set()))
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            self._touched |= {os.path.join(folder, n) for n in names}
        elif name in names:
            self._touched.add(os.path.join(folder, name))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
