"""The boxes a guard test runs in: the warm box started by the compiled starter
(sandbox/linux/warm/warmstart.c, the default where a compiler is found) and by the Python one
(sandbox/linux/warm/helper.py), a box per run started by the compiled launcher
(sandbox/linux/warm/guardinit.c, the same program) and one started by the Python launcher
(sandbox/linux/warm/guarded.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest

from sandbox.linux import initcache

BOXES = ("warm", "warm-python", "per-run", "per-run-python")
EACH_BOX = pytest.mark.parametrize("box", BOXES)
PER_RUN = pytest.mark.parametrize("box", BOXES[2:])
# The warm box's two starters, for the tests of the warm box itself.
STARTERS = ("warm", "warm-python")


def python_only(root: str) -> initcache.Launcher:
    return initcache.Launcher(None, "the Python launcher: asked for by a test")


@contextlib.contextmanager
def launcher(box: str) -> Iterator[bool]:
    """Sessions opened inside start their boxes per run as ``box`` asks; yields whether
    they are warm."""
    if box in ("per-run-python", "warm-python"):
        with mock.patch.object(initcache, "load", python_only):
            yield box == "warm-python"
        return
    if box in ("per-run", "warm"):
        # The compiled launcher, and no other: a machine without it fails here.
        real = initcache.load

        def compiled(root: str) -> initcache.Launcher:
            got = real(root)
            assert got.program is not None, got.how
            return got
        with mock.patch.object(initcache, "load", compiled):
            yield box == "warm"
        return
    raise AssertionError(box)
