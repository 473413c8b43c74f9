"""Finding and killing what a run left behind; the watchdog that outlives the harness.

Every host run carries a marker in its environment, ``HARNESS_SANDBOX_RUN=<instance>.<n>``:
``<instance>`` names the harness process, ``<n>`` the run. Children inherit the
environment, so a process that left the run's process group (``setsid``, a double fork)
still carries the marker unless it replaced its environment.

Run as a program (``python -I reaper.py <instance> <parent pid>``) this module is the
watchdog: one per harness process, started on the first run. It reads one line per run
event on stdin:

    + <pgid>             a run started; its process group is <pgid>
    - <pgid> <marker>    the run ended; kill whatever still carries <marker> (or "-")
    c <manifest>         a session opened: what it made is listed in <manifest>
    u <manifest>         the session closed and cleaned up after itself

and when stdin reaches end of file (the harness died, however it died) it kills every
process group still running and every process carrying one of the instance's markers,
removes what each open session made (:func:`clean_session`), then exits. This file
imports only the standard library (and psutil where /proc is
missing) so the watchdog starts fast and runs outside the package.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Callable

MARKER_VAR = "HARNESS_SANDBOX_RUN"
_NEEDLE = MARKER_VAR.encode() + b"="

# How long the watchdog waits after a run ends before it sweeps, so that the runs
# ending close together share one scan of the process table.
SWEEP_DELAY = 0.05
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


def _killpg(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


class _Watchdog:
    """The state of the watchdog program."""

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
            _killpg(pgid)
        prefix = self.prefix
        kill_marked(lambda m: m.startswith(prefix), bound=2 * KILL_BOUND)
        # Groups once more: a member that replaced its environment was missed above.
        for pgid in self.groups:
            _killpg(pgid)
        # The box is gone with its parent: nothing can write to what the session made.
        for manifest in self.sessions:
            with contextlib.suppress(Exception):
                clean_session(manifest)


# -- what a session made ------------------------------------------------------------------
# A session makes files in the user's repository (a ``commondir`` of ".", empty files and
# folders over protected names) and a private temp folder. Its manifest, a JSON file in
# the per-user private root, lists them; whoever cleans up (the session's end, this
# watchdog, or the next session once the owner is gone) removes each only if it is still
# what was made, owned by this user, and reached without following a link.


def _open_parent(root: str, rel: str) -> int:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [p for p in rel.split("/")[:-1] if p]:
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _unmake(root: str, rel: str, kind: str, content: bytes) -> None:
    import stat as _stat

    fd = _open_parent(root, rel)
    name = rel.rsplit("/", 1)[-1]
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if st.st_uid != os.getuid():
            return
        if kind == "dir" and _stat.S_ISDIR(st.st_mode):
            os.rmdir(name, dir_fd=fd)  # only if empty
        elif kind == "file" and _stat.S_ISREG(st.st_mode) and st.st_size == len(content):
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                same = os.read(f, len(content) + 1) == content
            finally:
                os.close(f)
            if same:
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(b")", 1)[-1].split()[19].decode()


def live_made(folder: str, but: str = "") -> set[tuple[str, str]]:
    """(root, rel) of everything listed by the manifests in ``folder`` (but ``but``)
    whose owner still runs: another session of this user may use what one made."""
    import json

    out: set[tuple[str, str]] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if not name.endswith(".made") or path == but:
                continue
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                if data["start"] and start_time(int(data["pid"])) == data["start"]:
                    out.update((r, rel) for r, rel, *_ in data["made"])
    return out


def clean_session(manifest: str) -> None:
    """Remove what the session of ``manifest`` made and no other live session uses,
    then the manifest."""
    import json
    import shutil
    import stat as _stat

    with open(manifest, encoding="utf-8") as f:
        data = json.load(f)
    busy = live_made(os.path.dirname(manifest), manifest)
    for root, rel, kind, content in reversed(data.get("made", [])):
        if (root, rel) in busy:
            continue
        with contextlib.suppress(OSError):
            _unmake(root, rel, kind, bytes.fromhex(content))
    tmp = data.get("tmp", "")
    with contextlib.suppress(OSError):
        st = os.lstat(tmp)
        if _stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            shutil.rmtree(tmp)  # the fd-based version: it never follows a link
    with contextlib.suppress(OSError):
        os.unlink(manifest)


def main(argv: list[str]) -> int:
    instance, parent = argv[1], int(argv[2])
    # A terminal's ^C or hang-up must not end the watchdog before the harness.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    dog = _Watchdog(instance)
    poller = select.poll()
    poller.register(0, select.POLLIN)
    pending = b""
    alive = os.getppid() == parent
    while alive:
        wait = 0.25
        if dog.sweep_at is not None:
            wait = max(0.0, min(wait, dog.sweep_at - time.monotonic()))
        if poller.poll(int(wait * 1000)):
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
    # What was written before the harness died but not read yet (it may die while this
    # program is still starting): a session's manifest must not be missed.
    with contextlib.suppress(OSError):
        while poller.poll(0):
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            pending += chunk
    for line in pending.split(b"\n"):
        dog.handle(line)
    dog.last_rites()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
