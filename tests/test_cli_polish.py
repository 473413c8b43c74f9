"""The command line as a shell user meets it: closed pipes, streamed output, the warnings
and errors a mistyped option or path gets. Real processes, the installed command."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.cli.closed_pipe import EXIT_CLOSED_PIPE, reader_gone

CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
needs_bwrap = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
    reason="needs bubblewrap on Linux")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "harness-home"
    h.mkdir()
    return h


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(home)
    return env


def into_closed_pipe(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, bytes]:
    """Run ``argv`` with stdout a pipe whose reader is already gone (``| true`` that won
    the race every time); its status and its stderr."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env=env, cwd=cwd, timeout=60, check=False)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr


# ---- a closed pipe is no crash ----

@pytest.mark.parametrize("words", [
    ["--help"],
    ["--version"],
    ["doctor", "--json"],
    ["banner"],
    ["hook", "PreToolUse", "--tool", "bash", "--json"],
], ids=lambda w: " ".join(w))
def test_a_reader_that_went_away_ends_the_command_quietly(
        words: list[str], project: Path, home: Path) -> None:
    argv = [CLI, *words]
    if words[0] in ("banner", "hook"):
        argv += ["--project", str(project)]
    status, stderr = into_closed_pipe(argv, env_for(home), project)
    assert (status, stderr) == (EXIT_CLOSED_PIPE, b"")


def test_reader_gone_is_true_only_for_a_pipe_or_socket_without_its_reader(
        tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        assert not reader_gone(w)
        os.close(r)
        assert reader_gone(w)
    finally:
        os.close(w)
    a, b = socket.socketpair()
    with a, b:
        assert not reader_gone(a.fileno())
        b.close()
        assert reader_gone(a.fileno())
    with open(tmp_path / "file", "wb") as f:
        assert not reader_gone(f.fileno())
