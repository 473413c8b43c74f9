"""The parts of the git protection that need no box: the walk that never follows a
link (with openat2 and without), the plan builder's rule, escaping."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.fs import beneath
from sandbox.linux import bwrap
from sandbox.policy import Policy
from sandbox.text import escape

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="openat2 and O_PATH are Linux's")


@pytest.fixture(params=["openat2", "component walk"])
def walk(request: pytest.FixtureRequest) -> Iterator[str]:
    saved = beneath._have_openat2
    beneath._have_openat2 = None if request.param == "openat2" else False
    try:
        yield str(request.param)
    finally:
        beneath._have_openat2 = saved


@linux
def test_a_path_is_found_only_without_links(tmp_path: Path, walk: str) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "link").symlink_to(root / "a")
    (root / "a" / "b" / "l").symlink_to("/etc/passwd")
    r = str(root)
    assert beneath.find(r, "a/b/f").kind == "file"
    assert beneath.find(r, "a/b").kind == "dir"
    assert beneath.find(r, "link/b/f").kind == "blocked"
    assert beneath.find(r, "a/b/l") == beneath.Found(
        "link", f"{r}/a/b/l", "/etc/passwd", beneath.find(r, "a/b/l").ino)
    assert beneath.find(r, "a/nothing").kind == "missing"
    assert beneath.find(r, "../root/a").kind == "blocked"
    assert beneath.read_beneath(r, "a/b/f") == b"x"
    assert beneath.read_beneath(r, "a/b/l") is None
    assert beneath.read_beneath(r, "link/b/f") is None
    if walk == "openat2":
        assert beneath._have_openat2 is True  # this kernel has it: the test used it


@linux
def test_the_names_of_one_folder_are_found_as_one_by_one(tmp_path: Path, walk: str) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "a" / "b" / "l").symlink_to("/etc/passwd")
    (root / "a" / "b" / "d").mkdir()
    (root / "link").symlink_to(root / "a")
    r, names = str(root), ("f", "l", "d", "nothing")
    for folder in ("a/b", "link/b", "a/none", "a/b/f", ""):
        assert beneath.find_in(r, folder, names) == [
            beneath.find(r, os.path.join(folder, n)) for n in names], folder


@linux
def test_a_path_is_opened_only_without_links(tmp_path: Path, walk: str) -> None:
    import errno
    import stat

    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "a" / "b" / "l").symlink_to("f")
    (root / "link").symlink_to(root / "a")
    (root / "a" / "file").write_text("")
    r = str(root)
    for rel, kind in (("a/b/f", stat.S_ISREG), ("a/b", stat.S_ISDIR), ("", stat.S_ISDIR)):
        fd = beneath.open_path(r, rel)
        try:
            assert kind(os.fstat(fd).st_mode), rel
        finally:
            os.close(fd)
    # (A link on the way is ENOTDIR to the component walk, which opens each folder
    # O_NOFOLLOW | O_DIRECTORY.)
    for rel, errs in (("a/b/l", {errno.ELOOP}), ("link/b/f", {errno.ELOOP, errno.ENOTDIR}),
                      ("a/none/f", {errno.ENOENT}), ("a/file/f", {errno.ENOTDIR}),
                      ("../root/a/b/f", {errno.EXDEV})):
        with pytest.raises(OSError) as raised:
            os.close(beneath.open_path(r, rel))
        assert raised.value.errno in errs, rel
    with pytest.raises(FileNotFoundError):
        beneath.open_path(r, "a/b/none")
    # The same from a descriptor of the root (the stage's, for its many binds).
    rootfd = os.open(r, os.O_PATH | os.O_DIRECTORY)
    try:
        fd = beneath.open_path(r, "a/b/f", rootfd=rootfd)
        os.close(fd)
        for rel in ("a/b/l", "link/b/f"):
            with pytest.raises(OSError):
                os.close(beneath.open_path(r, rel, rootfd=rootfd))
        os.fstat(rootfd)  # still open: the caller's
    finally:
        os.close(rootfd)


@linux
def test_nothing_is_made_through_a_link(tmp_path: Path, walk: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "l").symlink_to(outside)
    with pytest.raises(OSError):
        beneath.create_beneath(str(root), "l/x", folder=False)
    (root / "dangling").symlink_to(outside / "new")
    assert beneath.create_beneath(str(root), "dangling", folder=False) is False
    assert list(outside.iterdir()) == []
    assert beneath.create_beneath(str(root), "made", folder=False, content=b".\n")
    assert (root / "made").read_bytes() == b".\n"


@linux
def test_names_made_in_a_batch_of_folders_are_made_as_one_by_one(tmp_path: Path,
                                                                 walk: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "l").symlink_to(outside)
    folders = beneath.Folders()
    r = str(root)
    try:
        with pytest.raises(OSError):  # not there yet: tried again at the next name
            beneath.create_beneath(r, "d/x", folder=False, folders=folders)
        assert beneath.create_beneath(r, "d", folder=True, folders=folders)
        assert beneath.create_beneath(r, "d/x", folder=False, content=b".\n",
                                      folders=folders)
        assert beneath.create_beneath(r, "d/y", folder=False, folders=folders)
        assert not beneath.create_beneath(r, "d/x", folder=False, folders=folders)
        with pytest.raises(OSError):
            beneath.create_beneath(r, "l/x", folder=False, folders=folders)
    finally:
        folders.close()
    assert (root / "d" / "x").read_bytes() == b".\n" and (root / "d" / "y").exists()
    assert list(outside.iterdir()) == []


def test_a_read_write_bind_outside_the_read_write_roots_raises(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    policy = Policy.create(str(project), private_tmp=str(tmp_path), hide_defaults=False)
    wrong = policy._replace(pinned_dirs=(str(tmp_path / "elsewhere"),))
    with pytest.raises(ValueError, match="outside the read-write roots"):
        bwrap.box_args(wrong, bwrap="/usr/bin/bwrap")


def test_a_writable_path_through_a_link_in_the_project_is_refused(tmp_path: Path) -> None:
    from sandbox.errors import PolicyError

    project = tmp_path / "project"
    project.mkdir()
    (project / "out").symlink_to(tmp_path)
    with pytest.raises(PolicyError) as err:
        Policy.create(str(project), private_tmp=str(tmp_path), hide_defaults=False,
                      writable=[str(project / "out")])
    assert str(err.value) == (
        f"the writable path {project}/out leads through {project}/out, a link in a folder "
        "the box can write; name the folder it leads to instead")


def test_control_characters_are_escaped() -> None:
    assert escape("plain/path") == "plain/path"
    assert escape("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert escape("tab\there\nnl\x7f\x9b") == "tab\\x09here\\x0anl\\x7f\\x9b"
    assert escape("back\\slash") == "back\\\\slash"
    assert escape(os.fsdecode(b"bad\xffbyte")) == "bad\\xffbyte"
    assert escape("\u202eevil") == "\\u202eevil"


def test_a_bwrap_without_bind_fd_is_named_with_the_fix(tmp_path: Path) -> None:
    from sandbox.errors import SandboxUnavailable
    from sandbox.plan import LaunchPlan, RunResult

    project = tmp_path / "project"
    project.mkdir()
    policy = Policy.create(str(project), private_tmp=str(tmp_path), hide_defaults=False)
    plan = LaunchPlan(backend="bwrap", argv=("/usr/bin/bwrap", "--", "true"), env={},
                      cwd="/", description="true")
    said = RunResult("exited", 1, stderr=b"bwrap: Unknown option --bind-fd\n", plan=plan)
    with pytest.raises(SandboxUnavailable) as err:
        bwrap.BwrapBackend(policy, bwrap="/usr/bin/bwrap").read(said)
    assert str(err.value) == (
        "/usr/bin/bwrap lacks --bind-fd, which the box needs to bind git's files safely; "
        "install bubblewrap 0.10 or later (or your distribution's update with the fix for "
        "CVE-2024-42472), or set [sandbox] protect = false")


@pytest.mark.parametrize(("text", "ask"), [
    (b'[core]\n\tbare = false\n\tlogallrefupdates = true\n\tworktree = ../../../lib\n'
     b'[remote "origin"]\n\turl = /x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n', False),
    (b"[user]\n\tname = t\n", False),
    (b"[core]\n\tfsMonitor = ./x\n", True),
    (b"[include]\n\tpath = x\n", True),
    (b'[includeIf "gitdir:/a/"]\n\tpath = x\n', True),
    (b'[filter "lfs"]\n\tclean = ./c %f\n', True),
    (b"[pager]\n\tlog = ./p\n", True),
    (b"[core.x]\n\ta = b\n", True),           # the old subsection form: asked
    (b"[core] fsmonitor = x\n", True),         # a key on the header's line: asked
    (b"[core]\n\teditor = vi \\\n  -x\n", True),  # a continued line: asked
])
def test_a_config_is_asked_about_when_it_may_name_a_program(text: bytes, ask: bool) -> None:
    from sandbox.git.config import worth_asking

    assert worth_asking(text) is ask
