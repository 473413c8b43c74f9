"""A project in a git repository under /var/tmp (outside /tmp, so the box sees the
rest read-only), its own HOME for host git, and the attacker's marker: what the git
escape tests share."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

SETTINGS = SandboxSettings(hide_defaults=False)
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@dataclass
class World:
    base: Path  # outside /tmp: the box sees it read-only
    home: Path
    project: Path
    marker: Path
    env: dict[str, str]

    def git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *GIT_ID, *args], cwd=cwd or self.project, env=self.env,
                              capture_output=True, text=True)

    def session(self, project: Path | None = None,
                settings: SandboxSettings = SETTINGS) -> AbstractContextManager[Session]:
        return Session.open(str(project or self.project), settings, env=self.env)

    def box(self, script: str, project: Path | None = None) -> tuple[RunResult, list[str]]:
        with self.session(project) as s:
            r = s.run(["sh", "-c", script])
        return r, s.warnings

    def evil(self) -> str:
        """A script in the project that leaves the marker: what the agent wants run."""
        return (f"printf '#!/bin/sh\\ntouch {self.marker}\\n' > evil.sh && chmod +x evil.sh")

    def add_submodule(self) -> Path:
        """A repository ``lib`` beside the project, with one commit, added to the project
        as the submodule ``lib`` and committed; the repository's path."""
        lib = self.base / "lib"
        subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True, env=self.env)
        assert self.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=lib).returncode == 0
        assert self.git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
                        str(lib), "lib").returncode == 0
        assert self.git("commit", "-qm", "add lib").returncode == 0
        return lib

    def link_hooks(self) -> Path:
        """The project's ``.git/hooks`` made a link to a folder of the user's outside it."""
        hooks = self.base / "githooks"
        hooks.mkdir()
        shutil.rmtree(self.project / ".git" / "hooks")
        (self.project / ".git" / "hooks").symlink_to(hooks)
        return hooks

    def staged_gitlink(self, name: str) -> str:
        """The warning for a repository ``name`` made in the box, staged as a gitlink, whose
        ``core.fsmonitor`` is the project's ``evil.sh``."""
        return (f"the repository {self.project}/{name} inside the project was made during the "
                f"session and staged as a gitlink, with core.fsmonitor = {self.project}/evil.sh, "
                f"and git run on the host in {self.project} would use it; check it before you do")


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-400:]!r} err={r.stderr[-600:]!r}"


@pytest.fixture
def w() -> Iterator[World]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-git-")))
    try:
        home = base / "home"
        home.mkdir()
        (home / ".profile").write_text("# profile\n")
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home),
               "GIT_CONFIG_NOSYSTEM": "1"}
        project = base / "project"
        world = World(base, home, project, base / "MARKER", env)
        subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True, env=env)
        assert world.git("commit", "-q", "--allow-empty", "-m", "first").returncode == 0
        yield world
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_git_runs_nothing(w: World, cwd: Path | None = None) -> None:
    w.git("status", cwd=cwd)
    w.git("commit", "-q", "--allow-empty", "-m", "host", cwd=cwd)
    assert not w.marker.exists(), "host git ran the box's program"


def moved_out(w: World, warnings: list[str], path: Path) -> None:
    """What the box made at ``path`` (a protected name missing at the open: nothing held
    it) is gone from the project, kept in the user's data folder, and said."""
    assert not os.path.lexists(path), f"{path} is still there"
    said = [x for x in warnings if x.startswith(f"the box made {path}, which host ")]
    assert said and "it was moved out to " in said[0], warnings
    kept = said[0].split("it was moved out to ", 1)[1].split(";", 1)[0]
    assert kept.startswith(os.path.join(w.env["HOME"], ".local/share/harness/moved/")), said
    assert os.path.lexists(kept), said


def home_is_read_only(w: World, project: Path | None = None) -> None:
    r, _ = w.box(f"echo x >> {w.home}/.profile; echo x > {w.home}/.bashrc", project)
    assert r.returncode != 0, explain(r)
    assert (w.home / ".profile").read_text() == "# profile\n"
    assert not (w.home / ".bashrc").exists()
