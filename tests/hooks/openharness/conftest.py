"""The openHarness tests' set-up: a policy, a session with the box, its runner, and a
trust store of the test's own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.trusting import data_home

from launchers import openharness as oh
from sandbox.policy import Policy
from sandbox.session import Session


@pytest.fixture
def policy(tmp_path: Path, project: Path) -> Policy:
    private = tmp_path / "private-tmp"
    private.mkdir()
    return Policy.create(str(project), private_tmp=str(private))


@pytest.fixture
def session(project: Path) -> Iterator[Session]:
    """A session with the box, whose environment holds a provider key (which no hook
    may receive)."""
    with Session.open(str(project), env=dict(os.environ, ANTHROPIC_API_KEY="sk-ant-secret")
                      ) as s:
        yield s


@pytest.fixture
def runner(session: Session) -> oh.CommandRunner:
    """The runner a session uses: host hooks from /, boxed ones in its box."""
    return oh.session_runner(session)


@pytest.fixture
def oh_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A trust store of the test's own; :func:`helpers.oh_files.write` trusts what it
    writes."""
    with data_home(monkeypatch) as d:
        yield d
