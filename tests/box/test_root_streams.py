"""A boxed command reopens its own standard streams (``/dev/stdin``, ``/dev/stdout``,
``/dev/stderr``, ``/proc/self/fd/N``) as a plain user's does, also when root started
the session and the box runs as root's stand-in: the pipes are given to the stand-in
before the run starts. Without that, a real hook that reads its input through
``/dev/stdin`` read nothing as root and let every call through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.serve_client import Serve

from sandbox.session import Session

pytestmark = pytest.mark.isolation

CLI = [sys.executable, "-m", "launchers"]
REOPEN = ("cat /dev/stdin; echo out > /dev/stdout; echo err > /dev/stderr; "
          "cat /proc/self/fd/0; echo fd > /proc/self/fd/1")


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])
def test_a_boxed_command_reopens_its_own_streams(project: Path, warm: bool) -> None:
    with Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", REOPEN], stdin=b"in\n")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"in\nout\nfd\n", b"err\n"), r


def test_run_reopens_them_through_the_cli(project: Path) -> None:
    r = subprocess.run([*CLI, "run", "--project", str(project), "--", "sh", "-c", REOPEN],
                       input=b"in\n", capture_output=True, cwd=REPO, timeout=60, check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"in\nout\nfd\n", b"err\n"), r


def test_serve_runs_reopen_them(project: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(tmp_path / "hh")
    (tmp_path / "hh").mkdir()
    s = Serve("--project", str(project), env=env, cwd=REPO)
    try:
        s.result("open")
        r = s.result("run", {"argv": ["sh", "-c", REOPEN], "stdin": "in\n"})
    finally:
        s.close()
    assert (r["exit"], r["stdout"], r["stderr"]) == (0, "in\nout\nfd\n", "err\n"), r


BLOCK_GIT_COMMIT = """#!/bin/sh
# Reads the call the way public hooks do: from /dev/stdin, by name.
command=$(sed -n 's/.*"command": *"\\([^"]*\\)".*/\\1/p' < /dev/stdin)
case "$command" in
  *"git commit"*) echo "no commits here" >&2; exit 2 ;;
esac
exit 0
"""


def test_a_hook_reading_dev_stdin_blocks_as_it_does_for_a_plain_user(
        project: Path, outside: Path, tmp_path: Path) -> None:
    hook = outside / "block-git-commit.sh"
    hook.write_text(BLOCK_GIT_COMMIT)
    hook.chmod(0o755)
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[[hooks]]\nname = "no-commit"\nevent = "PreToolUse"\ntools = ["bash"]\n'
        f"command = [{json.dumps(str(hook))}]\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(home)

    def fire(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "hook", "PreToolUse", "--project", str(project),
                               "--tool", "bash", "--input", json.dumps({"command": command})],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=60,
                              check=False)

    blocked = fire("git commit -m x")
    assert blocked.returncode == 1, blocked
    assert blocked.stderr == "blocked by the user's hook \"no-commit\": no commits here\n"
    allowed = fire("ls")
    assert allowed.returncode == 0, allowed
