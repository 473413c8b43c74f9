"""No zombie left by the box, whoever PID 1 is.

bubblewrap's init in the box's PID namespace outlives the outer bwrap by a moment: when
the outer one exits the init is orphaned, and where PID 1 does not reap (a container
started without an init) it stays a zombie for ever. While a session is open this
process is the child subreaper (``PR_SET_CHILD_SUBREAPER``), so those orphans come here,
and :func:`reap_orphans` reaps them, and only them: a child named ``bwrap`` that is not
the main process of a run in progress (those are waited for by their run).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_lock = threading.Lock()
_holders = 0
_was_set = False
# Main processes of box runs in progress: never reaped here.
running: set[int] = set()


def _prctl(option: int, value: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    arg = ctypes.c_int(0)
    if option == PR_GET_CHILD_SUBREAPER:
        rc = libc.prctl(option, ctypes.byref(arg), 0, 0, 0)
        return arg.value if rc == 0 else 0
    return int(libc.prctl(option, value, 0, 0, 0))


def acquire() -> None:
    """A session opened: be the child subreaper until the last one closes."""
    global _holders, _was_set
    with _lock:
        if _holders == 0:
            _was_set = _prctl(PR_GET_CHILD_SUBREAPER, 0) == 1
            if not _was_set:
                _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _holders += 1


def release() -> None:
    """A session closed: reap what its runs left (waiting a little for the last ones)
    and stop being the subreaper when no session is open (unless we were before)."""
    global _holders
    end = time.monotonic() + 1.0
    while orphans() and time.monotonic() < end:
        reap_orphans()
        time.sleep(0.005)
    with _lock:
        _holders -= 1
        if _holders == 0 and not _was_set:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


def _children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children", "rb") as f:
            out += [int(p) for p in f.read().split()]
    return out


def orphans() -> list[int]:
    """The box inits adopted by this process (alive or zombies)."""
    out = []
    for pid in _children():
        if pid in running:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.find(b"(") + 1 : raw.rfind(b")")]
        if name == b"bwrap":
            out.append(pid)
    return out


def reap_orphans() -> int:
    """Reap the adopted box inits that have exited; returns how many."""
    n = 0
    for pid in orphans():
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            n += done == pid
    return n
