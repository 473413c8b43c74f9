"""A session's bookkeeping cannot be turned against the user.

Manifests in the private root tell the next session what a dead one made. One forged by
an earlier box (when it could write there) named any folder of the user's as its "temp
folder", and the sweep removed it. Now a manifest removes only the folder its own name
gives, and a session whose private root the box could write is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.policy import private_tmp_root
from sandbox.process.made import own_tmp
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

DEAD = 4_000_000  # above the kernel's pid_max: never a live process


def test_a_forged_manifest_cannot_make_the_sweep_remove_a_users_folder(
        project: Path, outside: Path) -> None:
    victim = outside / "work-of-a-year"
    victim.mkdir()
    (victim / "thesis.tex").write_text("precious\n")
    root = private_tmp_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    forged = Path(root) / f"session-{DEAD}-forged.made"
    forged.write_text(json.dumps({"pid": DEAD, "start": "1", "tmp": str(victim),
                                  "made": []}))
    try:
        # The next session's open sweeps what dead sessions left, for real.
        with Session.open(str(project), SandboxSettings(hide_defaults=False)) as s:
            assert s.run(["true"]).returncode == 0
        assert (victim / "thesis.tex").read_text() == "precious\n"
        assert not forged.exists()  # the forged manifest itself is cleared
    finally:
        forged.unlink(missing_ok=True)


def test_a_manifest_names_only_the_folder_beside_it() -> None:
    assert own_tmp("/r/session-12-abc.made", 12) == "/r/session-12-abc"
    assert own_tmp("/r/session-12-abc.made", 13) == ""
    assert own_tmp("/r/other.made", 12) == ""
    assert own_tmp("/r/session-12-.made", 12) == ""


def test_a_half_written_manifest_of_a_gone_session_is_cleared(project: Path) -> None:
    root = private_tmp_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    part = Path(root) / f"session-{DEAD}-x.made.part"
    part.write_text("")
    try:
        with Session.open(str(project), SandboxSettings(hide_defaults=False)):
            pass
        assert not part.exists()
    finally:
        part.unlink(missing_ok=True)


def test_a_writable_folder_holding_the_private_root_refuses_the_session(
        project: Path) -> None:
    tmp = os.path.dirname(os.path.realpath(private_tmp_root()))
    with pytest.raises(PolicyError) as info, Session.open(
            str(project), SandboxSettings(writable=(tmp,), hide_defaults=False)):
        pass
    assert str(info.value) == (
        f"the private temp root {os.path.realpath(private_tmp_root())} lies in {tmp}, "
        "which the box can write: a boxed command could forge the sessions' records; "
        "set TMPDIR to a folder outside it, or remove that entry from [sandbox] writable")


def test_tmpdir_inside_the_project_refuses_the_session(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = project / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))
    with pytest.raises(PolicyError, match=r"lies in .*which the box can write"), \
            Session.open(str(project), SandboxSettings(hide_defaults=False)):
        pass
    assert not any(inside.iterdir())  # nothing was made there


def test_cleaning_up_removes_only_what_is_still_as_made(tmp_path: Path) -> None:
    """Names in one folder and in several, a folder made for them, a file changed since,
    and a folder that is a link now: only what is still as the session made it goes,
    and nothing through a link."""
    from sandbox.process.made import clean_session

    root = tmp_path / "repo"
    for d in ("a", "b"):
        (root / d).mkdir(parents=True)
    made: list[tuple[str, str, bytes]] = [
        ("a", "dir", b""), ("a/x", "file", b".\n"), ("a/y", "file", b""),
        ("b/x", "file", b".\n"), ("b/changed", "file", b""), ("new", "dir", b""),
        ("new/z", "file", b""), ("l/x", "file", b".\n")]
    (root / "new").mkdir()
    for rel, kind, content in made:
        if kind == "file" and not rel.startswith("l/"):
            (root / rel).write_bytes(content)
    (root / "b" / "changed").write_bytes(b"the user's now")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x").write_bytes(b".\n")
    (root / "l").symlink_to(elsewhere)
    manifest = tmp_path / f"session-{DEAD}-x.made"
    manifest.write_text(json.dumps({"pid": DEAD, "start": "1", "tmp": "", "made": [
        [str(root), rel, kind, content.hex()] for rel, kind, content in made]}))
    clean_session(str(manifest))
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "b", "b/changed", "l"]
    assert (elsewhere / "x").read_bytes() == b".\n" and not manifest.exists()


@pytest.mark.parametrize("folders", [5, 60], ids=["one-thread", "two-threads"])
def test_every_missing_name_is_made_and_listed_before_the_box(tmp_path: Path,
                                                             folders: int) -> None:
    """Many names are made by two threads (made.IN_TWO_AT): each is made, with its
    content, once, and listed in the manifest; what was there already is left alone and
    not listed; a folder to make comes before the names in it. The clean-up (two
    threads as well, then the folders) removes exactly what was made."""
    from sandbox.process.made import IN_TWO_AT, clean_session
    from sandbox.session import leftovers

    root = tmp_path / "repo"
    for i in range(folders):
        (root / f"g{i}").mkdir(parents=True)
    (root / "g1" / "commondir").write_bytes(b"the user's\n")
    files = [(str(root / f"g{i}" / name), content) for i in range(folders)
             for name, content in (("config.worktree", b""), ("commondir", b".\n"))]
    files.append((str(root / "hooks" / "x"), b"y"))
    manifest = tmp_path / "session-1-x.made"
    manifest.write_text(json.dumps({"pid": os.getpid(), "start": "1", "tmp": "",
                                    "made": []}))
    leftovers.make(str(manifest), str(tmp_path / "session-1-x"), (str(root),),
                   dirs=[str(root / "hooks")], files=files)
    assert (folders * 2 + 1 >= IN_TWO_AT) is (folders == 60)
    listed = {rel for _, rel, _, _ in json.loads(manifest.read_text())["made"]}
    want = {os.path.relpath(p, root) for p, _ in files} - {"g1/commondir"} | {"hooks"}
    assert listed == want
    for i in range(folders):
        assert (root / f"g{i}" / "config.worktree").read_bytes() == b""
        assert (root / f"g{i}" / "commondir").read_bytes() == (
            b"the user's\n" if i == 1 else b".\n")
    assert (root / "hooks" / "x").read_bytes() == b"y"
    clean_session(str(manifest))
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "g1/commondir"]
