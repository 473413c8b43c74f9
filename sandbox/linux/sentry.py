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
import os
import select
import threading
from collections.abc import Callable, Iterable

from sandbox.linux.replaced import IN_CREATE, IN_MOVED_TO, IN_Q_OVERFLOW, events, watch


class Sentry:
    """The folders of ``paths`` watched by a thread of its own; ``seen`` is called with
    no argument (from that thread) after one of the names was made or renamed onto."""

    def __init__(self, paths: Iterable[str], seen: Callable[[], None]) -> None:
        self._seen = seen
        self.fd, self._names = watch(paths, IN_CREATE | IN_MOVED_TO)
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
        for wd, mask, name in events(self.fd):  # all of them: the queue is drained
            made = made or bool(mask & IN_Q_OVERFLOW) or name in self._names.get(wd, ("", ()))[1]
        return made

    def close(self) -> None:
        """The thread ended, the descriptors closed."""
        if self.fd < 0:
            return
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self.fd, self._stop_r, self._stop_w):
            os.close(fd)
        self.fd = -1
