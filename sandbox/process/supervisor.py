"""Run any :class:`~sandbox.plan.LaunchPlan` to its end, and everything it started with it.

One spawn point for every backend. The process starts in a session of its own (so it
has no terminal and its process group is its pid), with pipes for stdin, stdout and
stderr and exactly the plan's environment, plus a run marker for watched plans. Its
stdin is written (the envelope) and closed; stdout and stderr are read together, each
capped (:mod:`sandbox.process.pipes`).

The run ends when the main process exits, times out or is cancelled; it does not wait
for the pipes to close, since a leftover background process may hold them forever.
Then, on every path:

1. the process group is killed with SIGKILL (no SIGTERM grace: a hook that ignores
   SIGTERM must still be gone within a second);
2. the pipes are drained briefly (the plan says how long): normally they are at end of
   file at once; if not, someone outside the group still holds them;
3. on timeout, cancel, or pipes still held, every process carrying the run's marker is
   found and killed (processes that left the group with ``setsid`` or a double fork;
   :mod:`sandbox.process.markers`);
4. the main process is reaped; the watchdog (:mod:`sandbox.process.watchdog`) is told
   the run ended and sweeps the marker once more shortly after, off this thread (a
   leftover that closed its pipes and left the group);
5. with :func:`enable_subreaper`, children adopted from the run are killed and reaped
   (:mod:`sandbox.process.reaper`).

The plan says whether the run is watched (marker, watchdog, scans) and how long its
pipes drain; the supervisor never asks which backend made it.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping

from sandbox.plan import LaunchPlan, Outcome, RunResult
from sandbox.process import reaper
from sandbox.process.markers import MARKER_VAR, kill_marked
from sandbox.process.pipes import Pipes, owned_pipes
from sandbox.process.pty import TTY_VAR, TtySize, open_pty, tty_of
from sandbox.process.reaper import enable_subreaper, subreaper_enabled
from sandbox.process.watchdog import watchdog, watchdog_pid

__all__ = ["MARKER_VAR", "enable_subreaper", "run", "subreaper_enabled", "watchdog_pid"]

DEFAULT_OUTPUT_CAP = 1 << 20

# While cancel may be set, the wait wakes this often to look at it (an Event has no fd).
_CANCEL_SLICE = 0.02
# After the stragglers are killed, how long their pipes may take to close.
_DRAIN_AFTER_KILL = 0.25
# On platforms without pidfds the exit is noticed by polling, this often at most.
_EXIT_POLL_MAX = 0.02

_HAVE_PIDFD = hasattr(os, "pidfd_open")


def poll_wait(deadline: float | None, cancel: threading.Event | None) -> float | None:
    """How long a wait for a run may last (seconds; None for no bound): until the
    deadline, and in slices while a cancel may come (an Event has no descriptor)."""
    wait: float | None = None
    if deadline is not None:
        wait = max(0.0, deadline - time.monotonic())
    if cancel is not None:
        wait = _CANCEL_SLICE if wait is None else min(wait, _CANCEL_SLICE)
    return wait


def _os_error_text(err: OSError) -> str:
    if err.errno:
        return os.strerror(err.errno)
    return str(err)


def _killpg(pgid: int) -> None:
    # ESRCH is the usual answer: the group is already empty.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def run(
    plan: LaunchPlan,
    *,
    stdin: bytes = b"",
    timeout: float | None = None,
    cancel: threading.Event | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_start: Callable[[int], object] | None = None,
    spawn: Callable[[Callable[[], subprocess.Popen[bytes]]], subprocess.Popen[bytes]]
    | None = None,
    pipes: type[Pipes] = Pipes,
) -> RunResult:
    """Run ``plan`` to its end and return how it ended.

    ``on_start`` is called with the process's pid just after it started (the session
    puts it in a control group there); an exception from it ends the run. ``spawn``,
    if given, starts the process (the session's spawner thread, which lives in the
    box's control group, so the process is born there).

    ``stdin`` is written then closed. ``timeout`` (seconds) and ``cancel`` (set from
    any thread) end the run and everything it started. Output past ``output_cap``
    bytes per stream is drained and dropped. A program that cannot start gives the
    outcome ``failed_to_start`` with the OS error ("No such file or directory",
    "Permission denied", ...); nothing is raised for it.

    ``pipes`` reads and writes the run's pipes: :class:`~sandbox.process.pipes.Pipes`
    keeps the output capped for the result; a subclass may pass it on as it comes
    (``harness-sandbox run`` does). An exception from it ends the run as a timeout does,
    and is raised. A reader made by :func:`sandbox.process.pty.with_tty` gives the
    process a terminal made for this run instead of pipes (:mod:`sandbox.process.pty`).
    """
    started = time.monotonic()
    if cancel is not None and cancel.is_set():
        return RunResult("cancelled", elapsed=0.0, plan=plan)
    watched = plan.watched
    marker, env = _marked_env(plan)
    try:
        proc = _spawn_registered(plan, env, spawn, tty_of(pipes))
    except OSError as err:
        return RunResult("failed_to_start", error=_os_error_text(err), errno=err.errno,
                         elapsed=time.monotonic() - started, plan=plan)
    pid = proc.pid
    if watched:
        watchdog.send(b"+ %d\n" % pid)
    try:
        if on_start is not None:
            _started(proc, on_start)
        return _supervise(plan, proc, marker=marker, timeout=timeout, cancel=cancel,
                          started=started,
                          open_pipes=lambda p: pipes(p, stdin, output_cap))
    finally:
        with reaper.lock:
            reaper.running.discard(pid)
        if watched:
            watchdog.send(b"- %d %s\n" % (pid, (marker or "-").encode()))


def _marked_env(plan: LaunchPlan) -> tuple[str | None, Mapping[str, str]]:
    """A watched plan's marker (the watchdog started for it) and its environment with
    the marker; an unwatched one's environment as it is."""
    if not plan.watched:
        return None, plan.env
    watchdog.ensure()
    marker = watchdog.marker()
    return marker, {**plan.env, MARKER_VAR: marker}


def _spawn_registered(
    plan: LaunchPlan,
    env: Mapping[str, str],
    spawn: Callable[[Callable[[], subprocess.Popen[bytes]]], subprocess.Popen[bytes]] | None,
    tty: TtySize | None = None,
) -> subprocess.Popen[bytes]:
    # The lock is held so that no sweep of adopted children (the opt-in subreaper's, or
    # a session's orphan reaping) sees this child between its fork and its registration.
    with reaper.lock:
        proc = (_spawn(plan, env, tty) if spawn is None
                else spawn(lambda: _spawn(plan, env, tty)))
        reaper.running.add(proc.pid)
    return proc


def _started(proc: subprocess.Popen[bytes], on_start: Callable[[int], object]) -> None:
    """``on_start`` for a process that just started; if it fails, the process goes."""
    try:
        on_start(proc.pid)
    except BaseException:
        _killpg(proc.pid)
        proc.wait()
        raise


def _spawn(plan: LaunchPlan, env: Mapping[str, str], tty: TtySize | None = None
           ) -> subprocess.Popen[bytes]:
    # No preexec_fn: it forces the slow fork path. A new session gives the process no
    # controlling terminal and a process group of its own to kill.
    if tty is not None:
        return _spawn_tty(plan, env, tty)
    if plan.stdio_owner is not None:
        return _spawn_owned(plan, env, plan.stdio_owner)
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


def _spawn_owned(plan: LaunchPlan, env: Mapping[str, str], owner: tuple[int, int]
                 ) -> subprocess.Popen[bytes]:
    """:func:`_spawn` with pipes given to ``owner`` before the process starts (a pipe
    is one inode for both its ends), so that its command can reopen them."""
    ends = owned_pipes(owner)
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = ends
    try:
        proc = subprocess.Popen(plan.argv, bufsize=0, stdin=in_r, stdout=out_w,
                                stderr=err_w, env=env, cwd=plan.cwd, close_fds=True,
                                pass_fds=plan.pass_fds, start_new_session=True)
    except BaseException:
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    proc.stdin = open(in_w, "wb", buffering=0)  # noqa: SIM115
    proc.stdout = open(out_r, "rb", buffering=0)  # noqa: SIM115
    proc.stderr = open(err_r, "rb", buffering=0)  # noqa: SIM115
    return proc


def _spawn_tty(plan: LaunchPlan, env: Mapping[str, str], tty: TtySize
               ) -> subprocess.Popen[bytes]:
    """:func:`_spawn` on a pty made for this run (:mod:`sandbox.process.pty`): its slave
    the process's stdin, stdout and stderr, its master the host's (as ``proc.stdout``).
    A box's launcher is told (:data:`TTY_VAR`) to make it its command's controlling
    terminal; the host keeps no end of the slave."""
    master, slave = open_pty(tty, plan.stdio_owner)
    if plan.backend == "bwrap":
        env = {**env, TTY_VAR: "1"}
    try:
        proc = subprocess.Popen(plan.argv, bufsize=0, stdin=slave, stdout=slave,
                                stderr=slave, env=env, cwd=plan.cwd, close_fds=True,
                                pass_fds=plan.pass_fds, start_new_session=True)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    proc.stdout = open(master, "rb", buffering=0)  # noqa: SIM115
    return proc


def _supervise(
    plan: LaunchPlan,
    proc: subprocess.Popen[bytes],
    *,
    marker: str | None,
    timeout: float | None,
    cancel: threading.Event | None,
    started: float,
    open_pipes: Callable[[subprocess.Popen[bytes]], Pipes],
) -> RunResult:
    pid = proc.pid
    pidfd = -1
    streams: Pipes | None = None
    rc: int | None = None
    try:
        start_ticks = reaper.start_ticks(pid) if subreaper_enabled() else 0
        streams = open_pipes(proc)
        pidfd = _watch_exit(pid, streams)
        deadline = None if timeout is None else started + timeout
        outcome = _wait(proc, streams, pidfd, deadline, cancel)
        if pidfd >= 0:
            streams.poller.unregister(pidfd)
        _end_tree(plan, pid, streams, marker, outcome)
        rc = proc.wait()
        if subreaper_enabled():
            reaper.reap_adopted(start_ticks, watchdog.pid)
    except BaseException:
        # Whatever went wrong here (KeyboardInterrupt included), leave nothing behind.
        # Once the main process is reaped its pid may be reused: no group kill then.
        if rc is None:
            _killpg(pid)
        if marker is not None:
            kill_marked(marker.__eq__)
        if streams is not None:
            streams.close()
        proc.wait()
        raise
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return _result(plan, outcome, rc, streams, started)


def _watch_exit(pid: int, streams: Pipes) -> int:
    """A pidfd for ``pid`` on the pipes' poll object, or -1.

    Readable when the main process exits: the wait needs no polling. A kernel without
    pidfds (before 5.3) falls back to polling the exit.
    """
    if not _HAVE_PIDFD:
        return -1
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return -1
    streams.poller.register(pidfd, select.POLLIN)
    return pidfd


def _end_tree(plan: LaunchPlan, pid: int, streams: Pipes, marker: str | None,
              outcome: Outcome) -> None:
    """The main process is gone (or about to be): end its group before reaping it, while
    the zombie still pins the group's id; drain the pipes as the plan says; hunt
    down what carries the marker when the run did not simply exit or the pipes are
    still held."""
    _killpg(pid)
    streams.close_stdin()
    idle = plan.drain_idle
    ended = streams.drain(idle, time.monotonic() + plan.drain_max)
    if marker is not None and (outcome != "exited" or not ended):
        kill_marked(marker.__eq__)
        streams.drain(idle, time.monotonic() + _DRAIN_AFTER_KILL)
    streams.close()


def _result(plan: LaunchPlan, outcome: Outcome, rc: int, streams: Pipes,
            started: float) -> RunResult:
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
    streams: Pipes,
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
        wait = poll_wait(deadline, cancel)
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




