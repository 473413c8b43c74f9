"""A boxed session's runs, and what appeared on the host between them.

Every boxed run holds the lock of this user's runs shared (:mod:`sandbox.process.runs`).
When a run starts while none of the session's is going, and no run of any of the user's
sessions is going either, what appeared since in the names the session keeps (another
tool's config missing at the open, :mod:`sandbox.session.moveout`; git's names missing
at the open, :mod:`sandbox.linux.keeper`) is the host's own: the user's editor made
``.idea``, a host ``pre-commit install`` made ``.git/hooks``. It is no longer moved out
after a run: the box holds it as what was there at the open (read-only in the namespace
box from that run on, its mounts made again; put back after each run in the Landlock
box), the manifest no longer names it, and the session's warnings say so once.

While a run of another session goes, nothing is taken: what appeared may be that run's,
and is moved out after this session's next run like anything its own box made.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from sandbox.process.runs import Runs
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.box.base import Box
    from sandbox.session.moveout import MoveOut


class Turns:
    """The session's boxed runs: :meth:`start` before each, :meth:`end` after."""

    def __init__(self, box: Box, private_tmp: str, moves: MoveOut | None,
                 manifest: str | None) -> None:
        self.box = box
        self.moves = moves
        self.manifest = manifest
        self.runs = Runs(os.path.dirname(private_tmp))
        self._lock = threading.Lock()
        self._live = 0

    def start(self) -> tuple[int, list[str]]:
        """A run begins: the lock held shared (close the descriptor returned once the
        run and its put-back are over), and what to say of what was taken."""
        said: list[str] = []
        with self._lock:
            if self._live == 0:
                with self.runs.alone() as alone:
                    if alone:
                        said = self._take()
            self._live += 1
        try:
            return self.runs.run(), said
        except BaseException:
            self.end(-1)
            raise

    def closing(self) -> list[str]:
        """The session ends, its runs over: what appeared since the last is taken as
        above (else the end would move the host's own out as the box's)."""
        with self._lock:
            if self._live:
                return []
            with self.runs.alone() as alone:
                return self._take() if alone else []

    def end(self, held: int) -> None:
        """The run and its put-back are over."""
        with self._lock:
            self._live -= 1
        if held >= 0:
            os.close(held)

    def _take(self) -> list[str]:
        rows = self.moves.adopt() if self.moves is not None else ()
        names = self.box.appeared()
        taken = (*rows, *names)
        if not taken:
            return []
        self.box.adopt(taken)
        if self.manifest is not None:
            from sandbox.session.leftovers import held_now

            held_now(self.manifest, taken)
        return [f"{escape(p)} appeared on the host while no boxed run was going: taken as "
                "yours, and held from now on as what was there when the session opened"
                for p in taken]
