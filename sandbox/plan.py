"""What a backend produces and what the supervisor returns: plain data, no behaviour."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from typing import Literal

from pathguard.records import NamedTuple

BackendName = Literal["bwrap", "seatbelt", "host", "landlock"]
Outcome = Literal["exited", "signaled", "timed_out", "cancelled", "failed_to_start"]


class LaunchPlan(NamedTuple):
    """Everything needed to start one process, decided before anything starts.

    ``argv[0]`` is an absolute path. ``env`` is the complete environment (nothing is
    inherited). ``cwd`` is where the process starts. ``description`` names the command
    for people (used in errors). ``backend`` names the backend that made the plan, for
    people and tests: the supervisor reads only the fields after it.

    ``watched``: the run carries a marker and is known to the watchdog, so that what it
    leaves behind is found and ended (a host run). A box needs none of that: bwrap dies
    with its parent and its PID namespace ends everything inside. ``drain_idle`` and
    ``drain_max`` (seconds): after the main process ended and its group was killed, how
    long the pipes may stay quiet, and how long they may be read at most, before what
    still holds them is hunted down.
    """

    backend: BackendName
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    description: str
    # Paths the supervisor must keep open as inherited fds, if a backend needs any.
    pass_fds: tuple[int, ...] = ()
    # Those of pass_fds that serve this run only (a filter's): closed after it. The rest
    # belong to the session (descriptors of the box's binds).
    run_fds: tuple[int, ...] = ()
    watched: bool = True
    # Killed group members release the pipes within a few milliseconds; a pipe still
    # open after that is held by a process outside the group.
    drain_idle: float = 0.02
    drain_max: float = 0.1
    # (uid, gid) the run's three pipes are given to before it starts: the box's user
    # when it is not the one starting it (root's stand-in), so that the command can
    # reopen its own streams (/dev/stdin, /proc/self/fd/1) as a plain user's can.
    stdio_owner: tuple[int, int] | None = None


class RunResult(NamedTuple):
    """How a supervised run ended.

    ``outcome`` tells apart: exited with ``returncode``; killed by ``signal``; timed out;
    cancelled; could not start (``error`` holds the OS error, e.g. "Permission denied").
    ``stdout_capped``/``stderr_capped`` say the stream passed the cap and the rest was
    drained and dropped.
    """

    outcome: Outcome
    returncode: int | None = None
    signal: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_capped: bool = False
    stderr_capped: bool = False
    error: str | None = None
    errno: int | None = None
    elapsed: float = 0.0
    plan: LaunchPlan | None = None
    # What the session's network proxy refused while the run was going: host, port and
    # why (``[sandbox] network`` as a list; runs at the same time share each other's).
    refused: tuple[tuple[str, int, str], ...] = ()
    # Why a failed command failed, when it was something the box refused (a read-only
    # path, a host cache, a hidden one, a refused address): one line (sandbox/box/hints.py).
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "exited" and self.returncode == 0

    @property
    def exit(self) -> int:
        """One status for every outcome, as ``harness-sandbox run`` exits and ``serve``
        reports: the command's own; 128+N for signal N; 124 timed out; 130 cancelled;
        127 a program not found, 126 one that cannot be started."""
        if self.outcome == "exited":
            return self.returncode if self.returncode is not None else 1
        if self.outcome == "signaled":
            return 128 + (self.signal or 0)
        if self.outcome == "failed_to_start":
            return 127 if self.errno == errno.ENOENT else 126
        return 124 if self.outcome == "timed_out" else 130
