"""``harness-sandbox run``: exit statuses and one-line errors, through the real CLI and box."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "harness-home"
    h.mkdir()
    return h


def run(project: Path, home: Path, *argv: str, stdin: bytes = b"",
        path: str | None = None, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "HARNESS_HOME": str(home)}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([CLI, "run", "--project", str(project), *extra, "--", *argv],
                          input=stdin, capture_output=True, env=env, check=False, timeout=60)


def test_exit_zero_and_output_pass_through(project: Path, home: Path) -> None:
    r = run(project, home, "sh", "-c", "echo out; echo err >&2")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"out\n", b"err\n")


def test_the_commands_exit_status_is_ours(project: Path, home: Path) -> None:
    assert run(project, home, "sh", "-c", "exit 3").returncode == 3


def test_a_signal_inside_the_box_is_128_plus_its_number(project: Path, home: Path) -> None:
    assert run(project, home, "sh", "-c", "kill -TERM $$").returncode == 128 + 15
    assert run(project, home, "sh", "-c", "kill -KILL $$").returncode == 128 + 9


def test_stdin_reaches_the_command(project: Path, home: Path) -> None:
    data = os.urandom(1 << 20)
    r = run(project, home, "cat", stdin=data)
    assert r.returncode == 0
    assert r.stdout == data


def test_timeout_is_124(project: Path, home: Path) -> None:
    r = run(project, home, "sleep", "30", extra=("--timeout", "0.5"))
    assert r.returncode == 124
    assert r.stderr == b"harness-sandbox: sleep 30 timed out after 0.5 s\n"


def test_command_not_found_is_127(project: Path, home: Path) -> None:
    r = run(project, home, "no-such-command-here")
    assert r.returncode == 127
    assert r.stderr == b"harness-sandbox: no-such-command-here: No such file or directory\n"


def test_command_not_executable_is_126(project: Path, home: Path) -> None:
    (project / "script.sh").write_text("echo hi\n")
    (project / "script.sh").chmod(0o644)
    r = run(project, home, "./script.sh")
    assert r.returncode == 126
    assert r.stderr == b"harness-sandbox: ./script.sh: Permission denied\n"


def test_missing_bwrap_is_125_with_the_diagnosis(project: Path, home: Path) -> None:
    # The CLI looks bwrap up on its own PATH: without it, no box, and nothing runs.
    marker = project / "ran"
    r = run(project, home, "/bin/sh", "-c", f"touch {marker}", path="/nonexistent")
    assert r.returncode == 125
    assert r.stderr == (b"harness-sandbox: bubblewrap (bwrap) is not on PATH (looked in "
                        b"/nonexistent); it is installed at /usr/bin/bwrap; add /usr/bin to "
                        b"PATH\n")
    assert not marker.exists()


def test_project_that_is_not_a_directory_is_125(tmp_path: Path, home: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    r = run(f, home, "true")
    assert r.returncode == 125
    assert r.stderr == f"harness-sandbox: the project {f} is not a directory.\n".encode()


def test_writable_path_that_does_not_exist_is_125(project: Path, home: Path,
                                                  tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    (home / "config.toml").write_text(f'[sandbox]\nwritable = ["{missing}"]\n')
    r = run(project, home, "true")
    assert r.returncode == 125
    assert r.stderr == (f"harness-sandbox: {home / 'config.toml'}: [sandbox]: the writable path "
                        f"{missing} does not exist; make it (mkdir -p {missing}) or take it "
                        "out of [sandbox] writable.\n").encode()


def test_hidden_path_that_is_neither_file_nor_folder_is_125(project: Path, home: Path,
                                                            tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (home / "config.toml").write_text(f'[sandbox]\nhidden = ["{fifo}"]\n')
    r = run(project, home, "true")
    assert r.returncode == 125
    assert r.stderr == (
        f"harness-sandbox: {home / 'config.toml'}: [sandbox]: the hidden path {fifo} is "
        "neither a file nor a folder.\n").encode()


def test_host_runs_from_root_outside_the_box(project: Path, home: Path) -> None:
    r = run(project, home, "sh", "-c", "pwd; cat /proc/1/comm", extra=("--host",))
    assert r.returncode == 0
    first = r.stdout.decode().splitlines()[0]
    assert first == "/"


def test_no_command_is_a_usage_error_exiting_125(project: Path, home: Path) -> None:
    r = subprocess.run([CLI, "run", "--project", str(project)], capture_output=True,
                       env={**os.environ, "HARNESS_HOME": str(home)}, check=False)
    assert r.returncode == 125
    assert r.stderr == (b"harness-sandbox: run needs a command: "
                        b"harness-sandbox run -- CMD [ARG...]\n")
