"""Package caches warm from the host's (sandbox/policy/layers.py), in the real box: the
box reads what the host's cache holds, its writes land in the project's slot, and the
host's cache stays byte for byte as it was, whatever the box does to it or around it.
Root and plain user alike; a home of the test's own."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers.homes import home_env, host_home

from sandbox.plan import RunResult
from sandbox.policy import Policy
from sandbox.policy.caches import folder_for
from sandbox.policy.layers import lines, plan
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(240)]

SETTINGS = SandboxSettings(hide_defaults=False)
BOXES = pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])


def out(r: RunResult) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


@pytest.fixture
def home(outside: Path) -> Path:
    """A home whose npm and pip caches hold files."""
    return host_home(outside, (".npm/_cacache/index-v5", ".cache/pip/http"))


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return home_env(home)


def tree(root: Path) -> dict[str, str]:
    """Every entry below ``root`` but the projects' caches, each file by its digest."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest()
                                       if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))
            if p.relative_to(root).parts[:2] != (".cache", "harness")}


def slot(project: Path, env: dict[str, str], n: int = 0) -> Path:
    return Path(folder_for(str(project.resolve()), env, env["HOME"]) + f".layered/{n}")


TOUCH = """
set -u
c="$npm_config_cache/_cacache/index-v5"
cat "$c/entry"
echo box >> "$c/entry" && echo new > "$c/new" && tail -n1 "$c/entry"
rm -f "$c/entry" && echo removed
echo poisoned > "$HOME/.npm/_cacache/index-v5/entry" 2>/dev/null && echo wrote-host
cat "$PIP_CACHE_DIR/http/entry"
exit 0
"""


@BOXES
def test_the_box_reads_the_host_s_cache_and_writes_only_its_own(
        project: Path, env: dict[str, str], home: Path, warm: bool) -> None:
    before = tree(home)
    with Session.open(str(project), SETTINGS, env=env, warm=warm) as s:
        r = s.run(["sh", "-c", TOUCH])
        again = s.run(["sh", "-c", 'cat "$npm_config_cache/_cacache/index-v5/new"; '
                       'ls "$npm_config_cache/_cacache/index-v5"'])
    assert r.stdout == (b"the host's own .npm/_cacache/index-v5\nbox\nremoved\n"
                        b"the host's own .cache/pip/http\n"), out(r)
    assert again.stdout == b"new\nnew\n", out(again)
    assert tree(home) == before
    upper = slot(project, env) / "upper" / "npm" / "_cacache" / "index-v5"
    assert (upper / "new").read_text() == "new\n"
    # The removed host entry is hidden above (a whiteout), never removed below.
    assert os.path.lexists(upper / "entry") and not (upper / "entry").is_file()


def test_a_second_session_of_the_project_finds_what_the_first_wrote(
        project: Path, env: dict[str, str]) -> None:
    with Session.open(str(project), SETTINGS, env=env) as s:
        s.run(["sh", "-c", 'echo kept > "$npm_config_cache/kept"'])
    with Session.open(str(project), SETTINGS, env=env) as s:
        r = s.run(["sh", "-c", 'cat "$npm_config_cache/kept"; '
                   'cat "$npm_config_cache/_cacache/index-v5/entry"'])
    assert r.stdout == b"kept\nthe host's own .npm/_cacache/index-v5\n", out(r)


def test_sessions_side_by_side_each_take_a_slot_of_their_own(
        project: Path, env: dict[str, str], home: Path) -> None:
    before = tree(home)
    said: list[bytes] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(2)

    def one(n: int) -> None:
        try:
            with Session.open(str(project), SETTINGS, env=env) as s:
                gate.wait(timeout=60)
                r = s.run(["sh", "-c", f'echo {n} > "$npm_config_cache/mine"; '
                           'cat "$npm_config_cache/_cacache/index-v5/entry"'])
                gate.wait(timeout=60)
                said.append(r.stdout)
        except BaseException as err:  # pragma: no cover - said below
            errors.append(err)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert said == [b"the host's own .npm/_cacache/index-v5\n"] * 2
    mine = sorted((slot(project, env, n) / "upper" / "npm" / "mine").read_text()
                  for n in range(2))
    assert mine == ["0\n", "1\n"]
    assert tree(home) == before


def test_npm_finds_and_verifies_what_the_host_cached(
        project: Path, env: dict[str, str], home: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    lib = project / "lib"
    lib.mkdir()
    (lib / "package.json").write_text('{"name": "hs-lib", "version": "1.0.0"}\n')
    (lib / "index.js").write_text("module.exports = 42\n")
    host_env = {**env, "npm_config_cache": str(home / ".npm")}
    for cmd in (["npm", "pack", "--silent"], ["npm", "cache", "add", "./hs-lib-1.0.0.tgz"]):
        bare = subprocess.run(cmd, env=host_env, capture_output=True, check=False, cwd=lib)
        assert bare.returncode == 0, bare.stderr
    before = tree(home)
    with Session.open(str(project), SETTINGS, env=env) as s:
        listed = s.run(["npm", "cache", "ls"], timeout=120)
        # verify rewrites the index and drops what it finds no use for: above the host's.
        verified = s.run(["npm", "cache", "verify"], timeout=120)
    assert b"pacote:tarball:file:hs-lib-1.0.0.tgz\n" in listed.stdout, out(listed)
    assert verified.returncode == 0 and b"Content verified: " in verified.stdout, \
        out(verified)
    assert tree(home) == before


def test_a_link_planted_in_the_slot_never_makes_a_host_cache_the_upper_one(
        project: Path, env: dict[str, str], home: Path) -> None:
    # ~/.cache writable: a box reaches the slots' folder, and plants a link where the
    # next session's upper folder is, to a host cache it cannot write (go's, empty).
    host_go = home / "go" / "pkg" / "mod"
    host_go.mkdir(parents=True)
    settings = SandboxSettings(hide_defaults=False, writable=(str(home / ".cache"),))
    with Session.open(str(project), settings, env=env) as s:
        upper = slot(project, env) / "upper"
        r = s.run(["sh", "-c", f'rm -rf "{upper}/npm" && ln -s "{host_go}" "{upper}/npm"'
                   f' && echo planted; echo x > "{host_go}/w" || echo host-go-read-only'])
    assert r.stdout == b"planted\nhost-go-read-only\n", out(r)
    before = tree(home)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", 'echo poisoned > "$npm_config_cache/planted"; exit 0'])
    assert tree(home) == before, out(r)


def test_a_hidden_path_in_a_host_cache_keeps_that_cache_out(
        project: Path, env: dict[str, str], home: Path) -> None:
    secret = home / ".npm" / "_cacache" / "token"
    secret.write_text("s3cret\n")
    settings = SandboxSettings(hide_defaults=False, hidden=(str(secret),))
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", 'cat "$npm_config_cache/_cacache/token"; '
                   'cat "$PIP_CACHE_DIR/http/entry"'])
    assert b"s3cret" not in r.stdout, out(r)
    assert r.stdout == b"the host's own .cache/pip/http\n", out(r)
    policy = Policy.from_settings(str(project.resolve()), settings, env=env)
    said = lines(policy)
    assert f"cache npm: starts from the project's own: the hidden path {secret} is in it " \
           "(or holds it)" in said, said


def test_what_each_tool_starts_from_is_said_before_any_session(
        project: Path, env: dict[str, str], home: Path) -> None:
    policy = Policy.from_settings(str(project.resolve()), SETTINGS, env=env)
    layers, _ = plan(policy, ahead=True)
    assert [x.tool for x in layers] == ["npm", "pip"]
    said = lines(policy)
    assert said[0] == (f"cache npm: warm from {home}/.npm (read only below the box's "
                       "writes), where the box is staged")
    assert f"cache uv: starts from the project's own: {home}/.cache/uv is not there" in said
    cli = [sys.executable, "-I", "-m", "launchers", "doctor"]
    told = subprocess.run(cli, capture_output=True, text=True, env=env, cwd=project,
                          check=False)
    assert said[0] + "\n" in told.stderr, told.stderr


def test_with_every_slot_taken_the_box_starts_from_the_project_s_own_and_says_so(
        project: Path, env: dict[str, str]) -> None:
    import fcntl

    from sandbox.policy.layers import SLOTS

    with Session.open(str(project), SETTINGS, env=env) as s:
        s.run(["true"])
    held = []
    for n in range(SLOTS):
        fd = os.open(f"{slot(project, env, n)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(fd)
    try:
        with Session.open(str(project), SETTINGS, env=env) as s:
            r = s.run(["sh", "-c", 'ls "$npm_config_cache"'])
            said = list(s.warnings)
    finally:
        for fd in held:
            os.close(fd)
    assert r.returncode == 0 and r.stdout == b"", out(r)
    assert said == ["the package caches start from the project's own, not warm from the "
                    "host's: every slot of the project's warm caches is taken by a session "
                    "going, or one could not be made"], said


def test_a_host_cache_where_the_box_has_its_own_folder_is_not_laid_under(
        project: Path, env: dict[str, str]) -> None:
    import shutil as _shutil
    import tempfile

    # npm's cache in the host's /tmp: the box's /tmp is its own, and an overlay would
    # show the host's there.
    cache = Path(tempfile.mkdtemp(prefix="hs-npm-", dir="/tmp"))
    try:
        (cache / "entry").write_text("the host's /tmp\n")
        e = {**env, "npm_config_cache": str(cache)}
        with Session.open(str(project), SETTINGS, env=e) as s:
            r = s.run(["sh", "-c", 'cat "$npm_config_cache/entry" 2>/dev/null; '
                       'cat "$PIP_CACHE_DIR/http/entry"'])
        assert r.stdout == b"the host's own .cache/pip/http\n", out(r)
        said = lines(Policy.from_settings(str(project.resolve()), SETTINGS, env=e))
        assert f"cache npm: starts from the project's own: {cache} is in one of the box's " \
               "own folders (the host's is not seen there)" in said, said
    finally:
        _shutil.rmtree(cache)


def test_a_hidden_path_named_through_a_link_keeps_the_cache_it_leads_into_out(
        project: Path, env: dict[str, str], home: Path) -> None:
    secret = home / ".npm" / "_cacache" / "token"
    secret.write_text("s3cret\n")
    (home / "token-link").symlink_to(secret)
    settings = SandboxSettings(hide_defaults=False, hidden=(str(home / "token-link"),))
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", 'cat "$npm_config_cache/_cacache/token"; exit 0'])
    assert b"s3cret" not in r.stdout, out(r)
