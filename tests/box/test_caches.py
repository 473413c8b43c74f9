"""Package managers' caches in the real box (sandbox/policy/caches.py): npm and pip work with
a cache the project's boxes write, the host's caches stay byte for byte as they were,
and no box writes another project's. Root and plain user alike; a home of the test's
own, so the user's real caches are never touched."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.homes import home_env, host_home

from sandbox.plan import RunResult
from sandbox.policy.caches import TABLE, folder_for, lines
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(240)]

SETTINGS = SandboxSettings(hide_defaults=False)


def out(r: RunResult) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


@pytest.fixture
def home(outside: Path) -> Path:
    """A home with the host's caches in it: npm's, pip's and cargo's, with files."""
    return host_home(outside, (".npm/_cacache/index-v5", ".cache/pip/wheels",
                               ".cargo/registry/cache", ".cargo/git/db"))


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return home_env(home)


def tree(home: Path) -> dict[str, str]:
    """Every entry of the host's caches in ``home`` and a digest of each file (byte for
    byte): all but ``~/.cache/harness``, where the projects' own caches are."""
    return {str(p.relative_to(home)): (hashlib.sha256(p.read_bytes()).hexdigest()
                                       if p.is_file() else "dir")
            for p in sorted(home.rglob("*"))
            if p.relative_to(home).parts[:2] != (".cache", "harness")}


def caches_of(project: Path, env: dict[str, str]) -> Path:
    return Path(folder_for(str(project.resolve()), env, env["HOME"]))


def written(project: Path, env: dict[str, str], folder: str) -> Path:
    """Where the box's writes to a tool's cache land: the upper folder of the first slot
    where the host's cache is laid under it (sandbox/policy/layers.py), else the
    project's own folder."""
    upper = Path(f"{caches_of(project, env)}.layered/0/upper/{folder}")
    return upper if upper.is_dir() else caches_of(project, env) / folder


@pytest.fixture
def npm() -> Iterator[str]:
    found = shutil.which("npm")
    if found is None:
        pytest.skip("npm is not installed")
    yield found


BOXES = pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])


@BOXES
def test_npm_packs_and_installs_a_local_tarball_with_the_project_s_cache(
        project: Path, env: dict[str, str], home: Path, npm: str, warm: bool) -> None:
    lib = project / "lib"
    lib.mkdir()
    (lib / "package.json").write_text('{"name": "hs-lib", "version": "1.0.0"}\n')
    (lib / "index.js").write_text("module.exports = 42\n")
    (project / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    before = tree(home)
    with Session.open(str(project), SETTINGS, env=env, warm=warm) as s:
        packed = s.run(["sh", "-c", "cd lib && npm pack --silent"], timeout=120)
        installed = s.run(["npm", "install", "--offline", "./lib/hs-lib-1.0.0.tgz"],
                          timeout=120)
        again = s.run(["npm", "ci", "--offline"], timeout=120)
        got = s.run(["node", "-e", "console.log(require('hs-lib'))"])
    assert packed.returncode == 0, out(packed)
    assert installed.returncode == 0, out(installed)
    assert again.returncode == 0, out(again)
    assert got.stdout == b"42\n"
    assert (written(project, env, "npm") / "_cacache").is_dir()
    assert tree(home) == before


def _sdist(where: Path) -> Path:
    """A source archive pip builds a wheel of, and keeps that wheel in its cache."""
    path = where / "hsdemo-1.0.tar.gz"
    files = {"setup.py": "from setuptools import setup\nsetup(name='hsdemo', "
                         "version='1.0', packages=['hsdemo'])\n",
             "hsdemo/__init__.py": "VALUE = 7\n",
             "PKG-INFO": "Metadata-Version: 2.1\nName: hsdemo\nVersion: 1.0\n"}
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            info = tarfile.TarInfo(f"hsdemo-1.0/{name}")
            info.size = len(text.encode())
            t.addfile(info, io.BytesIO(text.encode()))
    return path


def _wheel(where: Path) -> Path:
    info = "hswheel-1.0.dist-info"
    path = where / "hswheel-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("hswheel/__init__.py", "VALUE = 8\n")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: hswheel\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


PIP = ["/usr/bin/python3", "-m", "pip", "install", "--no-index", "--no-deps",
       "--no-build-isolation", "--target"]


@BOXES
def test_pip_builds_and_installs_with_the_project_s_cache(
        project: Path, env: dict[str, str], home: Path, warm: bool) -> None:
    sdist, wheel = _sdist(project), _wheel(project)
    before = tree(home)
    with Session.open(str(project), SETTINGS, env=env, warm=warm) as s:
        built = s.run([*PIP, "/tmp/a", str(sdist)], timeout=180)
        whl = s.run([*PIP, "/tmp/b", str(wheel)], timeout=120)
        got = s.run(["sh", "-c", "PYTHONPATH=/tmp/a:/tmp/b /usr/bin/python3 -c "
                     "'import hsdemo, hswheel; print(hsdemo.VALUE, hswheel.VALUE)'"])
    assert built.returncode == 0, out(built)
    assert whl.returncode == 0, out(whl)
    for r in (built, whl):
        assert b"cache has been disabled" not in r.stderr, out(r)
        assert b"Read-only file system" not in r.stderr, out(r)
    assert got.stdout == b"7 8\n"
    assert list((written(project, env, "pip") / "wheels").rglob("hsdemo-1.0-*.whl"))
    assert tree(home) == before


POISON = """
set -u
echo poisoned > "$npm_config_cache/_cacache/planted" && echo own-npm
echo poisoned > "$PIP_CACHE_DIR/planted" && echo own-pip
echo poisoned > "$HOME/.cargo/registry/planted" && echo own-cargo
for f in "$HOME/.npm/_cacache/index-v5/entry" "$HOME/.cache/pip/wheels/entry" \
         "$HOME/.npm/_cacache/planted" "$HOME/.cache/pip/planted"; do
  echo poisoned > "$f" 2>/dev/null && echo "wrote $f"
done
exit 0
"""


def test_a_poisoned_cache_stays_in_the_box_and_the_host_s_is_byte_identical(
        project: Path, env: dict[str, str], home: Path) -> None:
    host_cargo = home / ".cargo" / "registry"
    before = tree(home)
    with Session.open(str(project), SETTINGS, env=env) as s:
        (caches_of(project, env) / "npm" / "_cacache").mkdir(exist_ok=True)
        r = s.run(["sh", "-c", POISON])
    assert r.stdout == b"own-npm\nown-pip\nown-cargo\n", out(r)
    assert tree(home) == before
    assert not (host_cargo / "planted").exists()
    assert (written(project, env, "cargo-registry") / "planted").read_text() == "poisoned\n"
    assert (written(project, env, "pip") / "planted").read_text() == "poisoned\n"


def test_another_project_s_box_cannot_write_this_project_s_cache(
        tmp_path: Path, project: Path, env: dict[str, str]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with Session.open(str(project), SETTINGS, env=env) as s:
        s.run(["true"])
    theirs = caches_of(project, env)
    assert (theirs / "npm").is_dir()
    with Session.open(str(other), SETTINGS, env=env) as s:
        r = s.run(["sh", "-c", f"echo x > {theirs}/npm/planted || echo refused; "
                   "echo $npm_config_cache"])
    assert r.stdout.decode().splitlines() == [
        "refused", str(caches_of(other, env) / "npm")], out(r)
    assert not (theirs / "npm" / "planted").exists()


def test_the_caches_work_in_a_writable_home(
        project: Path, env: dict[str, str], home: Path) -> None:
    settings = SandboxSettings(hide_defaults=False, writable=(str(home),))
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", 'echo x > "$npm_config_cache/w" && echo x > "$UV_CACHE_DIR/w"'
                   ' && echo x > "$GOCACHE/w" && echo x > "$HOME/.cargo/registry/w" && '
                   'echo ok; echo x > "$HOME/.npm/w" 2>/dev/null || echo host-npm-read-only'])
    assert r.stdout == b"ok\nhost-npm-read-only\n", out(r)
    assert not (home / ".npm" / "w").exists()


def test_every_tool_s_cache_is_said_with_where_it_goes(
        project: Path, env: dict[str, str]) -> None:
    said = lines(str(project), env, env["HOME"])
    assert len(said) == len(TABLE)
    root = folder_for(str(project), env, env["HOME"])
    assert said[0] == f"cache npm: npm_config_cache={root}/npm"
    assert f"cache cargo (registry): {root}/cargo-registry, bound over ~/.cargo/registry" \
        in said
    assert any(s.startswith("cache pnpm (cache): not kept") for s in said)


def test_doctor_says_where_each_cache_goes(project: Path, env: dict[str, str]) -> None:
    cli = [sys.executable, "-I", "-m", "launchers", "doctor"]
    doc = subprocess.run([*cli, "--json"], capture_output=True, text=True, env=env,
                         cwd=project, check=False)
    caches = {c["tool"]: c["where"] for c in json.loads(doc.stdout)["caches"]}
    root = folder_for(str(project.resolve()), env, env["HOME"])
    assert caches["pip"] == f"PIP_CACHE_DIR={root}/pip"
    assert caches["go (modules)"] == f"GOMODCACHE={root}/go-mod"
    told = subprocess.run(cli, capture_output=True, text=True, env=env, cwd=project,
                          check=False)
    assert f"cache uv: UV_CACHE_DIR={root}/uv\n" in told.stderr, told.stderr


def test_a_gone_project_s_caches_go_at_another_project_s_first_session(
        tmp_path: Path, env: dict[str, str]) -> None:
    gone, kept, new = tmp_path / "gone", tmp_path / "kept", tmp_path / "new"
    for p in (gone, kept, new):
        p.mkdir()
    for p in (gone, kept):
        with Session.open(str(p), SETTINGS, env=env) as s:
            # Read-only folders, as go's module cache has.
            r = s.run(["sh", "-c", 'mkdir -p "$GOMODCACHE/m@v1" && touch "$GOMODCACHE/m@v1/f"'
                       ' && chmod -R a-w "$GOMODCACHE/m@v1"'])
            assert r.returncode == 0, out(r)
    theirs, mine = caches_of(gone, env), caches_of(kept, env)
    assert (theirs / "go-mod" / "m@v1" / "f").exists()
    gone.rmdir()
    with Session.open(str(new), SETTINGS, env=env) as s:
        s.run(["true"])
    assert Path(str(mine) + ".layered").is_dir()  # the host's caches laid under the box's
    assert not theirs.exists() and not Path(str(theirs) + ".project").exists()
    assert not Path(str(theirs) + ".layered").exists()
    assert (mine / "go-mod" / "m@v1" / "f").exists() and caches_of(new, env).is_dir()


def test_a_writable_data_folder_s_parent_lets_no_box_make_another_project_s_cache(
        project: Path, env: dict[str, str]) -> None:
    # ~/.local/share writable, with the toolkit's data folder in it read-only (and every
    # mount below that): the project's cache is not there, and is written; every other
    # project's stays read-only (a box that made another's would fill it before its
    # first session).
    share = Path(env["HOME"]) / ".local" / "share"
    share.mkdir(parents=True)
    caches = caches_of(project, env).parent
    settings = SandboxSettings(hide_defaults=False, writable=(str(share),))
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"mkdir {caches}/other-0123456789abcdef || echo refused; "
                   f"touch {caches}/x.project || echo refused; "
                   'echo x > "$npm_config_cache/mine" && echo mine'])
    assert r.stdout == b"refused\nrefused\nmine\n", out(r)
    assert (written(project, env, "npm") / "mine").read_text() == "x\n"
