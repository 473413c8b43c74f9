"""Finding a test's processes by a word in their command line, from the host's /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import psutil

from helpers.paths import FIXTURES, REPO


class Done(NamedTuple):
    """What a command left: its exit status, stdout and stderr as text."""

    code: int
    out: str
    err: str


def running_with(word: str) -> list[int]:
    """Pids of the processes with ``word`` as one of their arguments. A zombie has an
    empty command line, so an ended process that nobody reaped is not counted."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if word.encode() in argv:
            out.append(int(pid))
    return out


def left_after(word: str, seconds: float = 1.0) -> list[int]:
    """The processes with ``word`` still running once ``seconds`` have passed (returns
    as none is left)."""
    deadline = time.monotonic() + seconds
    while running_with(word) and time.monotonic() < deadline:
        time.sleep(0.02)
    return running_with(word)


def fds_settle(limit: int, seconds: float = 1.0) -> int:
    """This process's open descriptors, once at most ``limit`` or ``seconds`` have
    passed: another thread of the test process (a session's worker finishing) may hold
    one for a moment."""
    deadline = time.monotonic() + seconds
    while len(os.listdir("/proc/self/fd")) > limit and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(os.listdir("/proc/self/fd"))


def spares_made(box: object, seconds: float = 10.0) -> None:
    """Wait until a warm box (:class:`sandbox.linux.warm.client.WarmBox`) holds all its runs
    made ahead: each holds a descriptor here, so counts of descriptors are taken then."""
    from sandbox.linux.warm.client import SPARE, WarmBox

    assert isinstance(box, WarmBox)
    deadline = time.monotonic() + seconds
    while box.made_ahead < SPARE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert box.made_ahead == SPARE


def box_driver(project: Path, *argv: str) -> subprocess.Popen[bytes]:
    """A harness in a process of its own (``fixtures/box_driver.py``): a session on
    ``project`` running ``argv`` in its box, for a test to kill while the command runs."""
    return subprocess.Popen([sys.executable, str(FIXTURES / "box_driver.py"), str(project),
                             "--", *argv], cwd=str(REPO), stdout=subprocess.DEVNULL)


def eventually(check: Callable[[], None], seconds: float = 5.0) -> None:
    """``check`` until it passes, or what it raised once ``seconds`` have gone: for what
    a box finishes a moment after the host is told (a run made ahead is handed over
    once its PID 1 exists, and goes on making itself)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            check()
            return
        except (AssertionError, ValueError, OSError, psutil.Error):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def proc_status(path: str) -> dict[str, str]:
    """A ``/proc/PID/status`` (or a task's) as a dict of its fields."""
    with open(path) as f:
        return {k: v.strip() for k, _, v in (line.partition(":\t") for line in f) if v}
