"""Sessions at their edges: projects this user may not change or read, and the API used
without `with` or with a string. A clear line, never an internal error.

A repository whose git folder this user neither owns nor may write (another user's) has
protected names the session cannot make; the box, running as the same user, cannot make
them either, so the session runs without them. One this user owns but made read only is
refused: its owner, and so the box, could make the names after a chmod. A project this
user cannot list is refused with its cause. Root passes every permission check on the
host, so the root pass sees the session make and protect the names instead, and its
refusal of an unlisted project speaks of the mode bits: each is what that user gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.errors import PolicyError
from sandbox.session import Session

pytestmark = pytest.mark.isolation
ROOT = os.geteuid() == 0


def test_a_git_folder_made_read_only_by_its_owner_is_no_way_in(tmp_path: Path) -> None:
    """The owner of a mode-0555 ``.git`` (the box runs as that owner) could ``chmod u+w``
    it and make ``config.worktree`` with an fsmonitor: host git would run it. Root's
    session makes and covers the name (root writes there); a plain user's session cannot
    make it, so it is refused with the fix, never opened without the cover."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "extensions.worktreeConfig", "true"],
                   check=True)
    git = repo / ".git"
    os.chmod(git, 0o555)
    attack = ("chmod u+w .git; printf '[core]\\n\\tfsmonitor = /bin/false\\n' > "
              ".git/config.worktree 2>&1; echo done")
    try:
        if ROOT:
            with Session.open(str(repo)) as s:
                r = s.run(["sh", "-c", attack])
            assert r.stdout.endswith(b"done\n"), r.stderr
            assert b"Read-only file system" in r.stderr
        else:
            with pytest.raises(PolicyError) as caught, Session.open(str(repo)):
                pass
            assert str(caught.value) == (
                f"{git}/config.worktree is missing and its folder {git} is not writable, "
                "so the session cannot cover it, while the box could make it after a "
                f"chmod; make the folder writable (chmod u+w {git}) and try again")
        made = (git / "config.worktree").exists()
    finally:
        os.chmod(git, 0o755)
    assert not made


def test_a_project_we_cannot_list_is_refused_with_its_cause(tmp_path: Path) -> None:
    project = tmp_path / "closed"
    project.mkdir()
    os.chmod(project, 0o000)
    try:
        if ROOT:
            # Root's override of the mode bits does not hold in the box (no capability).
            with pytest.raises(PolicyError) as caught, Session.open(str(project)):
                pass
            assert str(caught.value) == (
                f"the project {project} has mode 0000: the box runs without root's "
                "override of the mode bits, so it could not list or enter it; give it "
                "read and search (chmod u+rx)")
        else:
            with pytest.raises(PolicyError) as caught, Session.open(str(project)):
                pass
            assert str(caught.value) == (
                f"the project {project} cannot be read by you (uid {os.getuid()}): "
                "Permission denied; run as a user who may read it, or change its mode")
            r = subprocess.run([sys.executable, "-I", "-m", "launchers", "run", "--project",
                                str(project), "--", "/bin/true"], capture_output=True,
                               text=True, cwd=tmp_path)
            assert r.returncode == 125
            assert "internal error" not in r.stderr
            assert "cannot be read by you" in r.stderr
    finally:
        os.chmod(project, 0o755)


def test_the_session_says_how_to_use_it_without_with(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    opening = Session.open(str(project))
    with pytest.raises(AttributeError, match=r"write `with Session.open\(...\) as session:` "
                                             r"and call session.run inside"):
        opening.run(["/bin/true"])
    session = opening.start()
    try:
        assert session.run(["/bin/echo", "hi"]).stdout == b"hi\n"
        with pytest.raises(TypeError, match=r"a list of words, such as \['ls -l'\]"):
            session.run("ls -l")
        tmp = session.policy.private_tmp
        assert os.path.isdir(tmp)
    finally:
        opening.end()
    assert not os.path.exists(tmp)
