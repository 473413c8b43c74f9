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


@pytest.mark.parametrize("close", ["0555", "0000"])
def test_a_git_folder_made_read_only_by_its_owner_is_no_way_in(tmp_path: Path,
                                                               close: str) -> None:
    """The owner of a mode-0555 ``.git`` (the box runs as that owner) can ``chmod u+w``
    it, make ``config.worktree`` with an fsmonitor, and close the folder again (to its
    owner too, with 0000): host git would run it. Nothing covers the missing name; what
    the box made is moved out after the run all the same, the folder opened to its
    owner for the move and its mode put back."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "extensions.worktreeConfig", "true"],
                   check=True)
    git = repo / ".git"
    os.chmod(git, 0o555)
    attack = ("chmod u+w .git; printf '[core]\\n\\tfsmonitor = /bin/false\\n' > "
              f".git/config.worktree; chmod {close} .git; echo done")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    try:
        with Session.open(str(repo), env=env) as s:
            r = s.run(["sh", "-c", attack])
            assert r.stdout.endswith(b"done\n"), r.stderr
            assert oct(os.lstat(git).st_mode & 0o777) == oct(int(close, 8))
            os.chmod(git, 0o755)
            made = (git / "config.worktree").exists()
    finally:
        os.chmod(git, 0o755)
    assert not made
    assert any(w.startswith(f"the box made {git}/config.worktree,") for w in s.warnings), \
        s.warnings
    assert list((tmp_path / "data").glob("harness/moved/*/.git/config.worktree"))


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


def test_a_session_started_from_an_opening_it_dropped_stays_open(tmp_path: Path) -> None:
    """``session = Session.open(...).start()``, as the error above suggests: the opening
    is dropped at once, and collected it would end the session under its caller (its
    private folder removed, the box's next run refused)."""
    import gc

    project = tmp_path / "p"
    project.mkdir()
    session = Session.open(str(project)).start()
    try:
        gc.collect()
        assert os.path.isdir(session.policy.private_tmp)
        assert session.run(["/bin/echo", "hi"]).stdout == b"hi\n"
    finally:
        assert session._opening is not None
        session._opening.end()
    assert not os.path.exists(session.policy.private_tmp)
