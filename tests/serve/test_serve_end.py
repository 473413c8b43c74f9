"""``serve``'s end, with the real command: a reader that goes away, a closed stdin and a
parent killed outright each end the session cleanly (status 0, nothing left running,
the session's folders removed), and never as a bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.procs import left_after
from helpers.serve_client import CLI

from serve.conftest import env_for
from serve.test_serve import sessions_of, sleeper, wait_for

pytestmark = pytest.mark.isolation


def requests(*argv: list[str]) -> str:
    lines = [{"id": 1, "method": "open"}]
    lines += [{"id": i + 2, "method": "run", "params": {"argv": a}} for i, a in enumerate(argv)]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_a_reader_that_goes_away_ends_the_session_with_status_0(project: Path, config: Path,
                                                                tmp_path: Path) -> None:
    word = f"serve-head-{uuid.uuid4().hex}"
    (tmp_path / "requests").write_text(requests(sleeper(word)))
    err = tmp_path / "stderr"
    # `… | harness-sandbox serve | head -c 10`, stdin held open long after head left.
    script = (f'(cat requests; sleep 6) | "$@" serve --project {project} 2>stderr '
              '| head -c 10; echo " ${PIPESTATUS[1]}"')
    done = subprocess.run(["bash", "-c", script, "bash", *CLI], capture_output=True,
                          text=True, env=env_for(config), cwd=tmp_path, timeout=60,
                          check=False)
    assert done.stdout == '{"event":" 0\n'
    assert "internal error" not in err.read_text()
    assert left_after(word, 5.0) == []


def test_the_server_ends_as_soon_as_its_reader_is_gone(project: Path, config: Path) -> None:
    word = f"serve-reader-{uuid.uuid4().hex}"
    proc = subprocess.Popen([*CLI, "serve", "--project", str(project)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env_for(config), cwd=REPO)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdout.readline()
        proc.stdin.write(requests(sleeper(word)).encode())
        proc.stdin.flush()
        proc.stdout.readline()
        wait_for(word)
        proc.stdout.close()  # stdin stays open: only the reader has gone
        assert proc.wait(30) == 0
        assert b"internal error" not in proc.stderr.read()
        assert left_after(word, 5.0) == []
        assert sessions_of(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()


HARNESS = r"""
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=open(os.environ["SERVE_STDERR"], "wb"))
proc.stdout.readline()
proc.stdin.write(b'{"id": 1, "method": "open"}\n'); proc.stdin.flush()
proc.stdout.readline()
proc.stdin.write(json.dumps({"id": 2, "method": "run", "params": {
    "argv": json.loads(os.environ["ARGV"])}}).encode() + b"\n")
proc.stdin.flush()
print(proc.pid, flush=True)
import time; time.sleep(1000)
"""


def test_a_killed_parent_ends_the_session_without_a_bug_report(project: Path, config: Path,
                                                                tmp_path: Path) -> None:
    word = f"serve-parent-{uuid.uuid4().hex}"
    err = tmp_path / "stderr"
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, *CLI, "serve", "--project", str(project)],
        stdout=subprocess.PIPE, cwd=REPO,
        env={**env_for(config), "ARGV": json.dumps(sleeper(word)), "SERVE_STDERR": str(err)})
    assert harness.stdout is not None
    server = int(harness.stdout.readline())
    try:
        wait_for(word)
        harness.kill()
        harness.wait()
        assert left_after(word, 10.0) == []
        for _ in range(200):
            if not os.path.exists(f"/proc/{server}"):
                break
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{server}")
        assert sessions_of(server) == []
        assert "internal error" not in err.read_text()
    finally:
        harness.kill()
        harness.wait()
