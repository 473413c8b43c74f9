"""A module's ``config`` without ``core.worktree``, edited here when git wrote it plainly.

Each case is checked against the host's git doing the same edit: the two files must say
the same to ``git config --list``. A file in any other form is left to git (None).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox.git.views import without_worktree

WRITTEN_BY_GIT = b"""[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
\tworktree = ../../../m1
[remote "origin"]
\turl = /srv/subs/m1
\tfetch = +refs/heads/*:refs/remotes/origin/*
[branch "master"]
\tremote = origin
\tmerge = refs/heads/master
"""

PLAIN = [
    WRITTEN_BY_GIT,
    WRITTEN_BY_GIT.replace(b"\tworktree", b"\tWorkTree"),
    WRITTEN_BY_GIT.replace(b"[core]", b"[Core]"),
    WRITTEN_BY_GIT + b"[core]\n\tworktree = ../../../again\n",
    WRITTEN_BY_GIT.replace(b'[branch "master"]', b'[core "sub"]') + b"\tworktree = kept\n",
    b"[core]\n\tbare = false\n",
    b"",
    b"[core]\n\n\tworktree = x\n\n[user]\n\tname = A B\n",
    b"[core.sub]\n\tworktree = x\n",
]

OTHER = [
    b'[core]\n\tworktree = "../../m1"\n',
    b"[core]\n\tworktree = a\\\n b\n",
    b"[core]\n\tworktree = x ; a comment\n",
    b"# a comment\n[core]\n\tworktree = x\n",
    b"[core]\n\tworktree=x\n",
    b"\tworktree = x\n",
    b"[core] worktree = x\n",
    b"[include]\n\tpath = \"x\"\n",
]


def _listed(path: Path) -> str:
    return subprocess.run(["git", "config", "--file", str(path), "--list"],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("data", PLAIN)
def test_a_plain_config_loses_its_worktree_as_git_would_take_it(tmp_path: Path,
                                                                data: bytes) -> None:
    ours = without_worktree(data)
    assert ours is not None
    by_git = tmp_path / "git"
    by_git.write_bytes(data)
    subprocess.run(["git", "config", "--file", str(by_git), "--unset-all", "core.worktree"],
                   capture_output=True, check=False)  # 5: there was none to unset
    mine = tmp_path / "mine"
    mine.write_bytes(ours)
    assert _listed(mine) == _listed(by_git)
    assert "core.worktree=" not in _listed(mine)


@pytest.mark.parametrize("data", OTHER)
def test_any_other_form_is_left_to_git(data: bytes) -> None:
    assert without_worktree(data) is None


def test_views_go_to_a_folder_of_this_users_alone_on_dev_shm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from sandbox.git.views import views_folder
    from sandbox.process import made

    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(made, "SHM", str(shm))
    tmp = str(tmp_path / "root" / "session-1-abc")
    mine = shm / f"harness-sandbox-{os.getuid()}"
    assert views_folder(tmp, ()) == str(mine / "session-1-abc.views")
    assert mine.stat().st_mode & 0o777 == 0o700
    # A folder the box writes holds it, or it is not this user's alone: beside tmp.
    assert views_folder(tmp, (str(shm),)) == tmp + ".views"
    mine.chmod(0o755)
    assert views_folder(tmp, ()) == tmp + ".views"
    mine.rmdir()
    mine.symlink_to(tmp_path)
    assert views_folder(tmp, ()) == tmp + ".views"
    monkeypatch.setattr(made, "SHM", str(tmp_path / "none"))
    assert views_folder(tmp, ()) == tmp + ".views"
