"""The session's one reaper: no zombie, and no adopted leftover, from a session's runs.

While a session is open this process is the child subreaper
(``PR_SET_CHILD_SUBREAPER``): an orphan of a run comes here rather than to PID 1. One
registry (:data:`running`, under :data:`lock` from before a run's spawn) names the main
processes of runs in progress, whose exit status belongs to their supervisor; no sweep
here ever takes one.

**A session's orphans** (:func:`acquire`, :func:`release`, :func:`reap_orphans`).
bubblewrap's init in the box's PID namespace outlives the outer bwrap by a moment: when
the outer one exits the init is orphaned, and where PID 1 does not reap (a container
started without an init) it stays a zombie for ever. Reaped here, and only what the
session's runs orphaned:

- a child named ``bwrap`` (a box's init);
- a child that carried one of this process's run markers while it lived (a host
  run's leftover, adopted here and then killed by its group or the marker sweep);
- a zombie child in a session other than this process's, started while a session was
  open: every run starts in a session of its own, so this is a run's descendant that
  died before or after it was adopted. (A program the harness itself starts in a new
  session while a session is open, and has not waited for when it ends, matches too:
  its exit status would then read as 0. Wait for such programs, or start them before.)

A live child adopted here, in a session other than this process's, started while a
session was open, whose environment cannot be read (it made itself not dumpable, so the
marker sweep cannot tell whose it is) is killed: a host run's leftover that left its
group with ``setsid`` and a double fork, where no control group holds host runs (a
plain user on cgroup v1). The same caveat as above holds for a not-dumpable program the
harness itself starts in a new session while a session is open (``ssh-agent`` does
that): start it before the session, or from a process of its own.

**The opt-in subreaper** (:func:`enable_subreaper`, :func:`reap_adopted`; Linux): for
a harness that runs hooks without a session. After each run every child of this
process in another session, started after the run began, is killed and reaped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import threading
import time
from collections.abc import Callable

from sandbox.errors import SandboxError
from sandbox.platform import LINUX

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_state = threading.Lock()
_holders = 0
_was_set = False
_since = 0  # clock ticks since boot when the first open session began
# Held from before a run's spawn until its main process is in ``running``; every sweep
# of children here holds it.
lock = threading.RLock()
running: set[int] = set()
_enabled = False  # the opt-in subreaper
# Children seen carrying one of our markers: reaped once they are zombies.
_marked: set[int] = set()
_unmarked: set[int] = set()


def _prctl(option: int, value: int) -> int:
    import ctypes

    from sandbox.libc import libc as opened

    libc = opened()
    arg = ctypes.c_int(0)
    if option == PR_GET_CHILD_SUBREAPER:
        rc = libc.prctl(option, ctypes.byref(arg), 0, 0, 0)
        return arg.value if rc == 0 else 0
    return int(libc.prctl(option, value, 0, 0, 0))


def acquire() -> None:
    """A session opened: be the child subreaper until the last one closes."""
    global _holders, _was_set, _since
    with _state:
        if _holders == 0:
            _since = _ticks_now()
            _was_set = _prctl(PR_GET_CHILD_SUBREAPER, 0) == 1
            if not _was_set:
                _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _holders += 1


def release(ours: Callable[[str], bool]) -> None:
    """A session closed: reap what its runs left (waiting up to a second for the last
    box inits) and stop being the subreaper when no session is open (unless we were)."""
    global _holders
    end = time.monotonic() + 1.0
    while (waiting := _reap(ours)) and time.monotonic() < end:
        _wait_any(waiting, 0.005)
    with _state:
        _holders -= 1
        # Given back only if nobody had it: not the opt-in subreaper, not the caller.
        if _holders == 0 and not _was_set and not subreaper_enabled():
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


def _ticks_now() -> int:
    with open("/proc/uptime", encoding="ascii") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children", "rb") as f:
            out += [int(p) for p in f.read().split()]
    return out


def _marker(pid: int) -> str | None:
    """The run marker in ``pid``'s environment, "" for none, None when unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    if not env:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"HARNESS_SANDBOX_RUN="):
            return item[len(b"HARNESS_SANDBOX_RUN="):].decode("ascii", "replace")
    return ""


PF_EXITING = 0x4  # in /proc/PID/stat's flags: the process is on its way out


def _dying(pid: int, flags: int) -> bool:
    """Exiting, or with SIGKILL pending: a zombie in a moment."""
    if flags & PF_EXITING:
        return True
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & 0x100:
            return True
    return False


def _classify(pid: int, ours: Callable[[str], bool], own_session: int) -> str | None:
    """"reap" (an orphan of the runs, exited), "wait" (one still alive or dying) or
    None (not ours to reap)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    name = raw[raw.find(b"(") + 1 : raw.rfind(b")")]
    # [0] state, [1] ppid, [2] pgrp, [3] session, ... [6] flags, ... [19] start time
    fields = raw[raw.rfind(b")") + 2 :].split()
    zombie = fields[0] == b"Z"
    of_a_run = int(fields[3]) != own_session and int(fields[19]) >= _since
    if not zombie and pid not in _marked and pid not in _unmarked:
        # A live process's environment as it started does not change: read once (an
        # empty read, of a process on its way out, decides nothing).
        marker = _marker(pid)
        if marker is not None and ours(marker):
            _marked.add(pid)
        elif marker is not None:
            _unmarked.add(pid)
    if name == b"bwrap" or pid in _marked or (of_a_run and zombie):
        return "reap" if zombie else "wait"
    if of_a_run and pid not in _unmarked and _marker(pid) is None and not _dying(
            pid, int(fields[6])):
        # Adopted here from a run, in a session of its own, and hiding its environment
        # (not dumpable): the marker sweep cannot see it, so it goes now.
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        return "wait"
    if of_a_run and _dying(pid, int(fields[6])):
        return "wait"  # killed a moment ago: a zombie of ours very soon
    return None


def reap_orphans(ours: Callable[[str], bool]) -> int:
    """Reap what the session's runs orphaned here and has exited; ``ours`` tells this
    process's run markers. Returns how many such children are still alive or dying."""
    return len(_reap(ours))


def _reap(ours: Callable[[str], bool]) -> list[int]:
    """:func:`reap_orphans`, giving the pids still alive or dying."""
    alive: list[int] = []
    own_session = os.getsid(0)
    with lock:
        children = [c for c in _children() if c not in running]
        _marked.intersection_update(children)
        _unmarked.intersection_update(children)
        for pid in children:
            what = _classify(pid, ours, own_session)
            if what == "wait":
                alive.append(pid)
            elif what == "reap":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                _marked.discard(pid)
    return alive


def _wait_any(pids: list[int], most: float) -> None:
    """Wait until one of ``pids`` has exited, or ``most`` seconds: a box's init ends a
    moment after its bwrap, and a fixed sleep would make every session's end wait the
    whole of it."""
    fds: list[int] = []
    try:
        try:
            for pid in pids:
                fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            return  # one is gone already: look again now
        except (OSError, AttributeError):  # no pidfd (Linux before 5.3), no descriptor
            time.sleep(most)
            return
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.poll(most * 1000)
    finally:
        for fd in fds:
            os.close(fd)


# -- the opt-in subreaper -----------------------------------------------------------------


def enable_subreaper() -> None:
    """Make this process the child subreaper of everything it starts (Linux).

    Orphans of a run are then reparented here instead of to init, so the supervisor can
    kill and reap them even when they left the run's group and replaced their
    environment. After each run it kills and reaps every child of this process that is
    in a session other than this process's, started after the run began, and is not a
    run's main process or the watchdog. Opt in only if this process does not itself
    start programs in new sessions while hooks run (they would match that rule).
    """
    global _enabled
    if not LINUX:
        raise SandboxError("a child subreaper is only available on Linux")
    import prctl

    prctl.set_child_subreaper(1)
    _enabled = True


def subreaper_enabled() -> bool:
    return _enabled


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ")".
    return raw[raw.rfind(b")") + 2 :].decode().split()


def start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else 0


def _adopted(child: int, own_session: int, since_ticks: int) -> bool:
    """Whether ``child`` is a child of ours from a run: started in another session than
    ours (so not one we started), no sooner than ``since_ticks``."""
    fields = _stat_fields(child)
    # fields: [0] state, [1] ppid, [2] pgrp, [3] session, ... [19] starttime
    if fields is None or int(fields[1]) != os.getpid():
        return False
    return int(fields[3]) != own_session and int(fields[19]) >= since_ticks


def reap_adopted(since_ticks: int, watchdog_pid: int) -> None:
    """Kill and reap children adopted from runs (see :func:`enable_subreaper`)."""
    own_session = os.getsid(0)
    for _ in range(100):
        with lock:
            skip = {*running, watchdog_pid}
            adopted = [child for child in _children()
                       if child not in skip and _adopted(child, own_session, since_ticks)]
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
                    if err.errno != errno.ECHILD:
                        raise
