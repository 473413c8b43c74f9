"""The warm box at its process bound: a fork bomb in one run makes the runs started
meanwhile fail as a fork there fails (``failed_to_start``, "Resource temporarily
unavailable"), and the box stays whole for the runs after it. A real box, as root and
as a plain user."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.launchers import STARTERS, launcher

from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

# Bounded and self-stopping: forks until refused, holding the bound for 3 s.
BOMB = ("import os, time\n"
        "end = time.monotonic() + 3\n"
        "while time.monotonic() < end:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(max(0, end - time.monotonic()))\n"
        "            os._exit(0)\n"
        "    except BlockingIOError:\n"
        "        time.sleep(0.001)\n")


@pytest.fixture(params=STARTERS, autouse=True)
def starter(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test with each of the warm box's starters (the compiled one, the Python one)."""
    with launcher(request.param):
        yield request.param


def test_a_fork_bomb_at_the_bound_leaves_the_warm_box_whole(project: Path) -> None:
    with Session.open(str(project), SandboxSettings(processes=64)) as session:
        assert session.warm is not None
        ended: list[RunResult] = []
        bomb = threading.Thread(target=lambda: ended.append(
            session.run([sys.executable, "-c", BOMB], timeout=60)))
        bomb.start()
        time.sleep(0.5)
        meanwhile: set[tuple[str, str | None]] = set()
        while bomb.is_alive():
            r = session.run(["true"], timeout=30)
            meanwhile.add((r.outcome, r.error))
        bomb.join()
        after = session.run(["true"], timeout=30)
    assert after.ok, after
    # The bound holds for warm runs: while the bomb fills it, runs started meanwhile are
    # refused (wherever their fork fell: the starter's, the run's namespace's or its
    # command's), and never fail another way.
    assert ("failed_to_start", "Resource temporarily unavailable") in meanwhile, meanwhile
    assert meanwhile <= {("exited", None),
                         ("failed_to_start", "Resource temporarily unavailable")}, meanwhile
    assert ended and ended[0].outcome == "exited", ended
