"""Shared fixtures. ``tests/`` is on ``sys.path`` (pytest puts a conftest's folder
there), so the helpers import as ``helpers.*``.

Tests that start the real box are marked ``isolation`` (``-m isolation`` runs them,
``-m "not isolation"`` the rest).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hook_programs import install_hooks
from hypothesis import settings

# Property tests run with a fixed seed and their own bounded example counts, so a run in
# CI is repeatable and the suite's time stays known. HYPOTHESIS_PROFILE=explore looks
# further, with fresh random examples, when hunting for new cases by hand.
settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder."""
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp, the project and every hidden folder, where a boxed hook's
    program may live (the box's /tmp is the agent's)."""
    d = Path(tempfile.mkdtemp(prefix="hs-outside-", dir="/var/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        # Opened first: an overlay's work folder (sandbox/policy/layers.py) is mode 000
        # and may hold a whiteout, and go's module cache folders are read-only; neither
        # can be listed or emptied as they are, and all above them would stay.
        subprocess.run(["chmod", "-R", "u+rwx", "--", str(d)], check=False,
                       capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def programs() -> Iterator[Path]:
    """The example and fixture hook programs, installed where hooks may live."""
    yield from install_hooks()
