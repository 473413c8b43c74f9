"""Say why (sandbox/box/hints.py): a boxed command that fails on something the box refused
gets a one-line hint in its result, and ``harness-sandbox run`` prints it. Real box,
real commands; root and plain user alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(outside: Path) -> dict[str, str]:
    home = outside / "home"  # where the box sees it (its /tmp is its own)
    (home / ".npm" / "_cacache").mkdir(parents=True)
    e = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "HARNESS_HOME")}
    e["HOME"] = str(home)
    return e


def boxed(project: Path, env: dict[str, str], script: str,
          settings: SandboxSettings | None = None) -> RunResult:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with Session.open(str(project), settings or SandboxSettings(hide_defaults=False),
                      env=env) as s:
        return s.run(["sh", "-c", script], timeout=60)


def test_a_write_to_what_git_reads_says_it_is_read_only_and_why(
        project: Path, env: dict[str, str]) -> None:
    r = boxed(project, env, "echo x > .git/hooks/pre-commit")
    assert r.returncode != 0
    assert r.hint == (f"{project.resolve()}/.git/hooks/pre-commit is read-only in the box: "
                      "a tool on the host reads it to decide what to run (docs/linux-box.md)")


def test_git_s_own_config_write_lands_with_no_hint(project: Path, env: dict[str, str]) -> None:
    """git's config is the box's copy, merged back through an allow-list
    (sandbox/git/configcopy.py): an ordinary write works, and says nothing."""
    r = boxed(project, env, "git config user.name someone")
    assert (r.returncode, r.hint) == (0, ""), r


def test_a_write_to_the_host_s_cache_says_where_the_box_s_own_is(
        project: Path, env: dict[str, str]) -> None:
    r = boxed(project, env, 'touch "$HOME/.npm/_cacache/planted"')
    assert r.returncode != 0
    assert r.hint.startswith(f"{env['HOME']}/.npm/_cacache/planted is in the host's npm "
                             "cache, read-only in the box"), r.hint
    assert "the box's own is npm_config_cache=" in r.hint


def test_a_write_outside_the_box_s_folders_says_how_to_allow_it(
        project: Path, env: dict[str, str]) -> None:
    r = boxed(project, env, "echo x > /usr/local/planted")
    assert r.hint == ("/usr/local/planted is outside the folders the box writes (the "
                      "project, /tmp, [sandbox] writable); to write there, add its folder "
                      "to [sandbox] writable")


def test_a_hidden_file_says_it_is_hidden(project: Path, env: dict[str, str]) -> None:
    secret = Path(env["HOME"]) / "secret.txt"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    r = boxed(project, env, f"cat {secret}",
              SandboxSettings(hide_defaults=False, hidden=(str(secret),)))
    assert r.returncode != 0
    assert r.hint == f"{secret} is hidden from the box ([sandbox] hidden and its defaults)"


def test_an_address_the_list_refused_is_the_hint(project: Path, env: dict[str, str]) -> None:
    r = boxed(project, env, "curl -fsS --max-time 10 http://127.0.0.2:9/",
              SandboxSettings(hide_defaults=False, network=("example.org",)))
    assert r.returncode != 0
    assert r.hint.startswith("the box was refused 127.0.0.2 (port 9): "), r.hint


@pytest.mark.parametrize("script", [
    "exit 3",
    "echo 'cannot create x: Read-only file system' >&2; exit 1",  # the project's own
    "echo x > /tmp/fine",
])
def test_a_command_that_fails_on_its_own_or_succeeds_has_no_hint(
        project: Path, env: dict[str, str], script: str) -> None:
    assert boxed(project, env, script).hint == ""


def test_run_prints_the_hint_after_the_command_s_own_output(
        project: Path, env: dict[str, str], tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text("[sandbox]\nhide_defaults = false\n")
    r = subprocess.run([sys.executable, "-m", "launchers", "run", "--project", str(project),
                        "--", "sh", "-c", "echo x > .git/hooks/pre-commit"],
                       env={**env, "HARNESS_HOME": str(tmp_path / "cfg")}, cwd=REPO,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"harness-sandbox: hint: {project.resolve()}/.git/hooks/pre-commit is read-only in "
        "the box: a tool on the host reads it to decide what to run (docs/linux-box.md)")


def test_run_keeps_as_much_of_the_streamed_stderr_as_the_hint_reads() -> None:
    from launchers.cli import stream
    from sandbox.box import hints

    assert stream._TAIL == hints.TAIL


def test_serve_s_run_result_carries_the_hint(project: Path, env: dict[str, str],
                                             tmp_path: Path) -> None:
    from helpers.serve_client import Serve

    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text("[sandbox]\nhide_defaults = false\n")
    s = Serve("--project", str(project), env={**env, "HARNESS_HOME": str(tmp_path / "cfg")},
              cwd=REPO)
    try:
        s.result("open")
        failed = s.result("run", {"argv": ["sh", "-c", "echo x > .git/hooks/pre-commit"]})
        fine = s.result("run", {"argv": ["true"]})
    finally:
        s.close()
    assert failed["hint"].startswith(
        f"{project.resolve()}/.git/hooks/pre-commit is read-only"), failed
    assert fine["hint"] == ""


def test_a_quoted_relative_path_outside_the_project_is_named(
        outside: Path, env: dict[str, str]) -> None:
    # Outside /tmp: the box's /tmp is its own, and the folder above a project there too.
    project = outside / "proj"
    project.mkdir()
    r = boxed(project, env, "touch ../beside.txt")
    assert r.returncode != 0
    assert r.hint == (f"{project.resolve().parent}/beside.txt is outside the folders the "
                      "box writes (the project, /tmp, [sandbox] writable); to write there, "
                      "add its folder to [sandbox] writable"), r


def test_a_file_below_a_hidden_folder_says_it_is_hidden(project: Path,
                                                         env: dict[str, str]) -> None:
    secrets = Path(env["HOME"]) / "vault"
    secrets.mkdir()
    (secrets / "key").write_text("s3cret\n")
    r = boxed(project, env, f"cat {secrets}/key",
              SandboxSettings(hide_defaults=False, hidden=(str(secrets),)))
    assert r.returncode != 0
    assert r.hint == f"{secrets}/key is hidden from the box ([sandbox] hidden and its defaults)"


def test_a_refused_connection_without_the_network_says_the_loopback_is_the_boxs(
        project: Path, env: dict[str, str]) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        script = (f"{sys.executable} -I -c \"import socket; "
                  f"socket.create_connection(('127.0.0.1', {port}), 3)\"")
        offline = boxed(project, env, script)
        shared = boxed(project, env, script + " && exit 7",
                       SandboxSettings(hide_defaults=False, network=True))
    finally:
        server.close()
    from sandbox.box.hints import NO_NETWORK

    assert offline.returncode != 0 and offline.hint == NO_NETWORK, offline
    assert shared.returncode == 7 and shared.hint == "", shared


def test_a_write_the_landlock_box_refuses_says_where_the_box_writes(
        project: Path, env: dict[str, str]) -> None:
    from sandbox.linux import landlock

    if landlock.abi() < landlock.NEEDED_ABI:
        pytest.skip("this kernel's Landlock lacks the scopes (ABI 6)")
    target = Path(env["HOME"]) / "planted.txt"
    r = boxed(project, env, f"echo x > {target}",
              SandboxSettings(hide_defaults=False, box="landlock"))
    assert r.returncode != 0
    assert r.hint.startswith(f"{target} is outside the folders the box writes"), r
