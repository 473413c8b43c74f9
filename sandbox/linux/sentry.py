"""git's names missing at the open, watched while a run goes: what a run makes there is
moved out at once, not only once the run is over.

The keeper (:mod:`.keeper`) moves out what a run made at a name git reads that did not
exist at the open (``commondir``, ``config.worktree``, a missing ``hooks`` folder) once
no run of the session is going. Until then it is there for host git: a harness that
polls ``git status`` while a boxed command runs would read a planted ``commondir`` and
run what the common folder it names configures. The sentry watches the folders that
hold those names (``inotify``, which sees what the box makes there: the folder is the
same inode in every mount namespace) and, while a run of the session goes, has each
name made there moved out as soon as it appears (:meth:`Keeper.check`): a plant is
there for the time the event takes to arrive and the move to be made, well under a
millisecond.

What still gets through: a host program that reads the name in that moment; and a run
that makes the name again and again keeps it there most of the time (the move takes
longer than the making). The session's warnings say each move, so a run that does it
over and over is seen. A name whose folder did not exist at the open is not watched
(the keeper still moves it after the run).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import threading
from collections.abc import Callable, Iterable

IN_MOVED_TO, IN_CREATE, IN_Q_OVERFLOW = 0x80, 0x100, 0x4000
IN_ONLYDIR, IN_DONT_FOLLOW = 0x01000000, 0x02000000
_EVENT = struct.Struct("iIII")


class Sentry:
    """The folders of ``paths`` watched by a thread of its own; ``seen`` is called with
    no argument (from that thread) after one of the names was made or renamed onto."""

    def __init__(self, paths: Iterable[str], seen: Callable[[], None]) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._seen = seen
        self._names: dict[int, set[str]] = {}
        self.fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if self.fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        folders: dict[str, set[str]] = {}
        for path in paths:
            folders.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
        for folder, names in folders.items():
            wd = libc.inotify_add_watch(self.fd, os.fsencode(folder),
                                        IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)
            if wd >= 0:
                self._names[int(wd)] = names
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._watch, name="harness-sandbox-sentry",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_r in ready:
                return
            if self._made():
                # A failed move here is the keeper's again once the run is over.
                with contextlib.suppress(Exception):
                    self._seen()

    def _made(self) -> bool:
        """Whether one of the names was made since the last look (the queue drained)."""
        made = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return made
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                name = os.fsdecode(data[at + _EVENT.size:at + _EVENT.size + size]
                                   .rstrip(b"\0"))
                at += _EVENT.size + size
                made = made or bool(mask & IN_Q_OVERFLOW) or name in self._names.get(wd, ())

    def close(self) -> None:
        """The thread ended, the descriptors closed."""
        if self.fd < 0:
            return
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self.fd, self._stop_r, self._stop_w):
            os.close(fd)
        self.fd = -1
