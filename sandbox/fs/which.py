"""A program looked up on a PATH as :func:`shutil.which` looks it up, without importing
:mod:`shutil` (which imports ``bz2``, ``lzma`` and ``fnmatch``: milliseconds of every
command's start). A leaf: imports nothing of ours.
"""

from __future__ import annotations

import os


def which(name: str, path: str) -> str | None:
    """The first ``entry/name`` on ``path`` (a PATH value) that exists, is not a folder
    and may be executed, as written (not resolved); None when there is none. A ``name``
    with a ``/`` is that file or nothing."""
    if os.path.dirname(name):
        return name if _runnable(name) else None
    if not path:
        return None
    seen: set[str] = set()
    for entry in path.split(os.pathsep):
        if entry in seen:
            continue
        seen.add(entry)
        candidate = os.path.join(entry, name)
        if _runnable(candidate):
            return candidate
    return None


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)
