"""The files an imported hook needs, and their new places out of the agent's reach.

A hook file that lies in the project (or in a folder the box hides) must move, and so
must the files beside it that it names: a ``rules.json`` it reads, a ``lib.js`` it
``require``s, the ``package.json`` that tells node how to load it. The script is read
as text (never run) and each file of its own folder whose name it writes is taken with
it, then the same for those files. A hook with such files moves to a folder of its own
(``~/.local/share/harness/hooks/<stem>/``), so the names it uses still lead there. What
it names that cannot be followed (outside its folder, or missing) is said.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence

from launchers.claude.lint import read_text
from pathguard.records import NamedTuple

HOOKS_HOME = "~/.local/share/harness/hooks"
SIBLINGS_LIMIT = 50  # files taken along with one hook: past it, the rest are said
_FOLDER_LIMIT = 500  # entries of a folder looked at
# A quoted relative path: './rules.json', "../lib/x", 'lib/util.js'.
_RELATIVE = re.compile(r"""["'`](\.{1,2}/[^"'`\s]{1,200})["'`]""")
_NODE_EXTS = ("", ".js", ".mjs", ".cjs", ".json", ".ts")
_NODE = (".js", ".mjs", ".cjs", ".ts")


class Move(NamedTuple):
    """A hook file to copy out of reach: from ``source`` to ``target``; ``why`` is the
    place it is in ("in the project", "in a folder the sandbox hides (…)")."""

    source: str
    target: str
    why: str


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def place_of(path: str, projects: Sequence[str], hidden: Sequence[str]) -> str | None:
    """Why an existing file must move: in a project, or in a hidden folder; else None."""
    if not os.path.isfile(path):
        return None
    real = os.path.realpath(path)
    for project in projects:
        for p in {project, os.path.realpath(project)}:
            if _within(path, p) or _within(real, p):
                return "in the project"
    for h in hidden:
        if _within(path, h) or _within(real, h):
            return f"in a folder the sandbox hides ({h})"
    return None


class Siblings(NamedTuple):
    """The files of a script's folder it needs (absolute paths), and what it names that
    could not be followed (as written)."""

    files: tuple[str, ...]
    unfollowed: tuple[str, ...]


def _entries(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as it:
            return [e.name for _, e in zip(range(_FOLDER_LIMIT), it, strict=False)
                    if e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _named(text: str, name: str) -> bool:
    """Whether ``text`` writes the file name ``name`` as a word of its own."""
    return re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", text) is not None


def _module_named(text: str, name: str) -> bool:
    """A sibling module imported by its stem: ``import rules`` or ``from rules import``."""
    stem, ext = os.path.splitext(name)
    if ext != ".py" or not stem.isidentifier():
        return False
    return re.search(rf"^\s*(?:import|from)\s+{re.escape(stem)}\b", text, re.M) is not None


def _relative(folder: str, written: str, entries: set[str]) -> str | None:
    """The sibling a relative string leads to (node's extensions tried), or None."""
    path = os.path.normpath(os.path.join(folder, written))
    if os.path.dirname(path) != folder:
        return None
    for ext in _NODE_EXTS:
        if os.path.basename(path) + ext in entries:
            return os.path.basename(path) + ext
    return None


def siblings(script: str) -> Siblings:
    """What ``script`` needs beside it, followed from file to file within its folder."""
    folder = os.path.dirname(script)
    entries = set(_entries(folder))
    taken: dict[str, None] = {}
    unfollowed: dict[str, None] = {}
    todo = [os.path.basename(script)]
    while todo:
        name = todo.pop()
        text = read_text(os.path.join(folder, name))
        if text is None:
            continue
        found = [e for e in sorted(entries) if e != name
                 and (_named(text, e) or _module_named(text, e))]
        for m in _RELATIVE.finditer(text):
            hit = _relative(folder, m.group(1), entries)
            if hit is None:
                unfollowed[m.group(1)] = None
            else:
                found.append(hit)
        if name.endswith(_NODE) and "package.json" in entries:
            found.append("package.json")
        for e in found:
            if e not in taken and e != os.path.basename(script):
                taken[e] = None
                todo.append(e)
    files = [os.path.join(folder, e) for e in taken]
    unfollowed.update({f"{os.path.basename(f)} (over {SIBLINGS_LIMIT} files)": None
                       for f in files[SIBLINGS_LIMIT:]})
    return Siblings(tuple(files[:SIBLINGS_LIMIT]), tuple(unfollowed))


class Mover:
    """Chooses new places under ``~/.local/share/harness/hooks/``, one per file, with no
    two files at the same place. A hook with files beside it gets a folder of its own."""

    def __init__(self, home: str, project: str, hidden: Sequence[str]) -> None:
        self.folder = os.path.join(home, HOOKS_HOME[2:])
        self.project = project
        self.hidden = hidden
        self.targets: dict[str, str] = {}
        self.unfollowed: dict[str, tuple[str, ...]] = {}

    def _free(self, folder: str, name: str) -> str:
        stem, ext = os.path.splitext(name)
        used = set(self.targets.values())
        target, n = os.path.join(folder, name), 1
        while target in used or any(_within(u, target) for u in used):
            n += 1
            target = os.path.join(folder, f"{stem}-{n}{ext}")
        return target

    def move(self, path: str, projects: Sequence[str] = ()) -> list[Move]:
        """The moves for hook file ``path`` and the files it needs beside it: none when
        it may stay where it is."""
        why = place_of(path, (self.project, *projects), self.hidden)
        if why is None:
            return []
        if path not in self.targets:
            found = siblings(path)
            self.unfollowed[path] = found.unfollowed
            if not found.files:
                self.targets[path] = self._free(self.folder, os.path.basename(path))
            else:
                stem = os.path.splitext(os.path.basename(path))[0] or "hook"
                home = self._free(self.folder, stem)
                for f in (path, *found.files):
                    self.targets.setdefault(f, os.path.join(home, os.path.basename(f)))
        out = [Move(path, self.targets[path], why)]
        folder = os.path.dirname(self.targets[path])
        if folder != self.folder:
            out += [Move(s, t, why) for s, t in self.targets.items()
                    if s != path and os.path.dirname(t) == folder]
        return out


def move_commands(moves: Iterable[Move]) -> list[str]:
    """The exact shell lines that put the files at their new places."""
    moves = list(dict.fromkeys(moves))
    if not moves:
        return []
    folders = dict.fromkeys(os.path.dirname(m.target) for m in moves)
    lines = [f"mkdir -p {' '.join(shell_word(f) for f in folders)}"]
    lines += [f"cp {shell_word(m.source)} {shell_word(m.target)}" for m in moves]
    return lines


def shell_word(text: str) -> str:
    """``text`` as one word a shell reads back exactly, in printable characters only: a
    name with control characters (the project's, so the agent's choice) is written in
    bash's and zsh's ``$'...'`` quoting, so the printed command still names the file and
    nothing reaches the terminal raw."""
    if text.isprintable():
        return shlex.quote(text)
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\\'":
            out.append("\\" + ch)
        elif 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")  # an undecodable byte, as the byte
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        else:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode()))
    return "$'" + "".join(out) + "'"
