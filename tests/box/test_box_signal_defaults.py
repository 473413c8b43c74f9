"""A boxed command starts with every signal at its default, as bwrap's exec leaves it:
the Python processes that start it in the box (the warm box's run init, the guard's
launcher) ignore SIGPIPE and SIGXFSZ themselves, and a spawn would pass that on."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SIGPIPE, SIGXFSZ = 13, 25


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])
def test_a_boxed_command_does_not_inherit_ignored_signals(project: Path, warm: bool) -> None:
    with Session.open(str(project), warm=warm) as session:
        r = session.run(["sh", "-c", "grep SigIgn /proc/self/status"], timeout=30)
        # A writer to a closed pipe dies of SIGPIPE (128+13), not of its own error.
        dies = session.run([sys.executable, "-c", "import os, signal, sys\n"
                            "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
                            "r, w = os.pipe(); os.close(r); os.write(w, b'x')"], timeout=30)
    assert r.ok, r
    mask = int(r.stdout.split()[1], 16)
    assert not mask & (1 << (SIGPIPE - 1)) and not mask & (1 << (SIGXFSZ - 1)), r.stdout
    assert dies.returncode == 128 + SIGPIPE, dies
