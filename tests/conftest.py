"""Shared fixtures. ``tests/`` is on ``sys.path`` (pytest puts a conftest's folder
there), so the helpers import as ``helpers.*``.

Tests that start the real box are marked ``isolation`` (``-m isolation`` runs them,
``-m "not isolation"`` the rest).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hook_programs import install_hooks


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
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def programs() -> Iterator[Path]:
    """The example and fixture hook programs, installed where hooks may live."""
    yield from install_hooks()
