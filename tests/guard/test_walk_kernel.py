"""pathguard.walk against the kernel, on random trees of folders, files and links.

Hypothesis builds a tree under a fresh folder (links relative and absolute, chains past
the kernel's 40, loops, dangling links, links to links in other branches, folders that
cannot be searched), then for each generated path compares what ``walk`` says with what
the kernel does: ``open(path, O_PATH)`` and ``/proc/self/fd/N`` (where it leads), or its
errno. Every disagreement is a bug in the walk; each one found is kept as an
``@example``. As root, the comparison runs as ``nobody`` so that modes count.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from helpers.unprivileged import as_nobody, searchable_tmp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pathguard.walk import LONG_REASON, Walk, walk

# Names unlikely to exist where a link climbing out of the tree lands (/, /var, /var/tmp).
NAMES = ("ka", "kb", "kc")
CHAIN = "ch"  # the folder holding the chain of links c0 -> c1 -> ...
# The same permission for owner, group and others, so the owner (an unprivileged run) and
# nobody (a root run) meet the same refusals. 0o311: search but not list.
MODES = (0o755, 0o644, 0o311, 0o000)
ROOT_MARK = "@"  # a link target starting "@/" is absolute, inside the tree


class Node(NamedTuple):
    path: tuple[str, ...]
    kind: str  # "dir" | "file" | "link" | "fifo"
    target: str = ""
    mode: int = 0o755


class Query(NamedTuple):
    text: str
    absolute: bool
    cwd: str = ""  # a relative path's working directory, from the root (links and all)


def _rel(max_size: int = 5) -> st.SearchStrategy[str]:
    part = st.sampled_from((*NAMES, ".", "..", f"{CHAIN}/c0", ""))
    return st.builds(lambda ps, slash: "/".join(ps) + ("/" if slash else ""),
                     st.lists(part, min_size=1, max_size=max_size), st.booleans())


def _target() -> st.SearchStrategy[str]:
    rel = _rel()
    return st.one_of(
        rel.map(lambda t: t or "."),
        rel.map(lambda t: f"{ROOT_MARK}/{t}"),
        st.just("/"),
    )


def _node() -> st.SearchStrategy[Node]:
    path = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(tuple)
    return st.one_of(
        st.builds(Node, path, st.just("dir"), st.just(""), st.sampled_from(MODES)),
        st.builds(Node, path, st.just("file"), st.just(""), st.just(0o755)),
        st.builds(Node, path, st.just("link"), _target(), st.just(0o755)),
        st.builds(Node, path, st.just("fifo"), st.just(""), st.just(0o755)),
    )


TREES = st.tuples(
    st.lists(_node(), max_size=14),
    st.integers(min_value=0, max_value=45),  # links in the chain
    _target(),  # where the chain ends
)
QUERIES = st.lists(st.builds(Query, _rel(7), st.booleans(),
                             st.one_of(st.just(""), _rel(3))), min_size=1, max_size=12)


# -- building a tree without ever following a link ------------------------------------


def _open_dir(root_fd: int, parts: Sequence[str]) -> int | None:
    """The folder at ``parts`` under the root, made where missing; None when something
    on the way is not a folder (links are never followed: O_NOFOLLOW)."""
    fd = os.dup(root_fd)
    for part in parts:
        try:
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
        except FileNotFoundError:
            os.mkdir(part, dir_fd=fd)
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    return fd


def build(root: str, nodes: Sequence[Node], chain: int, chain_end: str) -> list[str]:
    """Make the tree; the folders whose mode was narrowed (to widen before removal)."""
    def real(target: str) -> str:
        return root + target[1:] if target.startswith(ROOT_MARK + "/") else target

    links = [Node((CHAIN, f"c{i}"), "link", f"c{i + 1}") for i in range(chain)]
    links.append(Node((CHAIN, f"c{chain}"), "link", chain_end))
    narrowed: list[str] = []
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        for node in [*nodes, *links]:
            fd = _open_dir(root_fd, node.path[:-1])
            if fd is None:
                continue
            name = node.path[-1]
            try:
                if node.kind == "dir":
                    os.mkdir(name, dir_fd=fd)
                    if node.mode != 0o755:
                        narrowed.append("/".join(node.path))
                elif node.kind == "file":
                    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, dir_fd=fd))
                elif node.kind == "fifo":
                    os.mkfifo(name, dir_fd=fd)
                else:
                    os.symlink(real(node.target), name, dir_fd=fd)
            except FileExistsError:
                pass
            finally:
                os.close(fd)
        modes = {"/".join(n.path): n.mode for n in nodes if n.kind == "dir"}
        for rel in reversed(narrowed):  # deepest last made, first narrowed
            os.chmod(os.path.join(root, rel), modes[rel], follow_symlinks=False)
    finally:
        os.close(root_fd)
    return narrowed


def remove(root: str, narrowed: Sequence[str]) -> None:
    for rel in narrowed:
        os.chmod(os.path.join(root, rel), 0o755, follow_symlinks=False)
    shutil.rmtree(root)  # by folder descriptors: never follows a link, any depth


# -- the comparison -----------------------------------------------------------------


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def kernel(path: str, root_fd: int, cwd: str | None = None) -> tuple[str, str | int]:
    """("ok", "what it is, its kind") as the kernel resolves it, or ("error", errno).
    What it is: where it leads, or (when that name is too long for the kernel to spell
    out) its device and inode. A relative path starts at ``cwd`` (opened as a process
    would enter it), else at the root."""
    try:
        base = os.open(cwd, os.O_PATH | os.O_DIRECTORY) if cwd else os.dup(root_fd)
    except OSError as err:
        return ("error", err.errno or 0)
    try:
        fd = os.open(path, os.O_PATH, dir_fd=base)
    except OSError as err:
        return ("error", err.errno or 0)
    finally:
        os.close(base)
    try:
        st = os.fstat(fd)
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = f"{st.st_dev}:{st.st_ino}"
        return ("ok", f"{name} {_kind(st.st_mode)}")
    finally:
        os.close(fd)


def identity(location: str) -> str:
    """A canonical location as the kernel's answer names it: the name, or for one
    PATH_MAX bytes long or more, its device and inode (opened a folder at a time)."""
    if len(os.fsencode(location)) < 4096:
        return location
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        for part in location.split("/")[1:]:
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        return f"{st.st_dev}:{st.st_ino}"
    finally:
        os.close(fd)


_STATUS_ERRNO = {"missing": errno.ENOENT, "notdir": errno.ENOTDIR, "loop": errno.ELOOP}


def said(w: Walk) -> tuple[str, str | int]:
    """The walk's answer in the kernel's terms."""
    if w.status == "ok":
        return ("ok", f"{identity(w.final)} {w.kind}")
    if w.status in _STATUS_ERRNO:
        return ("error", _STATUS_ERRNO[w.status])
    if w.reason == LONG_REASON:
        return ("error", errno.ENAMETOOLONG)
    for code in (errno.EACCES, errno.ENAMETOOLONG):
        text = "permission denied" if code == errno.EACCES else os.strerror(code).lower()
        if w.reason.lower().startswith(text):
            return ("error", code)
    return ("error", -1)


def _where_is_right(w: Walk, root_fd: int) -> str | None:
    """For a walk that stopped, is ``final`` the place the kernel would have stopped?"""
    if w.status == "missing":
        try:
            os.lstat(w.final)
            return f"{w.final} exists"
        except FileNotFoundError:
            pass
        except OSError:
            return None
        parent = os.path.dirname(w.final)
        if kernel(parent, root_fd) != ("ok", f"{parent} dir"):
            return f"the folder of {w.final} is not where the walk says"
    if w.status == "notdir":
        try:
            if stat.S_ISDIR(os.stat(w.final).st_mode):
                return f"{w.final} is a folder"
        except OSError:
            return None
    return None


def _short(path: str) -> str:
    return repr(path if len(path) < 200 else path[:90] + "..." + path[-90:])


def compare(root: str, queries: Sequence[Query]) -> list[str]:
    """Every disagreement between the walk and the kernel, as a line."""
    out: list[str] = []
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        for q in queries:
            path = f"{root}/{q.text}" if q.absolute else q.text
            if not path:
                continue
            relative = not path.startswith("/")
            cwd = f"{root}/{q.cwd}" if q.cwd and relative else root
            w = walk(path, cwd)
            k = kernel(path, root_fd, cwd if relative else None)
            # Seen once in thousands of trees: the kernel answered ELOOP for a chain of 35
            # links and resolved it when asked again (a lookup that falls back from its
            # lockless mode keeps counting links). Only a repeatable answer counts.
            for _ in range(5):
                if k != ("error", errno.ELOOP) or said(w) == k:
                    break
                k = kernel(path, root_fd, cwd if relative else None)
            if said(w) != k:
                out.append(f"{_short(path)}: walk {w.status} {_short(w.final)} {w.reason!r}, "
                           f"kernel {k}")
            elif k[0] == "error":
                wrong = _where_is_right(w, root_fd)
                if wrong:
                    out.append(f"{path!r}: {wrong}")
    finally:
        os.close(root_fd)
    return out


def check(nodes: list[Node], chain: int, chain_end: str, queries: list[Query]) -> None:
    base = searchable_tmp()
    root = str(base / "t")
    os.mkdir(root, 0o755)
    os.chmod(root, 0o755)
    narrowed = build(root, nodes, chain, chain_end)
    try:
        found = as_nobody(lambda: compare(root, queries))
    finally:
        remove(root, narrowed)
        os.rmdir(base)
    assert not found, "\n".join(found)


DEEP_DIRS = tuple(f"{i:02d}" + "d" * 198 for i in range(25))  # 5,000 bytes of folders
LONG = Query("./" * 2048 + "ka", absolute=False)  # 4,098 bytes: past the kernel's PATH_MAX


@settings(max_examples=400, deadline=None)
@given(TREES, QUERIES)
# Found by this test: "." and ".." need search permission on the folder they are in.
@example(([Node(("ka",), "dir", mode=0o644)], 0, "."),
         [Query("ka/..", True), Query("ka/.", True), Query("ka/", True), Query("ka", True)])
# Found by this test: a path of PATH_MAX bytes or more is refused before any lookup.
@example(([Node(("ka",), "file")], 0, "."), [LONG, Query("ka", False)])
# Found by this test: a place whose full name is PATH_MAX bytes or more, reached through
# a link by a short path, is still looked at (the kernel never spells it out whole).
@example(([Node((*DEEP_DIRS, "ka"), "file"),
           Node(("kb",), "link", "/".join(DEEP_DIRS[:12])),
           Node((*DEEP_DIRS[:12], "kc"), "link", "/".join(DEEP_DIRS[12:]))], 0, "."),
         [Query("kb/kc/ka", True), Query("kb/kc/kb", True), Query("kb/kc/ka/", False),
          Query("kb/kc/../kc/ka", False)])
# The kernel's 40 links: the chain of 40 resolves, 41 is a loop.
@example(([Node(("ka",), "file")], 39, "../ka"), [Query(f"{CHAIN}/c0", True)])
@example(([Node(("ka",), "file")], 40, "../ka"), [Query(f"{CHAIN}/c0", True)])
# A link, then .. : the parent of the link's target, not of the link.
@example(([Node(("ka", "kb", "kc"), "file"), Node(("kb", "kc"), "link", "@/ka/kb")], 0, "."),
         [Query("kb/kc/../kb/kc", True), Query("kb/kc/..", False)])
def test_the_walk_agrees_with_the_kernel(
        tree: tuple[list[Node], int, str], queries: list[Query]) -> None:
    nodes, chain, chain_end = tree
    check(nodes, chain, chain_end, queries)


def test_a_tree_is_built_inside_its_root_even_through_links(tmp_path: Path) -> None:
    # A link climbing out of the tree must never have folders made through it.
    root = str(tmp_path.resolve() / "t")
    os.mkdir(root)
    build(root, [Node(("ka",), "link", "../../.."), Node(("ka", "kb"), "dir")], 0, ".")
    assert os.listdir(root) == ["ka", CHAIN] or sorted(os.listdir(root)) == [CHAIN, "ka"]
    assert not os.path.exists(os.path.join(tmp_path, "..", "..", "kb"))
