"""A protected name the host replaces during a session (``git config`` on the host renames
``config.lock`` over ``.git/config``) takes the box's mounts on it away in every
namespace: the box must not then write the project's own file (sandbox/backends/
replaced.py). Between runs the mounts are made again before the next run; during a run,
what the box wrote there is repaired when it ends. Host git is then run for real."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.unprivileged import searchable_tmp

from sandbox.linux.linuxbox import LinuxBox
from sandbox.session import Session

pytestmark = pytest.mark.isolation

WARM = pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])


@pytest.fixture
def base() -> Iterator[Path]:
    path = searchable_tmp()
    subprocess.run(["git", "init", "-q", str(path / "p")], check=True)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def _plant(base: Path) -> str:
    """A run that sets core.fsmonitor to a program leaving a marker, every way it can."""
    marker = base / "RAN"
    return (f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> .git/config; "
            f"git config core.fsmonitor 'touch {marker}'; "
            f"printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit 2>/dev/null; "
            "chmod +x .git/hooks/pre-commit 2>/dev/null; true")


def _host_git(project: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "a",
           "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    for args in (["status"], ["commit", "-q", "--allow-empty", "-m", "host"]):
        subprocess.run(["git", "-C", str(project), *args], capture_output=True, env=env,
                       check=False, timeout=60)


@WARM
def test_a_config_the_host_rewrote_between_runs_is_the_boxs_copy_again(
        base: Path, warm: bool) -> None:
    project = base / "p"
    with Session.open(str(project), warm=warm) as s:
        s.run(["true"])
        subprocess.run(["git", "-C", str(project), "config", "user.name", "host"], check=True)
        s.run(["sh", "-c", _plant(base)])
        seen = s.run(["sh", "-c", "test -L .git/config && git config user.name"])
    _host_git(project)
    assert not (base / "RAN").exists()
    assert b"fsmonitor" not in (project / ".git" / "config").read_bytes()
    assert b"name = host" in (project / ".git" / "config").read_bytes()
    assert seen.stdout == b"host\n", seen  # the copy again, with the host's change


@WARM
def test_hooks_the_host_replaced_between_runs_are_read_only_again(base: Path,
                                                                  warm: bool) -> None:
    project = base / "p"
    hooks = project / ".git" / "hooks"
    with Session.open(str(project), warm=warm) as s:
        s.run(["true"])
        hooks.rename(project / ".git" / "hooks.old")
        hooks.mkdir()
        r = s.run(["sh", "-c", _plant(base) + "; echo x > .git/hooks/pre-commit"])
    assert not (hooks / "pre-commit").exists(), r
    _host_git(project)
    assert not (base / "RAN").exists()


@WARM
def test_what_a_run_wrote_after_the_host_rewrote_the_config_is_taken_out(
        base: Path, warm: bool) -> None:
    project = base / "p"

    def host() -> None:
        time.sleep(0.5)
        subprocess.run(["git", "-C", str(project), "config", "user.name", "host"],
                       check=True)

    with Session.open(str(project), warm=warm) as s:
        t = threading.Thread(target=host)
        t.start()
        s.run(["sh", "-c", "sleep 2; " + _plant(base)], timeout=30)
        t.join()
    _host_git(project)
    assert not (base / "RAN").exists()
    config = (project / ".git" / "config").read_bytes()
    assert b"fsmonitor" not in config and b"name = host" in config, config
    said = [w for w in s.warnings if "was replaced on the host during a run" in w]
    assert said and "core.fsmonitor changed meanwhile: put back as it was" in said[0], \
        s.warnings


def test_without_the_watch_the_box_writes_the_projects_config(
        base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack is real: with the box's mounts never made again, host git runs what
    the box planted."""
    monkeypatch.setattr(LinuxBox, "_enter", lambda self: None)
    monkeypatch.setattr(LinuxBox, "_leave", lambda self: None)
    project = base / "p"
    with Session.open(str(project)) as s:
        s.run(["true"])
        subprocess.run(["git", "-C", str(project), "config", "user.name", "host"], check=True)
        s.run(["sh", "-c", _plant(base)])
    _host_git(project)
    assert (base / "RAN").exists()
