"""Sessions side by side on one project never refuse each other: 8 at once, of every kind
(a one-shot ``run``, a warm :class:`~sandbox.session.Session` with several runs, a boxed
hook), opening and ending at any moment, in a project whose session makes and removes
names before its box (a missing ``.git/hooks``) and with a writable folder whose
missing host-read folders are made for the session (``~/.config/git``, the toolkit's
config folder). Real processes, real boxes; root and plain user alike."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pathguard.records import NamedTuple

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(600)]

AT_ONCE = 8
ROUNDS = 3

WARM = """
import sys
from sandbox.session import Session
from sandbox.settings import SandboxSettings
settings = SandboxSettings(writable=(sys.argv[2],), hide_defaults=False)
with Session.open(sys.argv[1], settings) as s:
    outs = [s.run(["sh", "-c", f"echo warm {i}"]) for i in range(3)]
for r in outs:
    sys.stdout.write(r.stdout.decode())
    sys.stderr.write(r.stderr.decode())
sys.exit(max(r.returncode or 0 for r in outs))
"""


class World(NamedTuple):
    project: Path
    writable: Path
    env: dict[str, str]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    outside = Path(os.path.realpath(tempfile.mkdtemp(prefix="conc-", dir="/var/tmp")))
    os.chmod(outside, 0o755)
    try:
        project, home = tmp_path / "proj", outside / "home"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        shutil.rmtree(project / ".git" / "hooks")  # made before each box, removed after
        writable = home / ".config"  # its git/ and harness/ missing: made per session
        writable.mkdir(parents=True)
        config = outside / "harness"
        config.mkdir()
        (config / "config.toml").write_text(
            f"[sandbox]\nwritable = [{json.dumps(str(writable))}]\nhide_defaults = false\n"
            '[[hooks]]\nname = "gate"\nevent = "PreToolUse"\n'
            'command = ["/bin/sh", "-c", "exit 0"]\nsandbox = true\n')
        env = {k: v for k, v in os.environ.items()
               if k not in ("XDG_CONFIG_HOME", "XDG_DATA_HOME")}
        env.update(HOME=str(home), HARNESS_HOME=str(config))
        yield World(project, writable, env)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def _one(world: World, kind: str) -> tuple[str, subprocess.CompletedProcess[str]]:
    cli = [sys.executable, "-m", "launchers"]
    where = ["--project", str(world.project)]
    argv = {
        "run": [*cli, "run", *where, "--", "sh", "-c", "echo run"],
        "warm": [sys.executable, "-c", WARM, str(world.project), str(world.writable)],
        "hook": [*cli, "hook", "PreToolUse", "--tool", "bash", *where],
    }[kind]
    return kind, subprocess.run(argv, capture_output=True, text=True, env=world.env,
                                timeout=240, check=False)


def _expected(kind: str) -> str:
    return {"run": "run\n", "warm": "warm 0\nwarm 1\nwarm 2\n", "hook": ""}[kind]


@pytest.mark.parametrize("kinds", [("run",), ("warm",), ("hook",), ("run", "warm", "hook")],
                         ids=["runs", "warm-sessions", "hooks", "mixed"])
def test_eight_sessions_at_once_on_one_project_never_refuse_each_other(
        world: World, kinds: tuple[str, ...]) -> None:
    failed: list[str] = []
    for _ in range(ROUNDS):
        with ThreadPoolExecutor(AT_ONCE) as pool:
            done = list(pool.map(lambda i: _one(world, kinds[i % len(kinds)]),
                                 range(AT_ONCE)))
        for kind, r in done:
            if r.returncode != 0 or r.stdout != _expected(kind):
                failed.append(f"{kind}: exit {r.returncode}: {r.stdout!r} {r.stderr[-400:]}")
    assert failed == []
    # Nothing the sessions made for themselves is left behind.
    assert not (world.project / ".git" / "hooks").exists()
    assert sorted(p.name for p in world.writable.iterdir()) == []


def test_a_child_forked_while_the_lock_is_held_does_not_keep_it(tmp_path: Path) -> None:
    # Another thread's fork (a stage's namespace holder) while a session opens would
    # take a copy of the lock's descriptor along, and hold every later open up.
    import fcntl
    import signal

    from sandbox.process.made import LOCK, made_lock

    ready_r, ready_w = os.pipe()
    with made_lock(str(tmp_path)):
        child = os.fork()
        if child == 0:  # its fork handlers have run by now
            os.write(ready_w, b"x")
            signal.pause()
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"x"
    os.close(ready_r)
    try:
        fd = os.open(tmp_path / LOCK, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if kept
        finally:
            os.close(fd)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
