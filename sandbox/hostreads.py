"""What the host reads to decide what to run, wherever it lies: read-only in the box.

The project's own files of that kind are covered by :mod:`sandbox.git.dirs` and
:mod:`sandbox.toolconfigs`. A ``[sandbox] writable`` folder can hold more: a writable
home holds the toolkit's own config and trust store, git's global config and the
shells' start-up files. Each that exists inside a folder the box can write is bound
read-only; one that does not exist yet is said at the session's end if the box made it
(it cannot be covered without leaving a mount point behind). A leaf: the standard
library only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# Under the home folder: git's and the shells' files.
HOME_FILES = (".gitconfig", ".bashrc", ".bash_profile", ".bash_login", ".profile",
              ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".config/git",
              ".config/fish/config.fish")


def candidates(env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """Every path the host reads to decide what to run that this module knows, absolute:
    git's and the shells' files in ``home``, and the toolkit's config and data folders
    (``$HARNESS_HOME``, ``$XDG_CONFIG_HOME/harness``, ``~/.config/harness``,
    ``$XDG_DATA_HOME/harness``, ``~/.local/share/harness``)."""
    out = [os.path.join(home, name) for name in HOME_FILES]
    xdg_config = env.get("XDG_CONFIG_HOME") or ""
    xdg_data = env.get("XDG_DATA_HOME") or ""
    for folder in (env.get("HARNESS_HOME") or "",
                   os.path.join(xdg_config, "harness") if xdg_config else "",
                   os.path.join(xdg_config, "git") if xdg_config else "",
                   os.path.join(home, ".config", "harness"),
                   os.path.join(xdg_data, "harness") if xdg_data else "",
                   os.path.join(home, ".local", "share", "harness"),
                   env.get("GIT_CONFIG_GLOBAL") or ""):
        if folder and os.path.isabs(folder):
            out.append(folder)
    return tuple(dict.fromkeys(os.path.normpath(p) for p in out))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def inside(roots: Iterable[str], env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """The candidates that lie in one of ``roots`` (the folders the box can write, not
    the project, whose files :mod:`sandbox.toolconfigs` covers), whether they exist or
    not."""
    real = [os.path.realpath(r) for r in roots]
    out = []
    for p in candidates(env, home):
        if any(_under(os.path.realpath(os.path.dirname(p)), r) or _under(p, r) for r in real):
            out.append(p)
    return tuple(out)


def present(paths: Iterable[str]) -> tuple[str, ...]:
    """Those that exist as files or real folders (a link is left alone)."""
    return tuple(p for p in paths if os.path.lexists(p) and not os.path.islink(p))
