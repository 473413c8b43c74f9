"""Host runs born in a group made ahead (sandbox/process/hostseat.py), for real.

As root on cgroup v1 (this machine) each host run starts inside a freezer group of its
own, made before the run by a thread that already sits in it: the command's
``/proc/self/cgroup`` names it from its first instruction, no two runs share one, what a
run leaves there dies with it, and no group outlives the session. As a plain user no
such group can be made here, and host runs go on without one (doctor says so); both are
what that user gets.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.procs import left_after

from sandbox.process import cgroup
from sandbox.process.hostseat import Seats
from sandbox.session import Session

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux cgroups")
ROOT = os.geteuid() == 0


def _run_group(out: bytes) -> str:
    """The harness group a process is in: its v1 freezer group, or its v2 one (a run
    that came when no seat was ready is grouped at its start, in v2 where it can be)."""
    for line in out.decode().splitlines():
        _, controllers, path = line.split(":", 2)
        if path.startswith("/harness-run") and controllers in ("freezer", ""):
            return path
    return ""


def _harness_groups() -> list[str]:
    base = cgroup.v1_base("freezer")
    return sorted(n for n in os.listdir(base) if n.startswith("harness-run")) if base else []


def _ready(s: Session, within: float = 5.0) -> None:
    """Until a seat's thread has joined its group (the kernel's move takes a moment)."""
    seats = s.hardening._seats if s.hardening is not None else None
    deadline = time.monotonic() + within
    while seats is not None and time.monotonic() < deadline and not any(
            seat.spawn.joined.is_set() for seat in seats._ready):
        time.sleep(0.01)


def test_each_host_run_is_born_in_a_group_of_its_own(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    before = _harness_groups()
    word = f"hs-seat-{uuid.uuid4().hex}"
    with Session.open(str(project)) as s:
        s.run(["/bin/true"], boxed=False)  # the first host run starts the seats ...
        _ready(s)  # ... which are made off its path
        runs = [s.run(["/bin/cat", "/proc/self/cgroup"], boxed=False) for _ in range(3)]
        left = s.run(["/bin/sh", "-c", f"setsid sleep 60 {word} & echo started"],
                     boxed=False)
        alive = left_after(word, 1.0)
    groups = [_run_group(r.stdout) for r in runs]
    assert left.stdout == b"started\n" and alive == []
    if ROOT and Seats.wanted():
        assert all(g.startswith("/harness-run") for g in groups), groups
        assert len(set(groups)) == 3
        # The first came when a seat was ready: born in its freezer group.
        assert f"freezer:{groups[0]}" in runs[0].stdout.decode()
    else:
        assert not any(g.startswith("/harness-run") for g in groups), groups
    deadline = time.monotonic() + 5
    while _harness_groups() != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _harness_groups() == before
