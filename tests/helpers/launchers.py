"""The boxes a guard test runs in: the warm box, a box per run started by the compiled
launcher (sandbox/warm/guardinit.c, the default where a compiler is found), and a box
per run started by the Python launcher (sandbox/warm/guarded.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest

from sandbox import initcache

BOXES = ("warm", "per-run", "per-run-python")
EACH_BOX = pytest.mark.parametrize("box", BOXES)
PER_RUN = pytest.mark.parametrize("box", BOXES[1:])


@contextlib.contextmanager
def launcher(box: str) -> Iterator[bool]:
    """Sessions opened inside start their boxes per run as ``box`` asks; yields whether
    they are warm."""
    if box == "per-run-python":
        with mock.patch.object(initcache, "load", lambda root: initcache.Launcher(
                None, "the Python launcher: asked for by a test")):
            yield False
        return
    if box == "per-run":
        # The compiled launcher, and no other: a machine without it fails here.
        real = initcache.load

        def compiled(root: str) -> initcache.Launcher:
            got = real(root)
            assert got.program is not None, got.how
            return got
        with mock.patch.object(initcache, "load", compiled):
            yield False
        return
    assert box == "warm", box
    yield True
