"""Control groups on this machine, for real: killing a whole group, bounding processes.

As root every kind this machine has is made and used; as an unprivileged user (no
delegated cgroup here) making one fails with the reason, which is what doctor reports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from sandbox.process import cgroup, reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="control groups are Linux's")

PY = sys.executable
ROOT = os.geteuid() == 0

# A tree that hides: setsid, a double fork, not dumpable, no environment.
HIDER = """
import ctypes, os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
        os.execve("/bin/sleep", ["sleep", "300"], {})
    os._exit(0)
print(flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return not f.read().rsplit(b")", 1)[1].startswith(b" Z")
    except FileNotFoundError:
        return False


def _kill_test(make: Callable[[], cgroup.Group]) -> None:
    group = make()
    # As a session does: the hidden sleep is adopted here, and reaped once killed (this
    # machine's PID 1 does not reap).
    reaper.acquire()
    try:
        proc = subprocess.Popen([PY, "-c", HIDER], stdout=subprocess.PIPE)
        cgroup.adopt(group, proc.pid, stop=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        end = time.monotonic() + 5  # until the hidden sleep is there
        while len(cgroup.members(group)) < 2 and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.1)
        members = cgroup.members(group)
        assert len(members) == 2, members  # the main process and the hidden sleep
        killed = cgroup.kill(group)
        assert sorted(killed) == members
        proc.wait(5)
        assert not any(_alive(p) for p in members)
        assert cgroup.members(group) == []
    finally:
        cgroup.remove(group)
        reaper.release(lambda marker: False)
    assert not os.path.exists(group.dirs[0])


def test_a_v2_group_is_killed_whole_with_everything_that_hid() -> None:
    if not ROOT and cgroup.v2_base() is not None and not os.access(cgroup.v2_base() or "/",
                                                                  os.W_OK):
        with pytest.raises(cgroup.CgroupUnavailable):
            cgroup.killable()
        return
    _kill_test(cgroup.killable)


def test_a_v1_freezer_group_is_killed_whole_with_everything_that_hid() -> None:
    if cgroup.v1_base("freezer") is None:
        with pytest.raises(cgroup.CgroupUnavailable) as info:
            cgroup.frozen()
        assert "no cgroup v1 freezer" in str(info.value)
        return
    if not ROOT:
        with pytest.raises(cgroup.CgroupUnavailable) as info:
            cgroup.frozen()
        assert str(info.value).startswith("cannot make a group in ")
        assert str(info.value).endswith(": Permission denied")
        return
    _kill_test(cgroup.frozen)


FORKS = """
import os, time
pids = []
for _ in range(40):
    try:
        pid = os.fork()
        if pid == 0:
            time.sleep(2); os._exit(0)
        pids.append(pid)
    except BlockingIOError:
        break
print(len(pids), flush=True)
for pid in pids:
    os.kill(pid, 9); os.waitpid(pid, 0)
"""


def test_a_bounded_group_stops_forks_at_its_process_bound() -> None:
    try:
        group = cgroup.bounded(20, 256 << 20)
    except cgroup.CgroupUnavailable as err:
        assert not ROOT, err  # root here has the v1 pids and memory controllers
        return
    try:
        proc = subprocess.Popen([PY, "-c", FORKS], stdout=subprocess.PIPE)
        cgroup.adopt(group, proc.pid, stop=True)
        out, _ = proc.communicate(timeout=30)
        assert int(out) == 19  # 20 tasks: itself and 19 children
    finally:
        for pid in cgroup.members(group):
            os.kill(pid, 9)
        cgroup.remove(group)


def test_groups_a_killed_harness_left_are_removed_by_the_next_one() -> None:
    base = cgroup.v2_base()
    if base is None or not os.access(base, os.W_OK):
        with pytest.raises(cgroup.CgroupUnavailable):
            cgroup.killable()
        return
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = os.path.join(base, f"harness-run-{dead.pid}-1")
    os.mkdir(stale)
    try:
        # A fresh process: the clearing happens once per folder and process.
        code = ("from sandbox.process import cgroup\n"
                "g = cgroup.killable()\ncgroup.remove(g)\n")
        subprocess.run([PY, "-c", code], check=True)
        assert not os.path.exists(stale)
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)
