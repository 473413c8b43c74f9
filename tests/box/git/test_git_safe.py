"""The toolkit's own git runs nothing the agent wrote.

The box makes a repository where the project was not one and sets ``core.fsmonitor``
(and other program-running keys) to a script that writes a marker where only the host
can write. Then the toolkit's own host steps run for real -- the session's end report
and the next session's open, which both ask host git about the project -- and no marker
may appear. Run as root and as a plain user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.git import safe as gitsafe
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)
# Keys the box sets in the repository it made, each to the marker script.
KEYS = ("core.fsmonitor", "core.pager", "core.editor", "diff.external", "core.sshCommand",
        "credential.helper", "gpg.program", "core.askPass", "sequence.editor")


def plant(project: Path, marker: Path) -> list[str]:
    """The commands the agent runs in the box: a repository, an index, the keys."""
    script = project / ".hs-hook.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\n")
    script.chmod(0o755)
    lines = ["git init -q .", "git add -A", "git -c core.fsmonitor=false add -A"]
    lines += [f"git config {k} {script}" for k in KEYS]
    lines += ["git config core.hooksPath .hooks", "mkdir -p .hooks",
              f"cp {script} .hooks/post-index-change", f"cp {script} .hooks/pre-commit"]
    return ["sh", "-c", "; ".join(lines)]


def test_the_end_report_and_the_next_open_run_no_program_of_the_box(
        project: Path, outside: Path) -> None:
    marker = outside / "ran-on-the-host"
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(plant(project, marker))
        assert r.returncode == 0, r
    assert (project / ".git" / "index").exists()
    assert not marker.exists(), marker.read_text()
    # The next session asks host git about the repository the box made.
    with Session.open(str(project), SETTINGS) as s:
        assert s.run(["true"]).returncode == 0
    assert not marker.exists(), marker.read_text()


def test_host_git_with_the_same_config_would_have_run_it(project: Path, outside: Path) -> None:
    """The attack is real: plain host git in that repository runs the agent's script."""
    marker = outside / "ran-on-the-host"
    with Session.open(str(project), SETTINGS) as s:
        assert s.run(plant(project, marker)).returncode == 0
    subprocess.run(["git", "ls-files", "--stage"], cwd=project, capture_output=True,
                   check=False)
    assert marker.exists()


def test_every_neutral_key_is_accepted_by_git_and_is_not_read_back_as_the_users(
        project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    git = shutil.which("git")
    assert git is not None
    for args in (["config", "--show-origin", "-z", "--list"], ["ls-files", "--stage", "-z"],
                 ["rev-parse", "--path-format=absolute", "--git-path", "hooks"]):
        done = subprocess.run(gitsafe.argv(git, args), cwd=project, capture_output=True,
                              env={**os.environ, "LC_ALL": "C"})
        assert done.returncode == 0, (args, done.stderr)
    from sandbox.git.config import ask_project

    found = ask_project(git, str(project), dict(os.environ))
    assert not [e for e in found.entries if (e.key, e.value) in
                {(n.key.lower(), n.value) for n in gitsafe.NEUTRAL}]
    assert found.hooks == str(project / ".git" / "hooks")


def test_git_config_from_the_environment_is_kept_whole_and_honoured(
        project: Path, outside: Path) -> None:
    """GIT_CONFIG_COUNT with its KEY/VALUE pairs in the harness's environment: the session
    opens (git is given the whole set), and the relative core.hooksPath it names is what
    the box must not write."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "githooks").mkdir()
    env = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath",
           "GIT_CONFIG_VALUE_0": "githooks"}
    with Session.open(str(project), SETTINGS, env=env) as s:
        r = s.run(["sh", "-c", "echo 'touch /x' > githooks/pre-commit"])
    assert r.returncode != 0, r
    assert b"Read-only file system" in r.stderr, r
    assert not (project / "githooks" / "pre-commit").exists()
