"""``run`` and ``hook`` are on the path of every tool call: they import only what they
use, and start no process to learn what is known without one.

Each import test runs the command in a fresh interpreter, started isolated (``-I``) as
the launcher starts it, and reads which modules were loaded. A module named here was on
that path once and was measured there (a few milliseconds each; ``docs/performance.md``
has the figures): a test fails when an eager import brings one back. How long anything
takes is measured by ``./scripts/bench``, never here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.paths import REPO

from launchers.cli.main import _parse_fast, parser

ROOT = REPO

# What no boxed ``run`` or ``hook`` needs, and why it once came.
NEVER = {
    "yaml": "openHarness files only",
    "launchers.serve": "the serve command only",
    "launchers.claude.importer": "the import command only",
    "launchers.cli.audit": "the audit command only",
    "argparse": "the two commands are parsed by hand",
    "dataclasses": "it imports inspect, ast, dis and tokenize",
    "inspect": "through dataclasses",
    "hashlib": "OpenSSL: the interpreter's own _sha256 digests",
    "_hashlib": "OpenSSL",
    "shutil": "through tempfile, and for which() and rmtree()",
    "tempfile": "it imports shutil, random and weakref",
    "bz2": "through shutil",
    "lzma": "through shutil",
    "pyseccomp": "the compiled filter is kept between sessions",
    "ctypes.util": "through the filter's binding",
}
# Read only when a user config exists (the hook test has one, the run test none).
CONFIG_ONLY = {"tomllib"}

_PROBE = """
import json, sys
sys.argv[0] = "harness-sandbox"
from launchers.cli.main import main
status = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(status)
"""


def loaded(argv: list[str], home: Path, cwd: Path) -> set[str]:
    """The modules a fresh isolated interpreter holds after ``harness-sandbox argv``."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    done = subprocess.run([sys.executable, "-I", "-c", _PROBE, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    line = done.stderr.rpartition("\nMODULES ")[2]
    return set(json.loads(line))


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A home and a project outside /tmp, as a user's are: a project inside /tmp puts
    the box's mount points for it in the box's /tmp, the session's folder, which is then
    not empty at the end (and removing a folder that is not empty takes shutil)."""
    base = Path(f"/var/tmp/hs-lazy-{os.getpid()}-{tmp_path.name}")
    (base / "home").mkdir(parents=True)
    (base / "project").mkdir()
    (base / "hooks").mkdir()
    try:
        yield base / "home", base / "project"
    finally:
        shutil.rmtree(base)


def test_a_boxed_run_imports_none_of_what_it_does_not_use(
        places: tuple[Path, Path]) -> None:
    home, project = places
    argv = ["run", "--project", str(project), "--", "true"]
    loaded(argv, home, project)  # the first run may build and keep the filter
    extra = loaded(argv, home, project) & (set(NEVER) | CONFIG_ONLY)
    assert not extra, {name: NEVER.get(name, "no config here") for name in extra}


def test_a_hook_event_imports_none_of_what_it_does_not_use(
        places: tuple[Path, Path]) -> None:
    home, project = places
    # A hook outside the project and outside /tmp (the box's /tmp is the agent's).
    hooks = home.parent / "hooks"
    ok = hooks / "ok.sh"
    ok.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")
    ok.chmod(0o755)
    config = hooks / "config.toml"
    config.write_text('[[hooks]]\nname = "ok"\nevent = "PreToolUse"\n'
                      f'tools = ["bash"]\ncommand = ["{ok}"]\n')
    argv = ["hook", "PreToolUse", "--tool", "bash", "--input", '{"command": "ls"}',
            "--config", str(config), "--project", str(project)]
    loaded(argv, home, project)
    extra = loaded(argv, home, project) & set(NEVER)
    assert not extra, {name: NEVER[name] for name in extra}


@pytest.mark.parametrize("argv", [
    ["run", "--", "/bin/true"],
    ["run", "--project", "/p", "--host", "--timeout", "2.5", "--", "a", "-b", "--c"],
    ["run", "--project=/p", "--config", "c", "--", "x"],
    ["hook", "PreToolUse", "--tool", "bash", "--input", "{}"],
    ["hook", "--tool", "bash", "PreToolUse", "--json", "--no-hooks", "--no-sandbox",
     "--session-id", "s", "--permission-mode", "plan"],
    ["hook", "UserPromptSubmit", "--prompt", "hi", "--config=/c", "--project", "/p",
     "--openharness", "f"],
])
def test_run_and_hook_are_parsed_by_hand_as_argparse_parses_them(argv: list[str]) -> None:
    by_hand = vars(_parse_fast(argv))
    by_argparse = vars(parser().parse_args(argv))
    if by_argparse.get("argv", [])[:1] == ["--"]:
        by_argparse["argv"] = by_argparse["argv"][1:]  # run drops it (launchers/cli/run.py)
    assert by_hand == by_argparse


@pytest.mark.parametrize("argv", [
    ["run", "/bin/true"], ["run", "-h"], ["run", "--proj", "x", "--", "t"],
    ["run", "--timeout", "soon", "--", "t"], ["hook"], ["hook", "A", "B"],
    ["hook", "E", "--prompt", "-x"], ["hook", "E", "--json=1"], ["hook", "E", "--", "x"],
    ["audit"],
])
def test_anything_unusual_is_left_to_argparse(argv: list[str]) -> None:
    assert _parse_fast(argv) is None


def test_git_is_asked_where_the_repository_is_only_where_there_may_be_one(
        places: tuple[Path, Path]) -> None:
    from sandbox.session import Session
    from sandbox.settings import SandboxSettings

    home, project = places
    wrapper = home.parent / "bin"
    wrapper.mkdir()
    log = home.parent / "git.log"
    real = shutil.which("git")
    (wrapper / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (wrapper / "git").chmod(0o755)
    env = {"PATH": f"{wrapper}:/usr/bin:/bin", "HOME": str(home)}

    def asked() -> list[str]:
        log.write_text("")
        with Session.open(str(project), SandboxSettings(hide_defaults=False), env=env):
            pass
        return [line for line in log.read_text().splitlines() if line]

    # No .git and no HEAD from the project up: the user's config is all there is to ask.
    plain = asked()
    assert len(plain) == 1 and "config" in plain[0] and "rev-parse" not in plain[0], plain
    subprocess.run([real or "git", "init", "-q", str(project)], check=True)
    assert any("rev-parse" in line for line in asked())


@pytest.mark.parametrize("before, said", [
    ("", "out|bye"),
    # A thread that is no daemon is waited for, as the ordinary exit waits.
    ("import threading, time; threading.Thread(target=lambda: (time.sleep(0.2), "
     "sys.stdout.write('|joined'))).start(); ", "out|joined|bye"),
])
def test_the_command_ends_without_teardown_yet_writes_all_and_runs_its_exit_functions(
        before: str, said: str) -> None:
    code = ("import atexit, sys; from launchers.cli.main import leave; " + before +
            "atexit.register(lambda: sys.stdout.write('|bye')); sys.stdout.write('out'); "
            "leave(3)")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, said, "")
