"""The command line as a shell user meets it: closed pipes, streamed output, the warnings
and errors a mistyped option or path gets. Real processes, the installed command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.procs import left_after, running_with

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


# ---- run streams, and ends with its reader ----

def shell(script: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["bash", "-c", script], capture_output=True, env=env_for(home),
                          cwd=cwd, timeout=60, check=False)


@needs_bwrap
@pytest.mark.isolation
@pytest.mark.parametrize("where", [[], ["--host"]], ids=["box", "host"])
def test_run_yes_into_head_ends_as_in_a_shell(
        where: list[str], project: Path, home: Path) -> None:
    # A word only this run's processes carry, to find any left behind.
    word = f"polish-yes-{os.getpid()}-{len(where)}"
    cmd = " ".join([CLI, "run", "--project", str(project), *where, "--", "yes", word])
    try:
        # timeout(1) only stops a run that would never end (the test then fails).
        done = shell(f'timeout 20 {cmd} | head -1; echo "${{PIPESTATUS[*]}}"', home, project)
        assert done.stdout == f"{word}\n{EXIT_CLOSED_PIPE} 0\n".encode()
        assert done.stderr == b""
        assert left_after(word, 5.0) == []
    finally:
        for pid in running_with(word):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@needs_bwrap
@pytest.mark.isolation
def test_run_passes_output_on_before_the_command_ends(project: Path, home: Path) -> None:
    # The command waits for a file the reader makes once it has seen the first line:
    # with the output held back until the end, neither would ever go on.
    flag = project / "seen"
    proc = subprocess.Popen(
        [CLI, "run", "--project", str(project), "--timeout", "30", "--", "sh", "-c",
         f"echo first; echo err-first >&2; while [ ! -e {flag} ]; do sleep 0.05; done; "
         "echo second"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(home), cwd=project)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.readline() == b"first\n"
        assert proc.stderr.readline() == b"err-first\n"
        flag.touch()
        assert proc.stdout.read() == b"second\n"
        assert proc.wait(30) == 0
        assert proc.stderr.read() == b""
    finally:
        proc.kill()
        proc.wait()


@needs_bwrap
@pytest.mark.isolation
def test_run_output_is_not_capped(project: Path, home: Path) -> None:
    # Two MiB, past the default 1 MiB cap a hook's answer has: a shell drops nothing.
    done = subprocess.run([CLI, "run", "--project", str(project), "--", "head", "-c",
                           str(2 << 20), "/dev/zero"], capture_output=True,
                          env=env_for(home), cwd=project, timeout=60, check=False)
    assert (done.returncode, len(done.stdout), done.stderr) == (0, 2 << 20, b"")


@needs_bwrap
@pytest.mark.isolation
def test_a_stderr_that_looks_like_bwraps_own_is_still_the_commands(
        project: Path, home: Path) -> None:
    # Held back while it may be bwrap's line about the box, then printed whole.
    done = subprocess.run([CLI, "run", "--project", str(project), "--", "sh", "-c",
                           "echo 'bwrap: said by the command' >&2; echo b >&2; exit 1"],
                          capture_output=True, env=env_for(home), cwd=project, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, b"", b"bwrap: said by the command\nb\n")


# ---- hook: a tool name that is none, a config that is not there ----

def hook_cli(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "hook", *args, "--project", str(project)], text=True,
                          capture_output=True, env=env_for(home), cwd=project, timeout=60,
                          check=False)


@pytest.mark.isolation
def test_hook_tool_bash_warns_as_the_same_name_in_a_config_does(
        project: Path, home: Path, programs: Path) -> None:
    (home / "config.toml").write_text(
        '[[hooks]]\nname = "no-force-push"\nevent = "PreToolUse"\n'
        f'command = ["{programs / "no-force-push.sh"}"]\ntools = ["bash"]\n')
    force = '{"command": "git push --force origin main"}'
    done = hook_cli(project, home, "PreToolUse", "--tool", "Bash", "--input", force)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == ('⚠ --tool "Bash" is not a tool here, so no hook that lists tools '
                           "covers it; tool names are lower case, such as bash.\n")
    blocked = hook_cli(project, home, "PreToolUse", "--tool", "bash", "--input", force)
    assert blocked.returncode == 1
    assert "⚠" not in blocked.stderr


def test_hook_tool_warnings_name_the_fix_and_reach_the_json(project: Path, home: Path) -> None:
    done = hook_cli(project, home, "PreToolUse", "--tool", "mcp__github__create_issue",
                    "--json")
    line = ('⚠ --tool "mcp__github__create_issue" is not a tool here, so no hook that lists '
            "tools covers it; an MCP server's tools are called through the mcp tool, so name "
            "mcp.")
    assert (done.returncode, done.stderr) == (0, line + "\n")
    assert json.loads(done.stdout)["warnings"] == [line]
    for tool in ("bash", "mcp", "read_file"):
        quiet = hook_cli(project, home, "PreToolUse", "--tool", tool)
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


@pytest.mark.parametrize("front", [[], ["--openharness", "oh.yaml"]], ids=["hooks", "oh"])
def test_hook_with_a_config_that_is_not_there_names_it_and_stops(
        front: list[str], project: Path, home: Path) -> None:
    (project / "oh.yaml").write_text("hooks: {}\n")
    missing = home / "typo" / "config.toml"
    done = hook_cli(project, home, "PreToolUse", "--tool", "bash", "--config", str(missing),
                    *front)
    line = (f"{missing}: no such file (named by --config); give the path of the user "
            "config, or leave --config out to use the one found by default.\n")
    assert done.returncode == 2
    assert done.stderr == (f"harness-sandbox: {line}" if front else line)
    js = hook_cli(project, home, "PreToolUse", "--tool", "bash", "--config", str(missing),
                  "--json")
    assert js.returncode == 2
    assert json.loads(js.stdout)["error"] == line.rstrip("\n")


def test_hook_with_no_config_found_by_default_is_still_no_hooks(
        project: Path, home: Path) -> None:
    # HARNESS_HOME names a folder with no config.toml: that is no hooks, said nowhere.
    done = hook_cli(project, home, "PreToolUse", "--tool", "bash")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# ---- the real cause: ~ not expanded, a script with Windows line ends ----

def hook_config(home: Path, command: list[str]) -> None:
    (home / "config.toml").write_text(
        f'[[hooks]]\nname = "t"\nevent = "PreToolUse"\ncommand = {json.dumps(command)}\n')


def script(folder: Path, name: str, text: bytes) -> Path:
    path = folder / name
    path.write_bytes(text)
    path.chmod(0o755)
    return path


@pytest.mark.isolation
def test_a_tilde_in_a_later_argument_is_said_to_be_unexpanded(
        project: Path, home: Path, outside: Path) -> None:
    ok = script(outside, "ok.sh", b"#!/bin/sh\nexit 0\n")
    hook_config(home, [str(ok), "~/rules.txt", "--rules=$HOME/r.yaml"])
    env = env_for(home)
    want = [
        "hook t: ~/rules.txt is not expanded: no shell runs the command, so variables and ~ "
        "stay as written, and as written it is a path relative to the project "
        f"({project}/~/rules.txt), which the agent could create or change; write the path "
        f"out: {env['HOME']}/rules.txt.",
        "hook t: $HOME/r.yaml is not expanded: no shell runs the command, so variables and ~ "
        "stay as written, and as written it is a path relative to the project "
        f"({project}/$HOME/r.yaml), which the agent could create or change; write the path "
        f"out: {env['HOME']}/r.yaml."]
    audit = subprocess.run([CLI, "audit", "--project", str(project)], capture_output=True,
                           text=True, env=env, cwd=project, timeout=60, check=False)
    assert audit.returncode == 1
    assert audit.stderr.splitlines()[1:-1] == want
    fired = hook_cli(project, home, "PreToolUse", "--tool", "bash", "--json")
    assert fired.returncode == 2
    refusals = json.loads(fired.stdout)["refusals"]
    assert [(r["path"], r["kind"], r["reason"]) for r in refusals] == [
        ("~/rules.txt", "project", want[0]), ("$HOME/r.yaml", "project", want[1])]
    # A relative path with nothing to expand keeps the seed's refusal.
    hook_config(home, [str(ok), "rules/r.yaml"])
    plain = hook_cli(project, home, "PreToolUse", "--tool", "bash")
    assert plain.stderr == ("hook t: rules/r.yaml is in the project, so the agent could "
                            "change it. Move it outside (for example "
                            "~/.local/share/harness/hooks/), or start with --no-hooks.\n")


def crlf_line(path: Path) -> str:
    return (f"{path} exists but has Windows line ends: its #! line asks for an interpreter "
            "whose name ends in a carriage return (\\r), which is not found; convert it to "
            f"Unix line ends: sed -i 's/\\r$//' {path}.")


@needs_bwrap
@pytest.mark.isolation
@pytest.mark.parametrize("where", [[], ["--host"]], ids=["box", "host"])
def test_run_of_a_script_with_windows_line_ends_names_the_cause(
        where: list[str], project: Path, home: Path) -> None:
    sh = script(project, "crlf.sh", b"#!/bin/sh\r\necho hi\r\n")
    py = script(project, "crlf.py", b"#!/usr/bin/env python3\r\nprint(1)\r\n")
    for path, name in ((sh, "./crlf.sh"), (py, "./crlf.py")):
        program = str(path) if where else name
        done = subprocess.run([CLI, "run", "--project", str(project), *where, "--", program],
                              capture_output=True, text=True, env=env_for(home), cwd=project,
                              timeout=60, check=False)
        assert done.returncode == 127
        lines = done.stderr.splitlines()
        assert lines[-1] == f"harness-sandbox: {crlf_line(path)}"
        if path == sh:  # the kernel's answer, then the cause
            assert lines == [f"harness-sandbox: {program}: No such file or directory",
                             f"harness-sandbox: {crlf_line(path)}"]
    missing = subprocess.run([CLI, "run", "--project", str(project), "--", "./gone.sh"],
                             capture_output=True, text=True, env=env_for(home), cwd=project,
                             timeout=60, check=False)
    assert missing.stderr == "harness-sandbox: ./gone.sh: No such file or directory\n"


@pytest.mark.isolation
@pytest.mark.parametrize("where", [[], ["--no-sandbox"]], ids=["box", "host"])
def test_a_hook_that_runs_a_crlf_script_gets_that_hint_not_the_path_one(
        where: list[str], project: Path, home: Path, outside: Path) -> None:
    crlf = script(outside, "check.sh", b"#!/bin/sh\r\nexit 0\r\n")
    hook_config(home, ["/bin/sh", "-c", f"{crlf}; exit $?"])
    done = hook_cli(project, home, "PreToolUse", "--tool", "bash", *where)
    assert done.returncode == 1
    hints = [line for line in done.stderr.splitlines() if line.startswith("hint: ")]
    assert hints == [f"hint: hook t ran a script that cannot start: {crlf_line(crlf)}"]


def test_a_fifo_in_place_of_a_script_is_not_waited_on(tmp_path: Path) -> None:
    from launchers.startable import crlf_reason, shebang

    fifo = tmp_path / "script.sh"
    os.mkfifo(fifo)
    assert shebang(str(fifo)) is None  # opened without waiting for a writer
    assert crlf_reason(str(fifo)) is None
