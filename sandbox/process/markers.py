"""Run markers: finding and killing what a run left behind by the mark it carries.

Every host run carries a marker in its environment, ``HARNESS_SANDBOX_RUN=<instance>.<n>``:
``<instance>`` names the harness process, ``<n>`` the run. Children inherit the
environment, so a process that left the run's process group (``setsid``, a double fork)
still carries the marker unless it replaced its environment.

This module imports only the standard library (and psutil where /proc is missing): the
watchdog program (:mod:`sandbox.process.watchdog_main`) imports it with nothing else on
its path.
"""

from __future__ import annotations

# _signal, not signal (whose enums import enum): the watchdog program imports this.
import _signal as signal  # type: ignore[import-not-found]
import os
import time

# The type checker's names only: typing and collections cost the watchdog's start more
# than all the rest it imports.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MARKER_VAR = "HARNESS_SANDBOX_RUN"
_NEEDLE = MARKER_VAR.encode() + b"="

# How long a kill loop keeps looking for stragglers (a process forking while we kill).
KILL_BOUND = 1.0

_HAVE_PROC = os.path.isdir("/proc/self/task")


def _marker_from_environ(data: bytes) -> str | None:
    if data.startswith(_NEEDLE):
        start = len(_NEEDLE)
    else:
        at = data.find(b"\0" + _NEEDLE)
        if at < 0:
            return None
        start = at + 1 + len(_NEEDLE)
    end = data.find(b"\0", start)
    return data[start : end if end >= 0 else len(data)].decode("ascii", "replace")


def _proc_marker(pid: int) -> str | None:
    """The marker in a process's environment as it started; None if none or unreadable.

    A zombie's environment reads empty, so a process that has died no longer matches.
    """
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _marker_from_environ(b"".join(chunks))


def _kill_pid_if(pid: int, match: Callable[[str], bool]) -> bool:
    """SIGKILL ``pid`` if it still carries a matching marker; True when a signal went."""
    # A pidfd pins the process: if the pid were reused between the scan and the kill,
    # the signal would fail instead of reaching a stranger. Without pidfds (Linux before
    # 5.3) the marker is read again just before the kill, which leaves a tiny window.
    pidfd = -1
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False
    try:
        marker = _proc_marker(pid)
        if marker is None or not match(marker):
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def kill_marked(match: Callable[[str], bool], *, bound: float = KILL_BOUND) -> int:
    """SIGKILL every process whose marker satisfies ``match``, until a scan finds none.

    Scans repeat because a process may fork between one scan and its kill. Gives up
    after ``bound`` seconds. Returns how many signals were sent.
    """
    own = os.getpid()
    end = time.monotonic() + bound
    sent = 0
    while True:
        found = 0
        if _HAVE_PROC:
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                pid = int(name)
                if pid == own:
                    continue
                marker = _proc_marker(pid)
                if marker is not None and match(marker):
                    found += 1
                    sent += _kill_pid_if(pid, match)
        else:
            found, killed = _kill_marked_psutil(match, own)
            sent += killed
        if not found or time.monotonic() >= end:
            return sent
        time.sleep(0.005)


def _kill_marked_psutil(match: Callable[[str], bool], own: int) -> tuple[int, int]:
    import psutil

    found = killed = 0
    for proc in psutil.process_iter():
        if proc.pid == own:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            marker = proc.environ().get(MARKER_VAR)
        except (psutil.Error, OSError):
            continue
        if marker is not None and match(marker):
            found += 1
            try:
                proc.kill()  # psutil checks the pid was not reused
                killed += 1
            except psutil.Error:
                pass
    return found, killed


def killpg(pgid: int) -> None:
    """SIGKILL process group ``pgid``; ESRCH (already empty) is the usual answer."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return
