"""A session's box is one object per platform, chosen in one place, which owns what the
box holds and says which runs are box runs (sandbox/linux/linuxbox.py, macos.py)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.box.harden import Hardening
from sandbox.dispatch import choose
from sandbox.linux.linuxbox import LinuxBox
from sandbox.macos.macbox import MacBox
from sandbox.plan import LaunchPlan
from sandbox.policy import Policy
from sandbox.policy.limits import Limits
from sandbox.session import Session

linux = pytest.mark.skipif(sys.platform != "linux", reason="builds the Linux box")


def _policy(tmp_path: Path, platform: str, *, boxed: bool = True) -> Policy:
    return Policy.from_settings(str(tmp_path), None, boxed=boxed,
                                private_tmp=str(tmp_path), platform=platform)


def test_the_platform_chooses_the_box(tmp_path: Path) -> None:
    # Building the object starts nothing: macOS's box can be made (not opened) here.
    assert isinstance(choose(_policy(tmp_path, "linux")), LinuxBox)
    mac = choose(_policy(tmp_path, "darwin"))
    assert isinstance(mac, MacBox) and mac.warm is None and mac.hardening is None


def test_a_session_with_no_box_has_no_box_to_choose(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no box to choose"):
        choose(_policy(tmp_path, "linux", boxed=False))


def test_hardening_for_host_runs_refuses_a_box_run(tmp_path: Path) -> None:
    h = Hardening.open(Limits(), boxed=False, private_tmp=str(tmp_path))
    try:
        plan = LaunchPlan("bwrap", ("/bin/true",), {}, "/", "true")
        with pytest.raises(ValueError, match="hardening of a Linux box"):
            h.supervise(plan, lambda start, spawn: pytest.fail("ran"), box=True)
    finally:
        h.close()


@linux
@pytest.mark.parametrize("warm", [True, False])
def test_the_box_owns_the_sessions_hardening_and_gives_it_back(project: Path,
                                                               warm: bool) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with Session.open(str(project), warm=warm) as s:
        box = s._box
        assert isinstance(box, LinuxBox)
        assert s.hardening is box.hardening and box.hardening is not None
        assert box.hardening.filter is not None and box.hardening.guard is not None
        assert (s.warm is not None) == warm
        assert s.run(["true"]).returncode == 0
        assert box.backend.held  # the git layout's pins, bound by descriptor
        held = list(box.backend.held.values())
    assert box.hardening is None and box.warm is None and not box.backend.held
    for fd in held:
        with pytest.raises(OSError):
            os.fstat(fd)


def _nproc(s: Session, *, boxed: bool) -> str:
    """The soft process limit of a run, as its own /proc says."""
    r = s.run(["/bin/grep", "Max processes", "/proc/self/limits"], boxed=boxed)
    assert r.returncode == 0, r
    return r.stdout.decode().split()[2]


@linux
@pytest.mark.parametrize("warm", [True, False])
def test_only_the_box_runs_are_bounded_as_the_box(project: Path, warm: bool) -> None:
    """The box says its runs are box runs: they get the box's process bound; a host run
    of the same session does not (it is grouped, and keeps the host's limit)."""
    with Session.open(str(project), warm=warm) as s:
        bound = str(s.policy.limits.processes)
        assert _nproc(s, boxed=True) == bound
        here = _nproc(s, boxed=False)
        assert here != bound
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        assert here == ("unlimited" if soft == resource.RLIM_INFINITY else str(soft))
