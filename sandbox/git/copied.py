"""Say when git copied a submodule's objects where bare git links them.

In the namespace box the project's ``.git`` is a mount of its own (pinned, so that the
box cannot rename it and build a ``.git`` of its own). ``git submodule add ./lib``, or
a ``git clone`` of a repository in the project into ``.git/modules``, links the
source's objects (``link()``), and a link across two mounts fails (``EXDEV``): git then
copies them, silently. The module works the same; its objects take their room twice,
and are 0644 with one link where linked ones are git's 0444.

git writes every object and pack read-only (0444); a copy made by its fallback is
0644. So after each run, each module folder new in ``.git/modules`` is looked at, and
one that holds an object with a write bit is said, once. The cost while nothing is new
is one ``listdir`` of ``.git/modules`` (or its failure) a run.
"""

from __future__ import annotations

import contextlib
import os
import stat

from sandbox.text import escape

# How many of a module's object files are looked at for a write bit.
LOOK_AT = 64


def said(name: str, folder: str) -> str:
    """The warning for the module ``name`` (its folder in ``.git/modules``)."""
    return (f"git copied the objects of the submodule {escape(name)} into "
            f"{escape(folder)} where it links them bare: .git is a mount of its own in "
            "the box, and a link across mounts fails, so git copied them (0644, one "
            "link) instead of linking git's read-only ones; the submodule works the same "
            "and its objects take their room twice (docs/limits.md)")


class Copies:
    """The modules of the git folder ``git_dir`` seen so far."""

    def __init__(self, git_dir: str) -> None:
        self._modules = os.path.join(git_dir, "modules")
        self._seen = self._names()

    def _names(self) -> set[str]:
        try:
            return set(os.listdir(self._modules))
        except OSError:
            return set()

    def look(self) -> list[str]:
        """Each module made since the last look whose objects are copies, said."""
        names = self._names()
        new, self._seen = names - self._seen, names
        return [said(n, os.path.join(self._modules, n)) for n in sorted(new)
                if _copied(os.path.join(self._modules, n, "objects"))]


def _copied(objects: str) -> bool:
    """Whether a file of ``objects`` (a git object folder) is writable: git's own are
    read-only. A link on the way is not followed."""
    looked = 0
    for top, folders, files in os.walk(objects):
        folders[:] = [f for f in folders if f != "info"]
        for name in files:
            if name.endswith((".keep", ".promisor")):
                continue
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(top, name))
                if stat.S_ISREG(st.st_mode) and st.st_mode & 0o222:
                    return True
            looked += 1
            if looked >= LOOK_AT:
                return False
    return False
