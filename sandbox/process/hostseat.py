"""Host runs born in their own group: groups made ahead, each with a thread inside.

A host run gets a control group of its own, killed whole when the run ends
(:meth:`sandbox.box.harden.Hardening.supervise`). Made at the run's start, that costs the
run a group's creation and a move of the process into it (a move waits for an RCU grace
period: milliseconds) and, at its end, the group's removal. Under cgroup v1 a thread may
sit in another group than its siblings and a child is born in the groups of the thread
that forks it (:class:`sandbox.process.cgroup.Spawner`), so the session keeps a few
freezer groups ready, each with a spawner thread already joined: a host run is started
by one and is inside from its first instruction, and the used group is retired (its
thread ended, the folder removed) off the run's path.

cgroup v2 keeps a process's threads together, so where only v2 groups can be made (and
where no group can be made) every host run is grouped at its start as before.
"""

from __future__ import annotations

import contextlib
import threading

from sandbox.process import cgroup

# Seats kept ready: host hooks of one event run one after another, and runs at once
# beyond this fall back to a group made at their start.
READY = 2


class Seat:
    """One ready group and the spawner thread inside it."""

    def __init__(self) -> None:
        self.group = cgroup.frozen()
        self.spawn = cgroup.Spawner(self.group)

    def retire(self) -> None:
        """End the thread, then remove the group (once the thread has left it)."""
        self.spawn.stop()
        self.spawn.join()
        cgroup.remove(self.group)


class Seats:
    """The session's ready seats; :meth:`take` one per host run, :meth:`close` at the
    session's end. Everything slow happens on a worker thread."""

    def __init__(self) -> None:
        self._ready: list[Seat] = []
        self._lock = threading.Lock()
        self._jobs: list[Seat | None] = []
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._worker = threading.Thread(target=self._work, daemon=True,
                                        name="harness-sandbox-host-seats")
        self._worker.start()

    @classmethod
    def wanted(cls) -> bool:
        """Where seats can be had: a v1 freezer this process may make groups in (root,
        on a machine with cgroup v1; an empty v2 hierarchy beside it changes nothing,
        since a v2 group would still need a move per run)."""
        import os

        freezer = cgroup.v1_base("freezer")
        return freezer is not None and os.access(freezer, os.W_OK)

    def take(self) -> Seat | None:
        """A seat whose thread has joined its group, or None (none ready yet)."""
        with self._lock:
            for i, seat in enumerate(self._ready):
                if seat.spawn.joined.is_set():
                    self._ready.pop(i)
                    self._jobs.append(None)  # make one more
                    self._wake.notify()
                    return seat
        return None

    def give_back(self, seat: Seat) -> None:
        """A seat whose run has ended (its group emptied): retired off the caller's path."""
        with self._lock:
            self._jobs.append(seat)
            self._wake.notify()

    def _work(self) -> None:
        with self._lock:
            self._jobs += [None] * READY
        while True:
            with self._lock:
                while not self._jobs and not self._closed:
                    self._wake.wait()
                if self._closed and not self._jobs:
                    return
                job = self._jobs.pop(0)
                closed = self._closed
            if job is not None:
                with contextlib.suppress(OSError):
                    job.retire()
            elif not closed:
                try:
                    seat = Seat()
                except (OSError, cgroup.CgroupUnavailable):
                    continue
                with self._lock:
                    # Made while the session closed: retired with the rest.
                    (self._jobs if self._closed else self._ready).append(seat)

    def close(self) -> None:
        """Retire every ready seat and end the worker (waited for: the groups go)."""
        with self._lock:
            self._closed = True
            self._jobs += self._ready
            self._ready = []
            self._wake.notify()
        self._worker.join(timeout=5)
