"""A box per run that was never built is the box's failure, told by mechanism: the
launcher in the box writes to a pipe of the host's just before it starts the command
(sandbox/linux/started.py), so a run that ends without it raises
:class:`SandboxUnavailable` (``run`` exits 125), whatever bwrap printed and whatever its
status; and a command that prints bwrap's own words keeps its own exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.launchers import PER_RUN, launcher
from helpers.paths import REPO

from sandbox.errors import SandboxUnavailable
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.isolation

BWRAP_WORDS = ("echo 'bwrap: No permissions to create new namespace' >&2; "
               "echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2; "
               "exit 1")


@PER_RUN
def test_a_box_that_bwrap_could_not_build_is_a_box_error_not_the_commands_exit(
        tmp_path: Path, box: str) -> None:
    project, writable = tmp_path / "proj", tmp_path / "w"
    project.mkdir()
    writable.mkdir()
    with launcher(box) as warm, \
            Session.open(str(project), SandboxSettings(writable=(str(writable),)),
                         warm=warm) as s:
        assert s.run(["true"]).returncode == 0
        writable.rmdir()  # bwrap cannot find the bind's source: its own exit 1
        with pytest.raises(SandboxUnavailable) as caught:
            s.run(["sh", "-c", "exit 0"])
    assert "Can't find source path" in str(caught.value), caught.value


@PER_RUN
def test_a_command_that_prints_bwraps_words_keeps_its_own_exit(project: Path, box: str
                                                               ) -> None:
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", BWRAP_WORDS])
    assert (r.outcome, r.returncode) == ("exited", 1), r
    assert r.stderr.startswith(b"bwrap: No permissions"), r


def test_run_gives_a_command_that_prints_bwraps_words_its_own_exit(project: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "launchers", "run", "--project", str(project),
                        "--", "sh", "-c", BWRAP_WORDS], capture_output=True, cwd=REPO,
                       timeout=60, check=False, env=dict(os.environ))
    assert r.returncode == 1, r
