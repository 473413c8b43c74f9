"""Resolve a path hop by hop, as the kernel's namei does, and keep every location on the way.

``os.path.realpath`` answers "where does it lead"; the guard also needs "what did the
kernel pass through to get there": each folder and link on the way is something the agent
could replace or re-point if it sits in a folder the agent can write. So the walk takes
components one at a time from ``/`` (or from the working directory), follows every link
(the last component too, as ``exec`` and ``open`` do), and records each location with what
was found there.

The walk stats and reads links; it never opens or runs anything.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Callable
from typing import Literal, TypeVar

from .records import NamedTuple

T = TypeVar("T")

# Linux's MAXSYMLINKS: path resolution fails with ELOOP once it has followed more than
# this many links in one lookup (fs/namei.c, nd->total_link_count).
MAX_LINKS = 40

LOOP_REASON = f"a link loop or a chain of more than {MAX_LINKS} links"
NUL_REASON = "the path contains a NUL character"
# Linux's PATH_MAX counts the final NUL: a path of this many bytes or more is refused
# (ENAMETOOLONG) before any lookup.
PATH_MAX = 4096
LONG_REASON = f"the path is {PATH_MAX:,} bytes or longer, more than the kernel takes"
# How a trailing "/" is kept among the components: unlike ".", it looks nothing up in
# the folder (it only demands one), so it needs no search permission there.
TRAILING = ""

Kind = Literal["dir", "file", "link", "missing", "other"]
Status = Literal["ok", "missing", "notdir", "loop", "unreadable"]


class Visit(NamedTuple):
    """One location the walk reached. ``target`` is a link's text, as stored."""

    location: str
    kind: Kind
    target: str | None = None


class Entry(NamedTuple):
    """What ``lstat`` (and ``readlink``) said about one location.

    ``error`` is set, with ``kind`` "other", when the location could not be examined for a
    reason other than its absence (permission denied, name too long, ...).
    """

    kind: Kind
    target: str | None = None
    error: str | None = None


class Lookup:
    """``lstat`` + ``readlink`` per location, remembered.

    One Lookup stands for one moment of the file system: a guard checks every hook
    against the same answers, and a folder shared by many paths is examined once.
    """

    def __init__(self) -> None:
        self._seen: dict[str, Entry] = {}
        self.calls = 0  # lstat calls actually made (for tests of the cache)

    def __call__(self, location: str) -> Entry:
        entry = self._seen.get(location)
        if entry is None:
            entry = self._examine(location)
            self._seen[location] = entry
        return entry

    def _examine(self, location: str) -> Entry:
        self.calls += 1
        try:
            st = _at(location, os.lstat)
        except FileNotFoundError:
            return Entry("missing")
        except OSError as err:
            return Entry("other", error=_describe(err))
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            try:
                return Entry("link", target=_at(location, os.readlink))
            except FileNotFoundError:
                # Removed between lstat and readlink: absent now.
                return Entry("missing")
            except OSError as err:
                return Entry("other", error=_describe(err))
        if stat.S_ISDIR(mode):
            return Entry("dir")
        if stat.S_ISREG(mode):
            return Entry("file")
        return Entry("other")


def _at(location: str, call: Callable[..., T]) -> T:
    """``call(location)`` (lstat or readlink), also for a location whose whole name is
    :data:`PATH_MAX` bytes or more: the kernel reaches such a place through a link by a
    short path, so the walk must look at it too. Its folder is then opened one component
    at a time (never following a link) and the name looked up from there."""
    if len(os.fsencode(location)) < PATH_MAX:
        return call(location)
    folder, name = location.rsplit("/", 1)
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        for part in folder.split("/"):
            if part:
                nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        return call(name, dir_fd=fd)
    finally:
        os.close(fd)


def _describe(err: OSError) -> str:
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    text = err.strerror or os.strerror(err.errno or 0)
    return text[:1].lower() + text[1:]


class Walk(NamedTuple):
    """Where a path leads and everything passed on the way.

    ``status``:

    - "ok": every component resolved; ``final`` is the canonical path, ``kind`` what is
      there (a link never: links are followed).
    - "missing": ``final`` is the first location that does not exist; ``remaining`` the
      components that were not reached.
    - "notdir": ``final`` is a non-directory that a later component needed to look into.
    - "loop": more than :data:`MAX_LINKS` links were followed (the kernel's ELOOP).
    - "unreadable": ``final`` could not be examined; ``reason`` says why.

    ``visits`` holds every location reached, in order: each component's own location,
    each link (with its text), the components of each link's target, and each folder a
    ``..`` stepped up to. A relative path's working directory is walked first and its
    visits come first.
    """

    path: str
    cwd: str
    status: Status
    final: str
    kind: Kind
    visits: tuple[Visit, ...]
    remaining: tuple[str, ...] = ()
    links: int = 0
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def leads_to(self) -> str:
        """Where the path leads, or would lead if what is missing were made as folders."""
        if self.status in ("missing", "notdir") and self.remaining:
            return posixpath.normpath(posixpath.join(self.final, *self.remaining))
        return self.final


def components(path: str) -> list[str]:
    """A path's components, as the kernel takes them: empty ones (``a//b``) dropped, and a
    trailing ``/`` kept as :data:`TRAILING` since it demands a directory."""
    parts = [p for p in path.split("/") if p]
    if path.endswith("/") and parts:
        parts.append(TRAILING)
    return parts


def walk(path: str, cwd: str, *, lookup: Lookup | None = None) -> Walk:
    """Resolve ``path`` as the kernel would, from ``cwd`` when it is relative.

    ``cwd`` must be absolute; it is itself walked first for a relative path (its links
    are followed and recorded), and a relative path whose ``cwd`` does not resolve to a
    folder stops with that walk's status.
    """
    if not path:
        raise ValueError("an empty path names nothing")
    look = lookup if lookup is not None else Lookup()
    if "\0" in path:
        return Walk(path, cwd, "unreadable", path, "other", (), reason=NUL_REASON)
    if len(os.fsencode(path)) >= PATH_MAX:
        return Walk(path, cwd, "unreadable", path, "other", (), reason=LONG_REASON)
    if path.startswith("/"):
        return _resolve(path, cwd, "/", [], components(path), look=look)
    if not cwd.startswith("/"):
        raise ValueError(f"the working directory {cwd} is not absolute")
    base = walk(cwd, "/", lookup=look)
    if base.status != "ok":
        return Walk(path, cwd, base.status, base.final, base.kind, base.visits,
                    base.remaining + tuple(components(path)), base.links, base.reason)
    if base.kind != "dir":
        return Walk(path, cwd, "notdir", base.final, base.kind, base.visits,
                    tuple(components(path)), base.links)
    return _resolve(path, cwd, base.final, list(base.visits), components(path), look=look)


def _search_denied(folder: str, look: Lookup) -> str | None:
    """Why "." or ".." cannot be looked up in ``folder``, or None. Like every name, they
    need search permission on the folder (the kernel's may_lookup); a trailing "/" looks
    nothing up, so it needs none. Asking for "<folder>/." checks it."""
    here = look(folder.rstrip("/") + "/.")
    return None if here.error is None else f"{here.error} at {folder}"


def _dot(current: str, name: str, visits: list[Visit]) -> str:
    """Where "." or ".." (or a trailing "/") leaves the walk. ".." is the parent of where
    we are, after any link: never a lexical step back."""
    if name != "..":
        return current
    parent = posixpath.dirname(current)
    visits.append(Visit(parent, "dir"))
    return parent


def _dead_end(target: str | None, links: int) -> tuple[Status, str] | None:
    """Why the walk ends at its ``links``-th link, to ``target``: one link too many (a
    loop), or an empty target, which leads nowhere (the kernel answers ENOENT)."""
    if links > MAX_LINKS:
        return "loop", LOOP_REASON
    if not target:
        return "missing", ""
    return None


def _splice(target: str, current: str, pending: list[str]) -> str:
    """Where the walk goes on after a link to ``target`` found in ``current``: the
    target's components put in front of what remains (``pending``, next one last), taken
    from ``/`` when it is absolute, else from the folder holding the link."""
    pending.extend(reversed(components(target)))
    return "/" if target.startswith("/") else current


def _resolve(path: str, cwd: str, start: str, visits: list[Visit], parts: list[str], *,
             look: Lookup) -> Walk:
    # The components still to take, next one last (a stack): a link's target is pushed
    # in front of what remains, as the kernel splices it in.
    pending = parts[::-1]
    current = start
    kind: Kind = "dir"
    links = 0

    def stopped(status: Status, at: str, at_kind: Kind, reason: str = "",
                also: tuple[str, ...] = ()) -> Walk:
        rest = also + tuple(reversed(pending))
        return Walk(path, cwd, status, at, at_kind, tuple(visits), rest, links, reason)

    while pending:
        name = pending.pop()
        if kind != "dir":
            # Only a folder can be looked into; "file/x" and "file/." fail with ENOTDIR.
            return stopped("notdir", current, kind, also=(name,))
        if name in (TRAILING, ".", ".."):
            denied = _search_denied(current, look) if name else None
            if denied is not None:
                return stopped("unreadable", current, "dir", denied, also=(name,))
            current = _dot(current, name, visits)
            continue
        location = "/" + name if current == "/" else current + "/" + name
        entry = look(location)
        if entry.error is not None:
            return stopped("unreadable", location, "other", f"{entry.error} at {location}")
        visits.append(Visit(location, entry.kind, entry.target))
        if entry.kind == "missing":
            return stopped("missing", location, "missing")
        if entry.kind == "link":
            links += 1
            end = _dead_end(entry.target, links)
            if end is not None:
                return stopped(end[0], location, "link", end[1])
            current = _splice(entry.target or "", current, pending)
            continue
        current = location
        kind = entry.kind
    return Walk(path, cwd, "ok", current, kind, tuple(visits), (), links)
