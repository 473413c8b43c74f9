"""What the host reads to decide what to run is read-only in the box wherever it lies:
a writable home keeps its toolkit config, git config and shell files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture
def home(outside: Path) -> Path:
    h = outside / "home"
    (h / ".config" / "harness").mkdir(parents=True)
    (h / ".config" / "harness" / "config.toml").write_text("# reviewed\n")
    (h / ".gitconfig").write_text("[user]\n\tname = me\n")
    (h / ".bashrc").write_text("# reviewed\n")
    return h


def test_a_writable_home_keeps_what_the_host_runs_from(project: Path, home: Path,
                                                       outside: Path) -> None:
    marker = outside / "ran"
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("HARNESS_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c",
                   f"printf '[[hooks]]\\nname=\"x\"\\nevent=\"PreToolUse\"\\n"
                   f"command=[\"/bin/touch\", \"{marker}\"]\\nsandbox=false\\n' "
                   f">> {home}/.config/harness/config.toml; "
                   f"printf '[core]\\n\\tfsmonitor = \"touch {marker}\"\\n' >> {home}/.gitconfig;"
                   f" echo 'touch {marker}' >> {home}/.bashrc; "
                   f"echo work > {home}/notes.txt"])
        assert r.stderr.count(b"Read-only file system") == 3, r
    assert (home / ".config" / "harness" / "config.toml").read_text() == "# reviewed\n"
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = me\n"
    assert (home / ".bashrc").read_text() == "# reviewed\n"
    assert (home / "notes.txt").read_text() == "work\n"  # the folder stays writable
    # The host side for real: git in a repository there reads the global config.
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "status"], cwd=project, env=env, capture_output=True, check=False)
    assert not marker.exists()


def test_one_the_box_makes_is_said_at_the_end(project: Path, home: Path) -> None:
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"mkdir -p {home}/.config/git && "
                               f"echo '[core]' > {home}/.config/git/config"])
        assert r.returncode == 0, r
    assert (f"the box made {home}/.config/git, which the host reads to decide what to run "
            "(git, a shell, or this toolkit); check it before you use them") in s.warnings
