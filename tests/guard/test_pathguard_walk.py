"""The kernel-like walk, on real trees with real links; the kernel is asked to agree."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from helpers.trees import link, touch
from helpers.unprivileged import as_nobody, searchable_tmp

from pathguard.walk import LOOP_REASON, MAX_LINKS, Lookup, Walk, walk


def locations(w: Walk) -> list[str]:
    return [v.location for v in w.visits]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path.resolve()


def test_plain_file_resolves_with_every_folder_visited(root: Path) -> None:
    f = touch(root / "a" / "b" / "f")
    w = walk(str(f), "/")
    assert w.status == "ok" and w.final == str(f) and w.kind == "file"
    assert locations(w)[-3:] == [str(root / "a"), str(root / "a" / "b"), str(f)]
    assert [v.kind for v in w.visits][-3:] == ["dir", "dir", "file"]


def test_trailing_link_is_followed_and_recorded(root: Path) -> None:
    f = touch(root / "real" / "f")
    lk = link(root / "l", f)
    w = walk(str(lk), "/")
    assert w.status == "ok" and w.final == str(f) and w.links == 1
    assert any(v.location == str(lk) and v.kind == "link" and v.target == str(f)
               for v in w.visits)
    assert w.final == os.path.realpath(lk)


def test_relative_link_target_is_taken_from_the_links_folder(root: Path) -> None:
    f = touch(root / "d" / "sub" / "f")
    lk = link(root / "d" / "l", "sub/f")
    w = walk(str(lk), "/")
    assert w.final == str(f)
    assert str(root / "d" / "sub") in locations(w)


def test_dot_dot_after_a_link_goes_to_the_parent_of_the_target(root: Path) -> None:
    x = touch(root / "proj" / "x")
    (root / "proj" / "sub").mkdir()
    link(root / "out" / "link", root / "proj" / "sub")
    path = str(root / "out" / "link" / ".." / "x")
    w = walk(path, "/")
    assert w.status == "ok" and w.final == str(x)
    # The kernel agrees: the same file, not the lexical out/x.
    assert os.stat(path).st_ino == os.stat(x).st_ino
    assert not (root / "out" / "x").exists()


def test_dot_dot_at_the_root_stays_at_the_root(root: Path) -> None:
    w = walk("/../../" + str(root)[1:], "/")
    assert w.final == str(root)


def test_relative_path_walks_the_working_directory_first(root: Path) -> None:
    f = touch(root / "proj" / "h")
    cwd_link = link(root / "plink", root / "proj")
    w = walk("h", str(cwd_link))
    assert w.status == "ok" and w.final == str(f)
    assert locations(w).index(str(cwd_link)) < locations(w).index(str(f))


def test_missing_component_stops_the_walk_with_what_remains(root: Path) -> None:
    (root / "d").mkdir()
    w = walk(str(root / "d" / "missing" / ".." / "x"), "/")
    assert w.status == "missing"
    assert w.final == str(root / "d" / "missing")
    assert w.remaining == ("..", "x")
    assert w.visits[-1].kind == "missing"


def test_dangling_link_records_the_link_and_its_missing_target(root: Path) -> None:
    (root / "proj").mkdir()
    lk = link(root / "out" / "dl", root / "proj" / "nothere" / "f")
    w = walk(str(lk), "/")
    assert w.status == "missing"
    assert w.final == str(root / "proj" / "nothere")
    assert w.remaining == ("f",)
    assert w.leads_to() == str(root / "proj" / "nothere" / "f")
    assert (str(lk), "link") in [(v.location, v.kind) for v in w.visits]


def test_file_in_the_middle_is_not_a_directory(root: Path) -> None:
    f = touch(root / "f")
    w = walk(str(f) + "/x", "/")
    assert w.status == "notdir" and w.final == str(f) and w.remaining == ("x",)


def test_trailing_slash_on_a_file_is_not_a_directory(root: Path) -> None:
    f = touch(root / "f")
    assert walk(str(f) + "/", "/").status == "notdir"
    assert walk(str(root) + "/", "/").status == "ok"


def chain(root: Path, n: int, end: Path) -> Path:
    """l0 -> l1 -> ... -> l(n-1) -> end: n links to follow."""
    for i in range(n - 1, -1, -1):
        target = end if i == n - 1 else root / f"l{i + 1}"
        link(root / f"l{i}", target)
    return root / "l0"


def test_a_chain_of_40_links_resolves_like_the_kernel(root: Path) -> None:
    f = touch(root / "end")
    start = chain(root, MAX_LINKS, f)
    os.stat(start)  # the kernel follows it
    w = walk(str(start), "/")
    assert w.status == "ok" and w.final == str(f) and w.links == 40


def test_a_chain_of_41_links_is_refused_like_the_kernel(root: Path) -> None:
    f = touch(root / "end")
    start = chain(root, MAX_LINKS + 1, f)
    with pytest.raises(OSError) as err:
        os.stat(start)
    assert err.value.errno == errno.ELOOP
    w = walk(str(start), "/")
    assert w.status == "loop" and w.reason == LOOP_REASON


def test_a_link_loop_is_refused_with_the_reason(root: Path) -> None:
    link(root / "a", root / "b")
    link(root / "b", root / "a")
    w = walk(str(root / "a" / "x"), "/")
    assert w.status == "loop"
    assert w.reason == "a link loop or a chain of more than 40 links"


def test_a_folder_that_cannot_be_searched_is_unreadable() -> None:
    root = searchable_tmp()
    try:
        touch(root / "locked" / "f")
        (root / "locked").chmod(0)
        w = as_nobody(lambda: walk(str(root / "locked" / "f"), "/"))
    finally:
        (root / "locked").chmod(0o755)
        shutil.rmtree(root)
    assert w.status == "unreadable"
    assert w.reason == f"permission denied at {root / 'locked' / 'f'}"


def test_a_nul_character_is_unreadable() -> None:
    w = walk("/a\0b", "/")
    assert w.status == "unreadable" and w.reason == "the path contains a NUL character"


def test_a_relative_working_directory_is_an_error() -> None:
    with pytest.raises(ValueError, match="not absolute"):
        walk("x", "rel")


def test_an_empty_path_is_an_error() -> None:
    with pytest.raises(ValueError):
        walk("", "/")


def test_a_lookup_examines_each_location_once(root: Path) -> None:
    for i in range(5):
        touch(root / "d" / f"f{i}")
    look = Lookup()
    for i in range(5):
        walk(str(root / "d" / f"f{i}"), "/", lookup=look)
    first = look.calls
    for i in range(5):
        walk(str(root / "d" / f"f{i}"), "/", lookup=look)
    assert look.calls == first
    # The shared folders were examined once: depth + 1 (d) + 5 files.
    assert first == len(root.parts) - 1 + 1 + 5
