"""The child subreaper (Linux, opt in): orphans of a run are reparented to the harness,
and after each run those that started in another session are killed and reaped."""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import signal
import sys
import threading

from sandbox.errors import SandboxError

_enabled = False
spawn_lock = threading.Lock()
running: set[int] = set()


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
    if sys.platform != "linux":
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


def _children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return out


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
    with spawn_lock:
        skip = set(running)
    skip.add(watchdog_pid)
    for _ in range(100):
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
                if err.errno != errno_mod.ECHILD:
                    raise
