"""Protected names are protected files: a second name made earlier by a hard link
refuses the session, since the box could rewrite the protected file through it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)


def test_a_hard_link_to_the_git_config_refuses_the_session(project: Path,
                                                            outside: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    config = project / ".git" / "config"
    os.link(config, project / "notes.txt")
    with pytest.raises(PolicyError) as info, Session.open(str(project), SETTINGS) as s:
        # Without the refusal: the box rewrites .git/config through the other name...
        marker = outside / "ran"
        s.run(["sh", "-c", f"printf '[core]\\n\\tfsmonitor = \"touch {marker}\"\\n' "
                           ">> notes.txt"])
        # ...and host git runs it.
        subprocess.run(["git", "status"], cwd=project, capture_output=True, check=False)
        assert not marker.exists()
    assert str(info.value) == (
        f"{config} has 2 names (hard links): through another one the box could rewrite "
        "it while it is read-only here; make it a file of its own and check it: "
        f"cp -p {config} {config}.own && mv {config}.own {config}")


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_the_refusal_ends_the_box_that_was_starting(project: Path, warm: bool) -> None:
    """Hard links are looked for while the warm box starts: a refusal ends the box
    (no bwrap left running, no descriptor of it left here) and the session's temp
    folder, warm or cold."""
    from helpers.procs import fds_settle

    from sandbox.policy import private_tmp_root

    subprocess.run(["git", "init", "-q", str(project)], check=True)
    root = Path(private_tmp_root())
    before = set(root.iterdir()) if root.exists() else set()
    with Session.open(str(project), SETTINGS, warm=warm):  # the process's own, made once
        pass
    fds = len(os.listdir("/proc/self/fd"))
    os.link(project / ".git" / "config", project / "notes.txt")
    with pytest.raises(PolicyError, match="has 2 names"), \
            Session.open(str(project), SETTINGS, warm=warm):
        pass
    assert fds_settle(fds, seconds=3.0) <= fds
    assert [p for p in psutil.Process().children(recursive=True) if p.name() == "bwrap"] == []
    mine = f"session-{os.getpid()}-"
    assert [p for p in set(root.iterdir()) - before if p.name.startswith(mine)] == []


@pytest.mark.parametrize("where", ["pre-commit", "deeper/pre-push"])
def test_a_hard_link_to_a_file_in_a_protected_folder_refuses_the_session(
        project: Path, where: str) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    hook = project / ".git" / "hooks" / where
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\n")
    (project / ".git" / "hooks" / "elsewhere").symlink_to("/etc/passwd")  # not followed
    os.link(hook, project / "notes.txt")
    with pytest.raises(PolicyError, match="has 2 names"), \
            Session.open(str(project), SETTINGS):
        pass
    os.unlink(project / "notes.txt")
    with Session.open(str(project), SETTINGS) as s:
        assert s.run(["true"]).returncode == 0


def test_a_hard_link_to_a_trusted_openharness_file_refuses_the_session(
        project: Path) -> None:
    (project / ".oh").mkdir()
    (project / ".oh" / "config.yaml").write_text("hooks: {}\n")
    os.link(project / ".oh" / "config.yaml", project / "docs.txt")
    with pytest.raises(PolicyError, match=r"config\.yaml has 2 names"), \
            Session.open(str(project), SETTINGS):
        pass


def test_the_fix_the_refusal_names_works(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    config = project / ".git" / "config"
    os.link(config, project / "notes.txt")
    subprocess.run(["sh", "-c", f"cp -p {config} {config}.own && mv {config}.own {config}"],
                   check=True)
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", "echo '[core]' >> notes.txt; git status >/dev/null"])
        assert r.returncode == 0, r
    assert b"fsmonitor" not in config.read_bytes()


def test_a_folder_that_cannot_be_looked_at_refuses_rather_than_passes(
        tmp_path: Path) -> None:
    """The check cannot read a protected folder (here: no descriptor left, as a box
    could bring about in a harness holding sessions side by side): the session is
    refused, not opened unchecked. A name that is gone needs no check."""
    hooks = tmp_path / "hooks"
    (hooks / "deeper").mkdir(parents=True)
    script = f"""
import os, resource
import errno
import sandbox.text  # imported, as in a harness with a session open
from sandbox.session import leftovers
from sandbox.errors import PolicyError
leftovers.refuse_linked([{str(tmp_path / "gone")!r}])
resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
held = []
try:
    while True:
        held.append(os.open("/", os.O_RDONLY))
except OSError:
    pass
try:
    leftovers.refuse_linked([{str(hooks)!r}])
    print("passed")
except PolicyError as err:
    print(err)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       check=False)
    assert r.stdout == (f"{hooks} could not be checked for hard links (Too many open "
                        "files), so the session is not opened; make it readable to you "
                        "and try again\n"), r.stderr
