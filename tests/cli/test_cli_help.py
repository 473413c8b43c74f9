"""The CLI says what it does: each command's ``--help`` ends with its exit statuses and
one example, every option has help text, ``run`` and ``hook`` exit 125 for their own
usage errors (never a status the command or a hook could give), and a program that is
not there is named."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.serve_client import Serve

from launchers.cli.main import COMMANDS, parser

CLI = [sys.executable, "-m", "launchers"]


def cli(*words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = "/nonexistent-harness-home"
    return subprocess.run([*CLI, *words], capture_output=True, text=True, timeout=60,
                          check=False, env=env, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_commands_help_ends_with_its_exit_statuses_and_an_example(command: str) -> None:
    done = cli(command, "--help")
    assert done.returncode == 0
    tail = done.stdout.split("exit:", 1)[1]
    assert "example:" in tail
    assert f"  harness-sandbox {command}" in tail.split("example:", 1)[1]


def test_every_option_and_argument_has_help_text() -> None:
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, command in commands().items() for action in command._actions
               if action.help is None]
    assert missing == []


def test_hooks_help_names_the_events_and_the_permission_mode() -> None:
    out = cli("hook", "--help").stdout
    assert "PreToolUse or UserPromptSubmit" in out
    assert "permission_mode (default: auto)" in out


@pytest.mark.parametrize("words", [
    ["run", "--bogus", "--", "true"],
    ["run", "--timeout", "soon", "--", "true"],
    ["run"],
    ["hook"],
    ["hook", "PreToolUse", "--tool"],
    ["hook", "PreToolUse", "--bogus"],
    ["hook", "PreToolUse"],
    ["hook", "Stop"],
    ["hook", "UserPromptSubmit", "--tool", "bash", "--prompt", "x"],
])
def test_run_and_hook_usage_errors_exit_125(words: list[str], tmp_path: Path) -> None:
    done = cli(*words, cwd=tmp_path)
    assert done.returncode == 125, done.stderr
    assert done.stderr != ""


def test_other_commands_usage_errors_still_exit_2(tmp_path: Path) -> None:
    assert cli("audit", "--bogus", cwd=tmp_path).returncode == 2


@pytest.mark.isolation
def test_a_missing_program_is_named_by_run_and_serve(tmp_path: Path) -> None:
    done = cli("run", "--", "no-such-program-42", cwd=tmp_path)
    assert done.returncode == 127
    assert "no-such-program-42" in done.stderr
    served = Serve("--no-hooks", "--project", str(tmp_path), cwd=tmp_path)
    try:
        served.result("open")
        result = served.result("run", {"argv": ["no-such-program-42"]})
    finally:
        served.close()
    assert result["exit"] == 127
    assert result["error"] == "no-such-program-42: No such file or directory"
