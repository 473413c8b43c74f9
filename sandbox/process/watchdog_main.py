"""The watchdog program: one per harness process, started on its first host run.

Started as ``python -I -S -c <bootstrap> <instance> <parent pid>`` (see
:mod:`sandbox.process.watchdog`), it reads one line per run event on stdin:

    + <pgid>             a run started; its process group is <pgid>
    - <pgid> <marker>    the run ended; kill whatever still carries <marker> (or "-")
    c <manifest>         a session opened: what it made is listed in <manifest>
    u <manifest>         the session closed and cleaned up after itself

and when stdin reaches end of file (the harness died, however it died) it kills every
process group still running and every process carrying one of the instance's markers,
removes what each open session made (:func:`sandbox.process.made.clean_session`), then
exits. It imports only the standard library, :mod:`sandbox.process.markers` and
:mod:`sandbox.process.made`, so it starts fast and runs outside the package's
dependencies.
"""

from __future__ import annotations

# _signal, not signal (whose enums import enum), and contextlib only once the harness
# has died: every command starts this interpreter, and on a machine of two cores what
# it imports is CPU time the command's own start waits for.
import _signal as signal  # type: ignore[import-not-found]
import os
import select
import sys
import time

from sandbox.process.made import clean_session
from sandbox.process.markers import KILL_BOUND, kill_marked, killpg

# How long the watchdog waits after a run ends before it sweeps, so that the runs
# ending close together share one scan of the process table.
SWEEP_DELAY = 0.05


class WatchdogState:
    """What the watchdog program knows: running groups, finished runs to sweep."""

    def __init__(self, instance: str) -> None:
        self.prefix = instance + "."
        self.groups: set[int] = set()
        self.finished: set[str] = set()
        self.sweep_at: float | None = None
        self.sessions: set[str] = set()

    def handle(self, line: bytes) -> None:
        parts = line.split()
        if len(parts) == 2 and parts[0] == b"+":
            self.groups.add(int(parts[1]))
        elif len(parts) == 3 and parts[0] == b"-":
            self.groups.discard(int(parts[1]))
            marker = parts[2].decode("ascii", "replace")
            if marker != "-":
                self.finished.add(marker)
                if self.sweep_at is None:
                    self.sweep_at = time.monotonic() + SWEEP_DELAY
        elif len(parts) == 2 and parts[0] in (b"c", b"u"):
            name = os.fsdecode(parts[1])
            if parts[0] == b"c":
                self.sessions.add(name)
            else:
                self.sessions.discard(name)

    def sweep(self) -> None:
        finished, self.finished, self.sweep_at = self.finished, set(), None
        kill_marked(finished.__contains__)

    def last_rites(self) -> None:
        for pgid in self.groups:
            killpg(pgid)
        prefix = self.prefix
        kill_marked(lambda m: m.startswith(prefix), bound=2 * KILL_BOUND)
        # Groups once more: a member that replaced its environment was missed above.
        for pgid in self.groups:
            killpg(pgid)
        # The boxes died with the harness: nothing can write to what a session made.
        import contextlib

        for manifest in self.sessions:
            with contextlib.suppress(Exception):
                clean_session(manifest)


def _wait(dog: WatchdogState) -> float:
    """How long to wait for the harness's next line: a quarter second, less when a sweep
    is due sooner."""
    if dog.sweep_at is None:
        return 0.25
    return max(0.0, min(0.25, dog.sweep_at - time.monotonic()))


def _unread(poller: select.poll) -> bytes:
    """What was written before the harness died but not read yet (it may die while this
    program is still starting): a session's manifest must not be missed."""
    import contextlib

    out = b""
    with contextlib.suppress(OSError):
        while poller.poll(0):
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            out += chunk
    return out


def main(argv: list[str]) -> int:
    instance, parent = argv[1], int(argv[2])
    # A terminal's ^C or hang-up must not end the watchdog before the harness.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    dog = WatchdogState(instance)
    poller = select.poll()
    poller.register(0, select.POLLIN)
    pending = b""
    alive = os.getppid() == parent
    while alive:
        if poller.poll(int(_wait(dog) * 1000)):
            chunk = os.read(0, 1 << 16)
            if not chunk:
                alive = False
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                dog.handle(line)
        # The pipe may be held open by a process the harness forked without exec;
        # being reparented is then the sign that the harness is gone.
        if os.getppid() != parent:
            alive = False
        if dog.sweep_at is not None and (not alive or time.monotonic() >= dog.sweep_at):
            dog.sweep()
    pending += _unread(poller)
    for line in pending.split(b"\n"):
        dog.handle(line)
    dog.last_rites()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
