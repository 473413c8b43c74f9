"""What a session does with a git layout (:class:`sandbox.git.dirs.GitLayout`, data):
merge in a writable folder's own, and set aside the missing names no box makes."""

from __future__ import annotations

from typing import Any

from sandbox.git.dirs import GitLayout


def unmade(layout: GitLayout) -> GitLayout:
    """``layout`` for a box that makes none of its missing names: they leave
    ``protected`` (nothing there to bind) for ``kept`` (what a run makes there is moved
    out after it, :mod:`sandbox.linux.keeper`), and nothing is to be made or pinned
    where nothing is."""
    missing = {p for p, _ in layout.make_files} | set(layout.make_dirs)
    kept = tuple(p for p in layout.protected if p in missing)
    return layout._replace(
        protected=tuple(p for p in layout.protected if p not in missing), kept=kept,
        pinned_dirs=tuple(d for d in layout.pinned_dirs if d not in missing),
        make_dirs=(), make_files=())


def merged(first: GitLayout, other: GitLayout) -> GitLayout:
    """``first`` (the project's) with what ``other`` (a ``[sandbox] writable`` folder
    that is a repository of its own) protects, pins and makes: the box may write that
    folder, so what host git reads there is held as the project's is. The project's
    common folder, ``.git`` and gitlinks stay the ones the session's end reports on."""
    def both(name: str) -> Any:
        return tuple(dict.fromkeys((*getattr(first, name), *getattr(other, name))))

    return first._replace(
        git_dirs=both("git_dirs"), protected=both("protected"),
        pinned_dirs=both("pinned_dirs"), make_dirs=both("make_dirs"),
        make_files=both("make_files"), links=both("links"), skipped=both("skipped"),
        modules=both("modules"))
