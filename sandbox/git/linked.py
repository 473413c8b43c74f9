"""A linked worktree's own and common git folders, believed only where git itself laid
them out (:func:`linked_common_dir`)."""

from __future__ import annotations

import os

from sandbox.fs import beneath


def read_gitdir_file(project: str) -> str | None:
    """What the ``.git`` file of ``project`` names (``gitdir: ...``), as a path; None
    if it is not such a file."""
    data = beneath.read_beneath(project, ".git", 4096)
    if data is None:
        return None
    first = data.decode("utf-8", "replace").split("\n", 1)[0].strip()
    if not first.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(project, first[len("gitdir:"):].strip()))


def linked_common_dir(project: str) -> tuple[str, str] | None:
    """(own git folder, common dir) of a real linked worktree, or None.

    Only a layout git itself makes is believed: the ``.git`` file names
    ``C/worktrees/<id>``, whose ``commondir`` leads to C and whose ``gitdir`` names this
    ``.git`` back. A ``.git`` file pointing anywhere else is not followed.
    """
    gitdir = read_gitdir_file(project)
    if gitdir is None:
        return None
    own = os.path.realpath(gitdir)
    holder = os.path.dirname(own)
    if os.path.basename(holder) != "worktrees":
        return None
    common = os.path.dirname(holder)
    rel = os.path.relpath(own, common)
    data = beneath.read_beneath(common, os.path.join(rel, "commondir"), 4096)
    back = beneath.read_beneath(common, os.path.join(rel, "gitdir"), 4096)
    if data is None or back is None:
        return None
    named = os.path.realpath(os.path.join(own, data.decode("utf-8", "replace").strip()))
    points = os.path.realpath(back.decode("utf-8", "replace").strip())
    if named != common or points != os.path.join(project, ".git"):
        return None
    if beneath.find(common, "HEAD").kind != "file":
        return None
    return own, common


def git_common_dir(project: str) -> str | None:
    """A real linked worktree's common directory (see :func:`linked_common_dir`)."""
    found = linked_common_dir(project)
    return found[1] if found else None
