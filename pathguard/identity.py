"""A checked file is known by what it is, not by how it is spelled.

- :class:`Identity`: ``(st_dev, st_ino)`` and enough of ``stat`` to see a file rewritten
  in place (size, ``mtime_ns``, ``ctime_ns``; ``ctime`` also moves on ``chmod``,
  ``link`` and ``rename``). For a folder only device, inode and type count: a folder's
  times move whenever anything in it is added, which says nothing about what runs.
- :class:`Pins`: the identities taken when the session's hooks were checked, compared
  again just before each run. A file replaced, re-pointed or rewritten since is named.
- :func:`other_names_possible`: a regular file with more than one hard link on the
  device of a writable folder may have another name in that folder, through which the
  agent rewrites it in place. The other names of an inode cannot be found cheaply in
  general; they can when they all sit beside it (``/usr/bin/perl`` and ``perl5.36.0``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from .records import NamedTuple


class Identity(NamedTuple):
    dev: int
    ino: int
    kind: int  # stat.S_IFMT of the mode
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0


def of_stat(st: os.stat_result) -> Identity:
    kind = stat.S_IFMT(st.st_mode)
    if kind == stat.S_IFDIR:
        return Identity(st.st_dev, st.st_ino, kind)
    return Identity(st.st_dev, st.st_ino, kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Pins(NamedTuple):
    """Paths (absolute, as checked) and the identity each led to at the check."""

    paths: tuple[str, ...] = ()
    identities: tuple[Identity, ...] = ()

    def changed(self) -> str | None:
        """The first path that no longer leads to the same unchanged file, else None.

        One ``stat`` per path, following links as ``exec`` and ``open`` will: a link
        re-pointed, a file replaced or rewritten, a path that is gone, all differ.
        """
        for path, before in zip(self.paths, self.identities, strict=True):
            try:
                now = of_stat(os.stat(path))
            except (OSError, ValueError):
                return path
            if now != before:
                return path
        return None


def pins(pairs: Mapping[str, Identity]) -> Pins:
    return Pins(tuple(pairs), tuple(pairs.values()))


def _names_beside(folder: str, st: os.stat_result) -> int:
    """How many entries of ``folder`` are the inode of ``st``."""
    count = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.inode() != st.st_ino:
                    continue
                try:
                    if entry.stat(follow_symlinks=False).st_dev == st.st_dev:
                        count += 1
                except OSError:
                    continue
    except OSError:
        return 0
    return count


def other_names_possible(location: str, st: os.stat_result, devices: frozenset[int],
                         euid: int) -> bool:
    """Whether regular file ``location`` (``st`` its stat) may have another name in a
    writable folder through which the agent can rewrite it.

    It may when it has more than one hard link, lies on the device of a writable
    folder (hard links never cross devices), the agent's user could write it (it owns
    it, or the group or others may write), and its names are not all beside it.
    """
    if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2 or st.st_dev not in devices:
        return False
    if st.st_uid != euid and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return _names_beside(os.path.dirname(location) or "/", st) < st.st_nlink
