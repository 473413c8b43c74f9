"""Run any :class:`~sandbox.plan.LaunchPlan` to its end, and everything it started with it.

One spawn point for every backend. The process starts in a session of its own (so it
has no terminal and its process group is its pid), with pipes for stdin, stdout and
stderr and exactly the plan's environment, plus a run marker for host plans. Its stdin
is written (the envelope) and closed; stdout and stderr are read together, each capped.

The run ends when the main process exits, times out or is cancelled; it does not wait
for the pipes to close, since a leftover background process may hold them forever.
Then, on every path:

1. the process group is killed with SIGKILL (no SIGTERM grace: a hook that ignores
   SIGTERM must still be gone within a second);
2. the pipes are drained briefly: normally they are at end of file at once; if not,
   someone outside the group still holds them;
3. on timeout, cancel, or pipes still held, every process carrying the run's marker is
   found and killed (processes that left the group with ``setsid`` or a double fork);
4. the main process is reaped; the watchdog is told the run ended and sweeps the marker
   once more shortly after, off this thread (a leftover that closed its pipes and left
   the group);
5. with :func:`enable_subreaper`, children adopted from the run are killed and reaped.

The watchdog (:mod:`sandbox.reaper`) is one small process per harness process, started
on the first run. If the harness dies, even by SIGKILL, the watchdog sees its pipe close
and kills every running group and every process carrying one of the harness's markers.

A box plan (``backend == "bwrap"``) gets no marker and no scan: bubblewrap runs the
box in its own PID namespace and dies with its parent, so killing bubblewrap's group
ends the box.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import itertools
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping

from . import orphans
from .errors import SandboxError
from .plan import LaunchPlan, Outcome, RunResult
from .reaper import MARKER_VAR

__all__ = ["MARKER_VAR", "enable_subreaper", "run", "subreaper_enabled", "watchdog_pid"]

DEFAULT_OUTPUT_CAP = 1 << 20

# While cancel may be set, the wait wakes this often to look at it (an Event has no fd).
_CANCEL_SLICE = 0.02
# After the main process is gone and its group killed, how long to wait for the pipes to
# reach end of file. Killed group members release them within a few milliseconds; a
# pipe still open after that is held by a process outside the group.
_DRAIN_IDLE = 0.02
# A box's processes die with bubblewrap through its PID namespace, a little later.
_DRAIN_IDLE_BOX = 0.25
# However busy the pipes, output is collected for at most this long after the main
# process ends before stragglers are hunted down (a leftover may write forever), and
# for at most the second figure after that.
_DRAIN_MAX = 0.1
_DRAIN_MAX_BOX = 1.0
_DRAIN_AFTER_KILL = 0.25
_READ_SIZE = 1 << 16
# On platforms without pidfds the exit is noticed by polling, this often at most.
_EXIT_POLL_MAX = 0.02

_HAVE_PIDFD = hasattr(os, "pidfd_open")


# -- the watchdog -------------------------------------------------------------------------


class _Watchdog:
    """This process's watchdog: started once, told about each run with one write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._owner = -1
        self.instance = ""
        self._counter = itertools.count(1)

    def ensure(self) -> None:
        if self._proc is not None and self._owner == os.getpid():
            return
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                self._start()

    def _start(self) -> None:
        self.instance = os.urandom(8).hex()
        read_end, write_end = os.pipe()
        if sys.platform == "linux":
            # Room for thousands of run events while the watchdog is busy sweeping.
            try:
                import fcntl

                fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)
            except (OSError, AttributeError):
                pass
        from . import reaper

        # -I: no user site, no PYTHON* variables, no script folder on sys.path: the
        # watchdog imports only the standard library. -S skips site-packages where psutil
        # is not needed (Linux reads /proc).
        flags = ["-I", "-S"] if sys.platform == "linux" else ["-I"]
        argv = [sys.executable, *flags, reaper.__file__, self.instance, str(os.getpid())]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                cwd="/",
                env={"PATH": os.defpath},
                # Its own session: signals for the harness's terminal group miss it, and a
                # run's group kill can never reach it.
                start_new_session=True,
            )
        except OSError as err:
            os.close(write_end)
            raise SandboxError(f"the process watchdog could not start: {err.strerror}") from err
        finally:
            os.close(read_end)
        self._proc, self._fd, self._owner = proc, write_end, os.getpid()

    def marker(self) -> str:
        return f"{self.instance}.{next(self._counter)}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else -1

    def send(self, line: bytes) -> None:
        try:
            os.write(self._fd, line)
        except OSError:
            # The watchdog is gone (killed by someone): start another, which learns about
            # this run from here on.
            with self._lock:
                old = self._proc
                if old is not None:
                    old.wait()
                os.close(self._fd)
                self._start()
            os.write(self._fd, line)

    def forget_after_fork(self) -> None:
        # A forked child must not hold the pipe open: the watchdog would never see the
        # harness die. The child starts its own watchdog when it first runs something.
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._proc, self._fd, self._owner = None, -1, -1
        self._lock = threading.Lock()


_watchdog = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watchdog.forget_after_fork)


# -- subreaper ------------------------------------------------------------------------------

_subreaper = False
_spawn_lock = threading.Lock()
_running: set[int] = set()


def enable_subreaper() -> None:
    """Make this process the child subreaper of everything it starts (Linux).

    Orphans of a run are then reparented here instead of to init, so the supervisor can
    kill and reap them even when they left the run's group and replaced their
    environment. After each run it kills and reaps every child of this process that is
    in a session other than this process's, started after the run began, and is not a
    run's main process or the watchdog. Opt in only if this process does not itself
    start programs in new sessions while hooks run (they would match that rule).
    """
    global _subreaper
    if sys.platform != "linux":
        raise SandboxError("a child subreaper is only available on Linux")
    import prctl

    prctl.set_child_subreaper(1)
    _subreaper = True


def subreaper_enabled() -> bool:
    return _subreaper


def marker_instance() -> str:
    """The prefix of this process's run markers ("" before the first watched run)."""
    return _watchdog.instance if _watchdog.pid > 0 else ""


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, or None before the first run."""
    pid = _watchdog.pid
    return pid if pid > 0 else None


# -- one run --------------------------------------------------------------------------------


def _os_error_text(err: OSError) -> str:
    if err.errno:
        return os.strerror(err.errno)
    return str(err)


def _killpg(pgid: int) -> None:
    # ESRCH is the usual answer: the group is already empty.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


class _Streams:
    """stdin writer and stdout/stderr readers on one poll object, in the calling thread."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        data: bytes,
        cap: int,
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.poller = select.poll()
        self.cap = cap
        self.out_fd = proc.stdout.fileno()
        self.err_fd = proc.stderr.fileno()
        self.files = {self.out_fd: proc.stdout, self.err_fd: proc.stderr}
        self.bufs = {self.out_fd: bytearray(), self.err_fd: bytearray()}
        self.capped = {self.out_fd: False, self.err_fd: False}
        for fd in (self.out_fd, self.err_fd):
            self.poller.register(fd, select.POLLIN)
        self.stdin = proc.stdin
        self.in_fd = proc.stdin.fileno()
        self.in_registered = False
        self.data = memoryview(data)
        self.pos = 0
        if not data:
            self.close_stdin()
        else:
            # Non-blocking: a hook that never reads its stdin must not stall this writer.
            os.set_blocking(self.in_fd, False)
            self.write_stdin()
            if self.in_fd >= 0:
                self.poller.register(self.in_fd, select.POLLOUT)
                self.in_registered = True

    def close_stdin(self) -> None:
        """End of file for the hook; any input not yet written is dropped."""
        if self.in_fd < 0:
            return
        if self.in_registered:
            self.poller.unregister(self.in_fd)
            self.in_registered = False
        self.stdin.close()
        self.in_fd = -1

    def write_stdin(self) -> None:
        try:
            while self.pos < len(self.data):
                self.pos += os.write(self.in_fd, self.data[self.pos : self.pos + _READ_SIZE])
        except BlockingIOError:
            return  # the pipe is full; poll says when there is room
        except OSError:
            pass  # EPIPE: the hook closed its stdin, which is its right
        self.close_stdin()

    def read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, _READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            self.close_read(fd)
            return
        buf = self.bufs[fd]
        room = self.cap - len(buf)
        if len(chunk) > room:
            self.capped[fd] = True
            if room > 0:
                buf += chunk[:room]
        else:
            buf += chunk

    def close_read(self, fd: int) -> None:
        f = self.files.pop(fd, None)
        if f is not None:
            self.poller.unregister(fd)
            f.close()

    def handle(self, fd: int, event: int) -> None:
        if fd == self.in_fd:
            if event & select.POLLOUT:
                self.write_stdin()
            else:  # POLLERR: the hook closed its end of stdin
                self.close_stdin()
        elif fd in self.files:
            self.read(fd)

    def drain(self, idle: float, until: float) -> bool:
        """Read until both pipes end, nothing arrives for ``idle`` s, or ``until``.

        True when both pipes reached end of file.
        """
        while self.files:
            left = min(idle, until - time.monotonic())
            if left <= 0:
                break
            events = self.poller.poll(math.ceil(left * 1000))
            if not events:
                break
            for fd, event in events:
                self.handle(fd, event)
        return not self.files

    def close(self) -> None:
        self.close_stdin()
        for fd in list(self.files):
            self.close_read(fd)


def run(
    plan: LaunchPlan,
    *,
    stdin: bytes = b"",
    timeout: float | None = None,
    cancel: threading.Event | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_start: Callable[[int], object] | None = None,
) -> RunResult:
    """Run ``plan`` to its end and return how it ended.

    ``on_start`` is called with the process's pid just after it started (the session
    puts it in a control group there); an exception from it ends the run.

    ``stdin`` is written then closed. ``timeout`` (seconds) and ``cancel`` (set from
    any thread) end the run and everything it started. Output past ``output_cap``
    bytes per stream is drained and dropped. A program that cannot start gives the
    outcome ``failed_to_start`` with the OS error ("No such file or directory",
    "Permission denied", ...); nothing is raised for it.
    """
    started = time.monotonic()
    if cancel is not None and cancel.is_set():
        return RunResult("cancelled", elapsed=0.0, plan=plan)
    # The box needs no watchdog: bwrap dies with its parent (--die-with-parent) and its
    # PID namespace ends everything inside when it does. Sparing the watchdog keeps a
    # one-shot `harness-sandbox run` from paying for starting it.
    watched = plan.backend != "bwrap"
    marker: str | None = None
    env: Mapping[str, str] = plan.env
    if watched:
        _watchdog.ensure()
        marker = _watchdog.marker()
        env = {**plan.env, MARKER_VAR: marker}

    try:
        # Held so that no sweep of adopted children (here or a session's orphan
        # reaping) sees this child between its fork and its registration.
        with _spawn_lock, orphans.lock:
            proc = _spawn(plan, env)
            orphans.running.add(proc.pid)
            if _subreaper:
                _running.add(proc.pid)
    except OSError as err:
        return RunResult(
            "failed_to_start",
            error=_os_error_text(err),
            errno=err.errno,
            elapsed=time.monotonic() - started,
            plan=plan,
        )
    pid = proc.pid
    if watched:
        _watchdog.send(b"+ %d\n" % pid)
    try:
        if on_start is not None:
            try:
                on_start(pid)
            except BaseException:
                _killpg(pid)
                proc.wait()
                raise
        return _supervise(plan, proc, marker, stdin, timeout, cancel, output_cap, started)
    finally:
        if watched:
            _watchdog.send(b"- %d %s\n" % (pid, (marker or "-").encode()))
        orphans.running.discard(pid)
        if _subreaper:
            with _spawn_lock:
                _running.discard(pid)


def _spawn(plan: LaunchPlan, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    # No preexec_fn: it forces the slow fork path. A new session gives the process no
    # controlling terminal and a process group of its own to kill.
    return subprocess.Popen(
        plan.argv,
        bufsize=0,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=plan.cwd,
        close_fds=True,
        pass_fds=plan.pass_fds,
        start_new_session=True,
    )


def _supervise(
    plan: LaunchPlan,
    proc: subprocess.Popen[bytes],
    marker: str | None,
    data: bytes,
    timeout: float | None,
    cancel: threading.Event | None,
    cap: int,
    started: float,
) -> RunResult:
    pid = proc.pid
    pidfd = -1
    streams: _Streams | None = None
    rc: int | None = None
    try:
        start_ticks = _start_ticks(pid) if _subreaper else 0
        streams = _Streams(proc, data, cap)
        if _HAVE_PIDFD:
            # Readable when the main process exits: the wait below needs no polling.
            # A kernel without pidfds (before 5.3) falls back to polling the exit.
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(pid)
                streams.poller.register(pidfd, select.POLLIN)
        deadline = None if timeout is None else started + timeout
        outcome = _wait(proc, streams, pidfd, deadline, cancel)
        if pidfd >= 0:
            streams.poller.unregister(pidfd)

        # The main process is gone (or about to be): end its group before reaping it,
        # while the zombie still pins the group's id.
        _killpg(pid)
        streams.close_stdin()
        box = plan.backend == "bwrap"
        idle = _DRAIN_IDLE_BOX if box else _DRAIN_IDLE
        ended = streams.drain(idle, time.monotonic() + (_DRAIN_MAX_BOX if box else _DRAIN_MAX))
        if marker is not None and (outcome != "exited" or not ended):
            from .reaper import kill_marked

            kill_marked(marker.__eq__)
            streams.drain(idle, time.monotonic() + _DRAIN_AFTER_KILL)
        streams.close()
        rc = proc.wait()
        if _subreaper:
            _reap_adopted(start_ticks)
    except BaseException:
        # Whatever went wrong here (KeyboardInterrupt included), leave nothing behind.
        # Once the main process is reaped its pid may be reused: no group kill then.
        if rc is None:
            _killpg(pid)
        if marker is not None:
            from .reaper import kill_marked

            kill_marked(marker.__eq__)
        if streams is not None:
            streams.close()
        proc.wait()
        raise
    finally:
        if pidfd >= 0:
            os.close(pidfd)

    returncode: int | None = None
    signum: int | None = None
    if outcome == "exited":
        if rc < 0:
            outcome, signum = "signaled", -rc
        else:
            returncode = rc
    return RunResult(
        outcome,
        returncode=returncode,
        signal=signum,
        stdout=bytes(streams.bufs[streams.out_fd]),
        stderr=bytes(streams.bufs[streams.err_fd]),
        stdout_capped=streams.capped[streams.out_fd],
        stderr_capped=streams.capped[streams.err_fd],
        elapsed=time.monotonic() - started,
        plan=plan,
    )


def _wait(
    proc: subprocess.Popen[bytes],
    streams: _Streams,
    pidfd: int,
    deadline: float | None,
    cancel: threading.Event | None,
) -> Outcome:
    """Serve the pipes until the main process exits, the deadline passes or cancel is set.

    Returns "exited" for an exit (the caller tells exit from signal), else the outcome.
    """
    poll = streams.poller.poll
    exit_wait = 0.0005
    while True:
        wait: float | None = None
        if deadline is not None:
            wait = max(0.0, deadline - time.monotonic())
        if cancel is not None:
            wait = _CANCEL_SLICE if wait is None else min(wait, _CANCEL_SLICE)
        if pidfd < 0:
            # No pidfd (macOS): look at the process between short waits.
            exit_wait = min(exit_wait * 2, _EXIT_POLL_MAX)
            wait = exit_wait if wait is None else min(wait, exit_wait)
        events = poll(None if wait is None else math.ceil(wait * 1000))
        exited = False
        for fd, event in events:
            if fd == pidfd:
                exited = True
            else:
                streams.handle(fd, event)
        if exited or (pidfd < 0 and proc.poll() is not None):
            return "exited"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if deadline is not None and time.monotonic() >= deadline:
            return "timed_out"


# -- adopted children (subreaper) -------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ")".
    return raw[raw.rfind(b")") + 2 :].decode().split()


def _start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else 0


def _children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return out


def _reap_adopted(since_ticks: int) -> None:
    """Kill and reap children adopted from runs (see :func:`enable_subreaper`)."""
    own_session = os.getsid(0)
    with _spawn_lock:
        skip = set(_running)
    skip.add(_watchdog.pid)
    for _ in range(100):
        adopted = []
        for child in _children():
            if child in skip:
                continue
            fields = _stat_fields(child)
            # fields: [0] state, [1] ppid, [2] pgrp, [3] session, ... [19] starttime
            if fields is None or int(fields[1]) != os.getpid():
                continue
            if int(fields[3]) == own_session or int(fields[19]) < since_ticks:
                continue
            adopted.append(child)
        if not adopted:
            return
        for child in adopted:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
            try:
                os.waitpid(child, 0)
            except ChildProcessError:
                pass
            except OSError as err:
                if err.errno != errno_mod.ECHILD:
                    raise
