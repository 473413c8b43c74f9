"""A trust store of the test's own, and trusting a file as ``harness-sandbox trust`` does.

The store lives under /var/tmp (outside /tmp, which a session with no sandbox counts as
the agent's) in a fresh mode-700 folder; ``XDG_DATA_HOME`` points at it for the test.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from launchers.openharness import trust


@contextlib.contextmanager
def data_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private ``XDG_DATA_HOME``: the store is ``<it>/harness/trusted.json``."""
    d = Path(tempfile.mkdtemp(prefix="hs-data-", dir="/var/tmp"))
    monkeypatch.setenv("XDG_DATA_HOME", str(d))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def trust_file(path: str | Path) -> str:
    """Trust ``path``'s current content in the store ``XDG_DATA_HOME`` names."""
    return trust.record(trust.read_file(str(path)))
