"""A session's boxed runs go through its warm box by default; ``warm=False`` keeps the box
per run. Real bwrap, real sessions, as root and as a plain user."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers.launchers import STARTERS, launcher
from helpers.procs import eventually, fds_settle, left_after, proc_status, spares_made

from sandbox.errors import SandboxUnavailable
from sandbox.linux.warm.client import SPARE
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture(params=STARTERS, autouse=True)
def starter(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test with each of the warm box's starters (the compiled one, the Python one)."""
    with launcher(request.param):
        yield request.param


@pytest.fixture
def project() -> Iterator[Path]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-warms-")))
    (base / "p").mkdir()
    try:
        yield base / "p"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-300:]!r} err={r.stderr[-300:]!r}"


def _tree(session: Session) -> list[psutil.Process]:
    assert session.warm is not None and session.warm.proc is not None
    top = psutil.Process(session.warm.proc.pid)
    return [top, *top.children(recursive=True)]


def _live(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_box_session_runs_in_its_warm_box(project: Path, starter: str) -> None:
    with Session.open(str(project)) as s:
        assert s.warm is not None
        r = s.run(["sh", "-c", "echo $$; ls /proc | grep -c '^[0-9]'"], stdin=b"")
        # Its own PID namespace: PID 1 is the run's init, 2 the command (the compiled
        # starter's init holds the Unix-socket guard itself; the Python one's, in a
        # thread that is 2, makes the command 3).
        want = b"3" if starter == "warm-python" else b"2"
        assert r.ok and r.stdout.split()[0] == want, explain(r)
        assert r.plan is not None and r.plan.argv == ("sh", "-c", r.plan.argv[2])
        # Everything the session's box holds is in the session's control group.
        h = s.hardening
        if h is not None and h.box_group is not None:
            from sandbox.process import cgroup

            # A run being made ahead passes through a process that lives a moment (not
            # in the group's list yet while it is forked, nor once it has exited).
            deadline = time.monotonic() + 5
            while True:
                live = {p.pid for p in _tree(s) if _live(p)}
                outside = live - set(cgroup.members(h.box_group))
                if not outside or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            assert not {pid for pid in outside if psutil.pid_exists(pid)}, outside
        pids = {p.pid for p in _tree(s)}
    # The session's end ends the box.
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_warm_false_builds_a_box_per_run(project: Path) -> None:
    with Session.open(str(project), warm=False) as s:
        assert s.warm is None
        r = s.run(["true"])
        assert r.ok and r.plan is not None
        # bwrap itself, or (root's stand-in) nsenter, then bwrap
        assert "bwrap" in [os.path.basename(a) for a in r.plan.argv[:7]]


def test_a_host_run_in_a_warm_session_stays_on_the_host(project: Path) -> None:
    with Session.open(str(project)) as s:
        r = s.run(["/bin/sh", "-c", "echo $$"], boxed=False)
        assert r.ok and int(r.stdout) > 2, explain(r)


def test_many_threads_on_one_session(project: Path) -> None:
    with Session.open(str(project)) as s:
        s.run(["true"])
        assert s.warm is not None
        spares_made(s.warm)
        fds = len(os.listdir("/proc/self/fd"))
        out: dict[int, RunResult] = {}

        def one(i: int) -> None:
            out[i] = s.run(["sh", "-c", f"echo {i}; sleep 0.1 & setsid sleep 1031 &"])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(out[i].stdout == f"{i}\n".encode() for i in range(64))
        spares_made(s.warm)
        assert fds_settle(fds) <= fds
        assert left_after("1031") == []


def _caps(path: str) -> int:
    return int(proc_status(path)["CapEff"], 16)


def test_a_run_s_guard_alone_keeps_a_capability(project: Path, starter: str) -> None:
    # A session's runs answer their Unix-socket guard, which takes a caller's socket
    # with CAP_SYS_PTRACE: that capability alone, and only where the guard is (the
    # compiled starter's init; the Python one's guard thread). The command's process
    # made ahead has none.
    with Session.open(str(project)) as s:
        assert s.warm is not None
        spares_made(s.warm)
        box_starter = next(p for p in _tree(s) if p.name() != "bwrap"
                           and (q := p.parent()) is not None and q.name() == "bwrap")

        def as_made() -> None:
            inits = box_starter.children()
            assert len(inits) == SPARE
            for init in inits:
                tasks = sorted(_caps(f"/proc/{init.pid}/task/{t}/status")
                               for t in os.listdir(f"/proc/{init.pid}/task"))
                if starter == "warm":
                    assert tasks == [1 << 19]
                    (command,) = init.children()
                    # (root's stand-in: CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER)
                    assert _caps(f"/proc/{command.pid}/status") == \
                        (0b1011 if os.geteuid() == 0 else 0)
                else:
                    assert tasks == [0, 1 << 19]

        # A run is handed over once its PID 1 exists, and goes on being made meanwhile.
        eventually(as_made)


def test_a_dead_starter_fails_the_next_run_clearly(project: Path) -> None:
    with Session.open(str(project)) as s:
        starter = next(p for p in _tree(s) if p.name() != "bwrap"
                       and (q := p.parent()) is not None and q.name() == "bwrap")
        starter.kill()
        starter.wait(5)
        with pytest.raises(SandboxUnavailable, match="the warm box is gone"):
            s.run(["true"])
        # Host runs do not need the box.
        assert s.run(["/bin/true"], boxed=False).ok
