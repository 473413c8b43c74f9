"""The gitlinks of an index, read without git, against what git itself lists.

Every index here is written by the real git: versions 2, 3 (an intent-to-add entry
needs the extended flags) and 4 (prefix-compressed paths), SHA-1 and SHA-256
repositories. A split index, a torn file and garbage give None (the report then says it
could not look).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox.git.index import gitlinks

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
ZERO = {"sha1": "1" * 40, "sha256": "2" * 64}


def _repo(tmp_path: Path, fmt: str = "sha1") -> Path:
    repo = tmp_path / "repo"
    subprocess.run([*GIT, "init", "-q", f"--object-format={fmt}", str(repo)], check=True)
    for name in ("a.txt", "dir/b.txt", "dir/deeper/c.txt", "z.txt"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    subprocess.run([*GIT, "-C", str(repo), "add", "."], check=True)
    for path in ("dir/linked", "vendor/lib", "zz-last"):
        subprocess.run([*GIT, "-C", str(repo), "update-index", "--add", "--cacheinfo",
                        f"160000,{ZERO[fmt]},{path}"], check=True)
    return repo


def _by_git(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "--stage", "-z"],
                         capture_output=True, check=True).stdout
    return [os.path.join(repo, os.fsdecode(i.partition(b"\t")[2]))
            for i in out.split(b"\0") if i.startswith(b"160000 ")]


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_gitlinks_are_what_git_lists(tmp_path: Path, fmt: str, version: str) -> None:
    repo = _repo(tmp_path, fmt)
    if version == "3":
        (repo / "new.txt").write_text("n")
        subprocess.run([*GIT, "-C", str(repo), "add", "-N", "new.txt"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "update-index", "--index-version", version],
                   check=True)
    got = gitlinks(str(repo / ".git" / "index"), str(repo))
    assert got == _by_git(repo)
    assert [os.path.basename(p) for p in got or []] == ["linked", "lib", "zz-last"]


def test_no_index_is_no_gitlink(tmp_path: Path) -> None:
    assert gitlinks(str(tmp_path / "index"), str(tmp_path)) == []


def test_a_split_index_is_not_guessed_at(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    subprocess.run([*GIT, "-C", str(repo), "update-index", "--split-index"], check=True)
    assert gitlinks(str(repo / ".git" / "index"), str(repo)) is None


@pytest.mark.parametrize("damage", ["torn", "garbage", "bad checksum", "a link"])
def test_a_damaged_index_is_not_guessed_at(tmp_path: Path, damage: str) -> None:
    repo = _repo(tmp_path)
    index = repo / ".git" / "index"
    data = index.read_bytes()
    if damage == "torn":
        index.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        index.write_bytes(b"DIRC" + os.urandom(200))
    elif damage == "bad checksum":
        index.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:
        real = tmp_path / "elsewhere"
        real.write_bytes(data)
        index.unlink()
        index.symlink_to(real)
    assert gitlinks(str(index), str(repo)) is None
