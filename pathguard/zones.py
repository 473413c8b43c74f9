"""Zones: the folders that matter to the guard, with the words used to name them."""

from __future__ import annotations

from typing import Literal

from .records import NamedTuple

ZoneKind = Literal["project", "writable", "hidden"]


class Zone(NamedTuple):
    """A folder (or file, for hidden paths) the guard compares locations against.

    ``path`` is absolute as the user wrote it (``~`` expanded, no lexical ``..``
    clean-up); the guard also compares against where it leads. ``label`` names the
    folder in a refusal: "the project", "the private temp folder", ...
    """

    path: str
    kind: ZoneKind
    label: str


# The labels, in one place so messages and tests agree.
PROJECT = "the project"
COMMON_DIR = "the worktree's common directory"
PRIVATE_TMP = "the private temp folder"
WRITABLE = "a writable folder"
PACKAGE_CACHE = "the project's package cache folder"
SYSTEM_TMP = "the system temp folder"
USER_TMP = "the user temp folder"
HIDDEN = "a folder the sandbox hides"
