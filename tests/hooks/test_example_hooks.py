"""The example hook programs in scripts/hooks, run as real processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers.paths import REPO

HOOKS = REPO / "scripts" / "hooks"
TOOLS_NEEDED = ("cat", "sed", "date", "mkdir", "dirname")


def run(name: str, envelope: object, *, env: dict[str, str] | None = None,
        cwd: str = "/") -> subprocess.CompletedProcess[bytes]:
    data = envelope if isinstance(envelope, bytes) else json.dumps(envelope).encode()
    return subprocess.run([str(HOOKS / name)], input=data, capture_output=True,
                          env=env if env is not None else dict(os.environ), cwd=cwd,
                          timeout=30)


@pytest.mark.parametrize("name", ["no-force-push.sh", "keyword-detector.py", "notify.sh"])
def test_every_example_hook_is_executable(name: str) -> None:
    assert os.access(HOOKS / name, os.X_OK)


# -- no-force-push.sh --------------------------------------------------------------------

def pre_tool_use(command: str) -> dict[str, object]:
    return {"session_id": "01M", "hook_event_name": "PreToolUse", "cwd": "/home/dana/proj",
            "permission_mode": "auto", "tool_name": "bash",
            "tool_input": {"command": command}, "tool_use_id": "7EX"}


@pytest.mark.parametrize("command", ["git push --force origin main",
                                     "git push -f origin main"])
def test_a_force_push_is_blocked_with_exit_2_and_a_reason(command: str) -> None:
    p = run("no-force-push.sh", pre_tool_use(command))
    assert (p.returncode, p.stdout, p.stderr) == (2, b"", b"force-push is not allowed here\n")


@pytest.mark.parametrize("command", ["git push origin main", "ls -f", "git status"])
def test_other_calls_pass_without_output(command: str) -> None:
    p = run("no-force-push.sh", pre_tool_use(command))
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")


# -- keyword-detector.py -------------------------------------------------------------------

def prompt(text: str) -> dict[str, object]:
    return {"session_id": "01M", "hook_event_name": "UserPromptSubmit",
            "cwd": "/home/dana/proj", "permission_mode": "auto", "prompt": text}


def suggestion(skill: str) -> str:
    return ("<skill-suggestion>\nThe prompt starts with the keyword \"ooo\". The skill "
            f"/ouroboros:{skill} fits it; load it if it helps. Nothing has been loaded.\n"
            "</skill-suggestion>")


@pytest.mark.parametrize(("text", "skill"), [
    ("ooo seed my requirements", "seed"),
    ("  OOO Interview me", "interview"),
    ("ooo", "help"),
    ("ooo ???", "help"),
])
def test_an_ooo_prompt_gets_a_skill_suggestion(text: str, skill: str) -> None:
    p = run("keyword-detector.py", prompt(text))
    assert (p.returncode, p.stderr) == (0, b"")
    assert json.loads(p.stdout) == {"hookSpecificOutput": {
        "hookEventName": "UserPromptSubmit", "additionalContext": suggestion(skill)}}


@pytest.mark.parametrize("text", ["fix the tests", "oooh nice", ""])
def test_other_prompts_get_no_answer(text: str) -> None:
    p = run("keyword-detector.py", prompt(text))
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")


def test_the_detector_fails_open_on_bad_input() -> None:
    p = run("keyword-detector.py", b"not json")
    assert (p.returncode, p.stdout) == (0, b"")
    assert p.stderr.startswith(b"keyword-detector: ")


# -- notify.sh --------------------------------------------------------------------------

LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ harness: bash in /home/dana/proj\n")


def test_notify_appends_to_the_log_it_is_given_even_with_no_path(tmp_path: Path) -> None:
    log = tmp_path / "state" / "notify.log"
    env = {"HOME": str(tmp_path), "HARNESS_SANDBOX_NOTIFY_LOG": str(log)}
    for _ in range(2):
        p = run("notify.sh", pre_tool_use("ls"), env=env)
        assert (p.returncode, p.stderr) == (0, b"")
    lines = log.read_text().splitlines(keepends=True)
    assert len(lines) == 2 and all(LINE.fullmatch(line) for line in lines)


def without_notify_send(tmp_path: Path) -> str:
    """A PATH with the tools the script uses and no notify-send."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS_NEEDED:
        for folder in ("/usr/bin", "/bin"):
            if os.path.exists(f"{folder}/{tool}"):
                (bin_dir / tool).symlink_to(f"{folder}/{tool}")
                break
    return str(bin_dir)


def test_notify_falls_back_to_the_state_log_without_notify_send(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": without_notify_send(tmp_path)}
    p = run("notify.sh", {"hook_event_name": "UserPromptSubmit", "cwd": "/home/dana/proj"},
            env=env)
    assert (p.returncode, p.stderr) == (0, b"")
    log = tmp_path / ".local" / "state" / "harness-sandbox" / "notify.log"
    assert re.fullmatch(r"\S+ harness: UserPromptSubmit in /home/dana/proj\n",
                        log.read_text())


def test_notify_fails_when_it_has_nowhere_to_say_it(tmp_path: Path) -> None:
    p = run("notify.sh", pre_tool_use("ls"), env={"PATH": without_notify_send(tmp_path)})
    assert p.returncode == 1
    assert p.stderr == b"notify: no desktop notifications and no HOME for the log\n"
