"""git's config writes in the box: the ordinary ones land in the project's config after
the run (and the next run sees them); every key that can make git run a program is
refused, said in the session's warnings, and host git run for real afterwards runs
nothing of the box's. Warm and per-run sessions, and the CLI's run. Run as root and
again as a plain user.

A plain user's box is staged (:mod:`sandbox.linux.stage`) only from many binds on,
and only the stage can show the box the link to its copy: these tests stage every box.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from helpers.gitworld import GIT_ID, SETTINGS, World, explain, host_git_runs_nothing, w

from sandbox.linux import stage
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]
__all__ = ["w"]  # the fixture, imported
BOTH = pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])


@pytest.fixture(autouse=True)
def staged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage, "STAGE_AT", 0)


def _session(w: World, warm: bool) -> AbstractContextManager[Session]:
    return Session.open(str(w.project), SETTINGS, env=w.env, warm=warm)


def listed(w: World) -> str:
    return subprocess.run(["git", "config", "--file", str(w.project / ".git" / "config"),
                           "--list"], capture_output=True, text=True, check=True).stdout


def _lib(w: World) -> Path:
    lib = w.base / "lib"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True, env=w.env)
    assert w.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=lib).returncode == 0
    return lib


ORDINARY = (
    "git config user.name Boxed && git config user.email boxed@example.invalid && "
    "git remote add origin https://example.invalid/x.git && "
    "git branch topic && git branch --set-upstream-to=main topic && "
    "git config branch.topic.description 'a topic' && "
    "git -c protocol.file.allow=always submodule add -q {lib} lib")


@BOTH
def test_ordinary_config_writes_land_in_the_projects_config(w: World, warm: bool) -> None:
    lib = _lib(w)
    with _session(w, warm) as s:
        r = s.run(["sh", "-c", ORDINARY.format(lib=lib)])
        assert r.ok, explain(r)
        real = listed(w)
        for line in ("user.name=Boxed", "remote.origin.url=https://example.invalid/x.git",
                     "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*",
                     "branch.topic.remote=.", "branch.topic.merge=refs/heads/main",
                     "branch.topic.description=a topic", f"submodule.lib.url={lib}",
                     "submodule.lib.active=true"):
            assert line in real.splitlines(), real
        r = s.run(["sh", "-c", "git config user.name && git branch -D -q topic && "
                               "git remote remove origin"])
        assert r.ok and r.stdout == b"Boxed\n", explain(r)
        real = listed(w)
        assert "branch.topic" not in real and "remote.origin" not in real, real
        assert "user.name=Boxed" in real.splitlines()
    assert '[branch "topic"]' not in (w.project / ".git" / "config").read_text()
    assert [x for x in s.warnings if "git's config" in x] == []


def test_a_change_made_on_the_host_during_the_session_is_kept(w: World) -> None:
    with _session(w, True) as s:
        assert w.git("config", "user.email", "host@example.invalid").returncode == 0
        r = s.run(["git", "config", "user.name", "Boxed"])
        assert r.ok, explain(r)
        r = s.run(["git", "config", "user.email"])
        assert r.stdout == b"host@example.invalid\n", explain(r)
    assert {"user.name=Boxed", "user.email=host@example.invalid"} <= set(listed(w).splitlines())


# (what the box sets, the key said refused, what the host then runs to trigger it)
ATTACKS = {
    "core.fsmonitor": ("git config core.fsmonitor {p}/evil.sh", "core.fsmonitor",
                       ["status"]),
    "core.hooksPath": ("mkdir -p h && cp evil.sh h/pre-commit && git config core.hooksPath "
                       "{p}/h", "core.hookspath", ["commit", "-q", "--allow-empty", "-m", "x"]),
    "core.sshCommand": ("git config core.sshCommand {p}/evil.sh && git remote add s "
                        "ssh://example.invalid/x", "core.sshcommand", ["fetch", "-q", "s"]),
    "core.pager": ("git config core.pager {p}/evil.sh", "core.pager", ["-p", "log"]),
    "credential.helper": ("git config credential.helper '!{p}/evil.sh'", "credential.helper",
                          ["credential", "fill"]),
    "filter.x.clean": ("git config filter.x.clean {p}/evil.sh && echo '* filter=x' > "
                       ".gitattributes && echo a > f", "filter.x.clean", ["add", "f"]),
    "diff.x.textconv": ("git config diff.x.textconv {p}/evil.sh && echo '*.t diff=x' > "
                        ".gitattributes && echo changed > a.t", "diff.x.textconv",
                        ["diff"]),
    "include.path": ("printf '[core]\\n\\tfsmonitor = {p}/evil.sh\\n' > evil.cfg && "
                     "git config include.path {p}/evil.cfg", "include.path", ["status"]),
    "includeIf": ("printf '[core]\\n\\tfsmonitor = {p}/evil.sh\\n' > evil.cfg && "
                  "git config includeIf.gitdir:/.path {p}/evil.cfg", "includeif.gitdir:/.path",
                  ["status"]),
    "alias": ("git config alias.st '!{p}/evil.sh'", "alias.st", ["st"]),
    "remote.x.uploadpack": ("git remote add x {lib} && git config remote.x.uploadpack "
                            "{p}/evil.sh", "remote.x.uploadpack", ["fetch", "-q", "x"]),
    "protocol.ext.allow": ("git config protocol.ext.allow always && git remote add e "
                           "'ext::sh -c {p}/evil.sh'", "protocol.ext.allow",
                           ["fetch", "-q", "e"]),
    "an ext:: url": ("git remote add e 'ext::sh -c {p}/evil.sh'", "remote.e.url",
                     ["-c", "protocol.ext.allow=always", "fetch", "-q", "e"]),
    "submodule.x.update": ("git config submodule.lib.update '!{p}/evil.sh'",
                           "submodule.lib.update", ["submodule", "-q", "update", "--remote"]),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_key_that_runs_a_program_is_refused_and_said(w: World, name: str) -> None:
    script, key, trigger = ATTACKS[name]
    lib = _lib(w)
    (w.project / "a.t").write_text("a\n")
    assert w.git("add", "a.t").returncode == 0
    assert w.git("commit", "-qm", "a").returncode == 0
    if name == "submodule.x.update":
        assert w.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib),
                     "lib").returncode == 0
        assert w.git("commit", "-qm", "lib").returncode == 0
    with _session(w, name != "alias") as s:
        r = s.run(["sh", "-c", f"{w.evil()} && " + script.format(p=w.project, lib=lib)])
        assert r.ok, explain(r)  # the box's own copy took it
    done = subprocess.run(["git", *GIT_ID, *trigger], cwd=w.project, env=w.env,
                          input="protocol=https\nhost=example.invalid\n\n",
                          capture_output=True, text=True, timeout=60)
    assert not w.marker.exists(), f"host git ran the box's program: {done.stderr}"
    host_git_runs_nothing(w)
    assert key not in listed(w).lower(), listed(w)
    assert any(f"{key} " in x.lower() and "refused" in x for x in s.warnings), s.warnings


def test_the_cli_run_writes_the_config_too(w: World) -> None:
    if os.geteuid() != 0:
        pytest.skip("the CLI stages a plain user's box only from many binds on")
    env = {**w.env, "HARNESS_HOME": str(w.base / "harness-home")}
    done = subprocess.run([sys.executable, "-m", "launchers", "run", "--", "sh", "-c",
                           "git config user.name Boxed && git config core.pager evil"],
                          cwd=w.project, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "user.name=Boxed" in listed(w).splitlines()
    assert "core.pager" not in listed(w)
    assert "core.pager" in done.stderr
