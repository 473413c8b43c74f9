"""The boxed runs of this user's sessions, across sessions: a lock file in the per-user
private root, which no box reaches.

Each boxed run holds it shared while it goes. A session takes what appeared or changed
in the project while none of its runs was going as the host's own (the user's editor
made ``.idea``, a host ``pre-commit install`` made ``.git/hooks``, a host ``git config``
edited the config) only when it can hold the lock alone: while a run of another of the
user's sessions goes (a harness's sub-agents on one project), what changed may be that
run's, and taking it as the host's would hold a plant in place, or put it back once the
other session moved it out. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

NAME = "boxed-runs.lock"


class Runs:
    """The lock of the runs of the sessions whose private folders are in ``root``."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, NAME)

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600)

    def run(self) -> int:
        """A run begins: the lock held shared until the descriptor returned is closed."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextmanager
    def alone(self) -> Iterator[bool]:
        """Whether no run of any session is going (and none starts while inside)."""
        fd = self._open()
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)
