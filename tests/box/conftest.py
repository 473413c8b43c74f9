"""Fixtures of the box's tests: the private Docker engine, started once per session when
a test asks for it (:mod:`helpers.docker_engine`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import docker_engine


@pytest.fixture(scope="session")
def engine() -> Iterator[docker_engine.Engine]:
    """The private engine with the bare image; skipped in the plain user's pass."""
    docker_engine.skip_unless_root()
    made = docker_engine.start()
    try:
        yield made
    finally:
        made.stop()
