"""What a backend produces and what the supervisor returns: plain data, no behaviour."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

Backend = Literal["bwrap", "seatbelt", "host"]
Outcome = Literal["exited", "signaled", "timed_out", "cancelled", "failed_to_start"]


class LaunchPlan(NamedTuple):
    """Everything needed to start one process, decided before anything starts.

    ``argv[0]`` is an absolute path. ``env`` is the complete environment (nothing is
    inherited). ``cwd`` is where the process starts. ``description`` names the command
    for people (used in errors).
    """

    backend: Backend
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    description: str
    # Paths the supervisor must keep open as inherited fds, if a backend needs any.
    pass_fds: tuple[int, ...] = ()


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

    @property
    def ok(self) -> bool:
        return self.outcome == "exited" and self.returncode == 0
