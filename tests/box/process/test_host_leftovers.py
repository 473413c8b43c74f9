"""A host run's leftover that hides from every sweep still ends with the run.

The attempt: a host hook double-forks, the middle process calls ``setsid`` (out of the
run's process group), and the grandchild makes itself not dumpable (its environment,
and so the run marker, can no longer be read by this user) and closes the run's pipes.
Where a control group holds each host run (root here) the group ends it; where none
does (a plain user on cgroup v1, as on this machine) the session, as child subreaper,
adopts it and kills it (sandbox/process/reaper.py). Both with a box and without.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from helpers.procs import left_after

from sandbox.session import Session

LEAVE = r"""
import ctypes, os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
print("left one behind")
"""


@pytest.mark.parametrize("boxed_session", [True, False], ids=["box-session", "host-session"])
def test_a_hidden_double_forked_leftover_ends_with_its_run(
        tmp_path: Path, boxed_session: bool) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    word = f"hs-hidden-{uuid.uuid4().hex}"
    with Session.open(str(project), boxed=boxed_session) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", LEAVE, word], boxed=False)
        assert r.stdout == b"left one behind\n", r.stderr
        left = left_after(word, 2.0)
    try:
        assert left == []
    finally:
        import os
        import signal

        for pid in left:
            os.kill(pid, signal.SIGKILL)


def test_the_harness_own_children_are_left_alone(tmp_path: Path) -> None:
    """A program the harness started itself (dumpable, in the harness's session) is not
    a run's leftover: the session never touches it."""
    import subprocess

    project = tmp_path / "proj"
    project.mkdir()
    mine = subprocess.Popen([sys.executable, "-I", "-c", "import time; time.sleep(30)"])
    try:
        with Session.open(str(project), boxed=False) as s:
            s.run(["/bin/true"], boxed=False)
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()
