"""The agent's bytes never reach the user's terminal raw.

A policy hook that quotes the refused command carries whatever the agent put in it:
``ESC ]52`` writes the user's clipboard, ``ESC [2J`` clears the screen. Every line for
people goes through one point that writes control characters out; the reason the model
reads stays verbatim in ``--json`` and in the protocol answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.trusting import data_home, trust_file

from launchers.cli.hook_openharness import cmd_hook_openharness
from launchers.cli.main import parser

pytestmark = pytest.mark.isolation

EVIL = "rm -rf \x1b]52;c;SGVsbG8=\x07 and \x1b[2J\x1b[31m done"
SHOWN = "rm -rf \\x1b]52;c;SGVsbG8=\\x07 and \\x1b[2J\\x1b[31m done"


@pytest.fixture
def quoting_hook(outside: Path) -> Path:
    """A policy hook that blocks and quotes the command it was given, as many do."""
    hook = outside / "quote-and-block.py"
    hook.write_text(
        "#!/usr/bin/python3\nimport json, sys\n"
        "cmd = json.load(sys.stdin)['tool_input']['command']\n"
        "print(json.dumps({'decision': 'block', 'reason': 'refused: ' + cmd}))\n")
    hook.chmod(0o755)
    return hook


def run_hook(project: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "launchers.cli", "hook", "PreToolUse", "--tool", "bash",
         "--input", json.dumps({"command": EVIL}), "--project", str(project), *extra],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)


def test_a_block_reason_reaches_the_terminal_escaped(
        tmp_path: Path, project: Path, quoting_hook: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[[hooks]]\nname = "quote"\nevent = "PreToolUse"\ncommand = ["{quoting_hook}"]\n'
        'tools = ["bash"]\ntimeout = 10\n')
    r = run_hook(project, home)
    assert r.returncode == 1, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert r.stderr == f'blocked by the user\'s hook "quote": refused: {SHOWN}\n'
    # The model's copy is the hook's text, byte for byte.
    doc = json.loads(run_hook(project, home, "--json").stdout)
    assert doc["message"] == f'blocked by the user\'s hook "quote": refused: {EVIL}'


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with data_home(monkeypatch) as d:
        yield d


def test_an_openharness_deny_reaches_the_terminal_escaped(
        tmp_path: Path, project: Path, store: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    oh = project / ".oh"
    oh.mkdir()
    config = oh / "config.yaml"
    config.write_text("hooks:\n  preToolUse:\n"
                      "    - command: 'printf \"rm -rf \\033]52;c;SGVsbG8=\\007 and "
                      "\\033[2J\\033[31m done\" >&2; exit 1'\n")
    trust_file(config)
    argv = ["hook", "preToolUse", "--openharness", str(config), "--project", str(project),
            "--tool", "Bash", "--input", json.dumps({"command": EVIL}), "--no-sandbox"]
    code = cmd_hook_openharness(parser().parse_args(argv))
    err = capsys.readouterr().err
    assert code == 1
    assert "\x1b" not in err and "\x07" not in err, err
    assert "]52;c;SGVsbG8=" in err, err
