"""``harness-sandbox hook EVENT``: the real command line, real config, real hooks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.procs import left_after, running_with

# Hooks run in the real box.
pytestmark = pytest.mark.isolation


def toml_hook(name: str, command: list[str], **extra: object) -> str:
    lines = ["[[hooks]]", f'name = "{name}"', f"command = {json.dumps(command)}"]
    extra.setdefault("event", "PreToolUse")
    for key, value in extra.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    home = tmp_path / "harness-home"
    home.mkdir()
    return home / "config.toml"


def hook_cmd(project: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(config.parent)
    return subprocess.run(
        [sys.executable, "-m", "launchers.cli", "hook", *args, "--project", str(project)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False,
    )


def test_a_blocked_call_exits_1_with_the_models_text_on_stderr(
        project: Path, config: Path, programs: Path) -> None:
    config.write_text(toml_hook("no-force-push", [str(programs / "no-force-push.sh")],
                                tools=["bash", "exec"], timeout=10))
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash",
                 "--input", '{"command": "git push --force origin main"}')
    assert r.returncode == 1
    assert r.stderr == \
        'blocked by the user\'s hook "no-force-push": force-push is not allowed here\n'
    assert r.stdout == ""
    ok = hook_cmd(project, config, "PreToolUse", "--tool", "bash",
                  "--input", '{"command": "git status"}')
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")


def test_json_output_is_one_document(project: Path, config: Path, programs: Path) -> None:
    config.write_text(toml_hook("keywords", ["/usr/bin/python3",
                                             str(programs / "keyword-detector.py")],
                                event="UserPromptSubmit", timeout=5, on_failure="continue"))
    r = hook_cmd(project, config, "UserPromptSubmit", "--prompt", "ooo seed my requirements",
                 "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == ["version", "event", "outcome", "message", "contexts", "warnings",
                         "hook", "failures", "refusals", "error"]
    assert doc["version"] == 1 and doc["event"] == "UserPromptSubmit"
    assert (doc["outcome"], doc["message"], doc["warnings"], doc["hook"]) == \
        ("allowed", None, [], None)
    [context] = doc["contexts"]
    assert context.startswith('Context from the user\'s hook "keywords":\n<skill-suggestion>')


def test_context_is_printed_on_stdout(project: Path, config: Path, programs: Path) -> None:
    config.write_text(toml_hook("hint", [str(programs / "context.py"), "mind the tests"],
                                event="UserPromptSubmit"))
    r = hook_cmd(project, config, "UserPromptSubmit", "--prompt", "x")
    assert (r.returncode, r.stdout) == \
        (0, 'Context from the user\'s hook "hint":\nmind the tests\n')


def test_a_failing_hook_prints_its_warning_and_blocks_the_prompt(
        project: Path, config: Path, programs: Path) -> None:
    config.write_text(toml_hook("keywords", [str(programs / "exit-code.sh"), "1"],
                                event="UserPromptSubmit"))
    r = hook_cmd(project, config, "UserPromptSubmit", "--prompt", "x", "--json")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "⚠ hook keywords is failing (exited with code 1), so your prompts are blocked. "
        'Fix it, set on_failure = "continue", or restart with --no-hooks.',
        '✗ prompt blocked: hook "keywords" failed (exited with code 1)']
    doc = json.loads(r.stdout)
    assert (doc["outcome"], doc["hook"]) == ("blocked", "keywords")


def test_the_session_id_is_passed_through_or_fresh(project: Path, config: Path,
                                                   programs: Path) -> None:
    config.write_text(toml_hook("copy", [str(programs / "copy-stdin.py"), "c"]))
    hook_cmd(project, config, "PreToolUse", "--tool", "read_file", "--session-id", "01MABC",
             "--permission-mode", "plan", "--input", json.dumps({"path": f"{project}/a.py"}))
    doc = json.loads((project / "stdin-c").read_text())
    assert (doc["session_id"], doc["permission_mode"], doc["tool_input"]) == \
        ("01MABC", "plan", {"path": "a.py"})
    ids = set()
    for _ in range(2):
        (project / "stdin-c").unlink()
        hook_cmd(project, config, "PreToolUse", "--tool", "bash")
        ids.add(json.loads((project / "stdin-c").read_text())["session_id"])
    assert len(ids) == 2 and "01MABC" not in ids


def test_no_sandbox_runs_the_hook_on_the_host(project: Path, config: Path,
                                              programs: Path) -> None:
    config.write_text(toml_hook("copy", [str(programs / "copy-stdin.py"), "h"]))
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash", "--no-sandbox")
    assert r.returncode == 0, r.stderr
    assert json.loads((project / "stdin-h").read_text())["cwd"] == str(project)


def test_no_hooks_runs_nothing(project: Path, config: Path, programs: Path) -> None:
    config.write_text(toml_hook("no-force-push", [str(programs / "no-force-push.sh")])
                      + toml_hook("inside", [str(project / "hook.sh")]))
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash", "--no-hooks",
                 "--input", '{"command": "git push --force"}')
    assert (r.returncode, r.stderr) == (0, "hooks: off (--no-hooks)\n")


def test_a_refused_hook_exits_2_with_the_refusal(project: Path, config: Path) -> None:
    inside = project / "hooks" / "check.sh"
    inside.parent.mkdir()
    inside.write_text("#!/bin/sh\nexit 0\n")
    inside.chmod(0o755)
    config.write_text(toml_hook("no-force-push", [str(inside)]))
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash")
    assert r.returncode == 2
    assert r.stderr == (
        f"hook no-force-push: {inside} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with "
        "--no-hooks.\n")


def test_a_config_error_exits_2_naming_the_file(project: Path, config: Path) -> None:
    config.write_text('[[hooks]]\nname = "x"\nevent = "PostToolUse"\ncommand = ["/bin/true"]\n')
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash")
    assert r.returncode == 2
    assert r.stderr.startswith(f"{config}: ")


@pytest.mark.parametrize(("args", "error"), [
    (["Stop"], "unknown event 'Stop': the events are PreToolUse and UserPromptSubmit"),
    (["PreToolUse"], "PreToolUse needs --tool NAME"),
    (["PreToolUse", "--tool", "bash", "--input", "[1]"],
     "--input must be a JSON object (the tool's arguments)"),
    (["UserPromptSubmit"], "UserPromptSubmit needs --prompt TEXT"),
])
def test_options_that_describe_no_event_exit_125(project: Path, config: Path,
                                                 args: list[str], error: str) -> None:
    r = hook_cmd(project, config, *args)
    assert (r.returncode, r.stderr) == (125, error + "\n")


def test_openharness_hooks_are_handed_to_their_own_front_end(project: Path,
                                                             config: Path) -> None:
    # With --openharness the hooks come from the openHarness file; the user config gives
    # only its [sandbox] table (its [[hooks]] are not run).
    config.write_text("[sandbox]\nnetwork = false\n")
    missing = project / ".oh" / "config.yaml"
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash", "--openharness", str(missing))
    assert r.returncode == 2
    assert str(config) not in r.stderr and str(missing) in r.stderr


def test_openharness_reads_the_user_config_and_says_its_load_error(project: Path,
                                                                  config: Path) -> None:
    config.write_text("not toml [")
    missing = project / ".oh" / "config.yaml"
    r = hook_cmd(project, config, "PreToolUse", "--tool", "bash", "--openharness", str(missing))
    assert r.returncode == 2
    assert r.stderr.startswith(f"harness-sandbox: {config}: not valid TOML")


def test_ctrl_c_interrupts_the_running_hook_and_ends_its_tree(
        project: Path, config: Path, programs: Path) -> None:
    marker = f"{300 + uuid.uuid4().int % 10_000}.75"
    config.write_text(toml_hook("slow", [str(programs / "sleeper.sh"), marker], timeout=60))
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(config.parent)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchers.cli", "hook", "PreToolUse", "--tool", "bash",
         "--project", str(project)], cwd=REPO, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not running_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running_with(marker), "the hook never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out) == (1, "")
    assert err == "interrupted while hook slow ran; nothing was sent\n"
    assert left_after(marker) == []
