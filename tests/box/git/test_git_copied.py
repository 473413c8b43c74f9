"""A submodule whose objects git copied across the box's pinned .git is said once, its
name escaped; git's own read-only objects, and modules there before, are not
(sandbox/git/copied.py). The real git run is in tests/workloads/test_git.py."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.git.copied import Copies


def module(git: Path, name: str, mode: int) -> None:
    obj = git / "modules" / name / "objects" / "ab" / "cdef0123"
    obj.parent.mkdir(parents=True)
    obj.write_bytes(b"x")
    os.chmod(obj, mode)


def test_a_new_module_with_copied_objects_is_said_once_and_its_name_escaped(
        tmp_path: Path) -> None:
    git = tmp_path / ".git"
    module(git, "before", 0o644)  # there at the open: not this session's
    copies = Copies(str(git))
    module(git, "linked", 0o444)
    module(git, "lib\x1b[2J", 0o644)
    said = copies.look()
    assert len(said) == 1, said
    assert said[0].startswith("git copied the objects of the submodule lib\\x1b[2J into ")
    assert "\x1b" not in said[0]
    assert copies.look() == []


def test_no_modules_folder_is_nothing_to_say(tmp_path: Path) -> None:
    assert Copies(str(tmp_path / ".git")).look() == []
