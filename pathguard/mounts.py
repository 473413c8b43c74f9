"""Mounts: the same files seen under another name.

A bind mount shows a folder of one file system at a second place: ``/opt/alias`` can be
the project's ``hooks`` folder under another spelling, and no walk of the path
``/opt/alias/check.sh`` ever passes through the project. The kernel tells which part
of which file system each mount shows in ``/proc/self/mountinfo``: the device
(``major:minor``) and the mount's *root*, the folder of that file system it shows.

So every location has a *file-system path*: the mount's root joined with the rest of
the location below the mount point. Two locations whose device and file-system path
are equal are the same file; one whose file-system path lies inside a writable
folder's is something the agent can write, whatever it is called.
"""

from __future__ import annotations

import re

from .records import NamedTuple

MOUNTINFO = "/proc/self/mountinfo"

# mountinfo escapes space, tab, newline and backslash in paths as octal (\040 ...).
_OCTAL = re.compile(r"\\([0-7]{3})")


class Mount(NamedTuple):
    """One line of mountinfo: the mount's id, its parent's, the device, the folder of
    the file system it shows (``root``) and where (``point``). ``layers`` are an
    overlay's folders (upper, then lower), whose files it shows as its own."""

    id: int
    parent: int
    device: str
    root: str
    point: str
    layers: tuple[str, ...] = ()


# The super options of an overlay that name the folders it shows (the work folder
# shows nothing). lowerdir lists several, separated by ":".
_LAYER_OPTIONS = ("upperdir=", "lowerdir=", "lowerdir+=", "datadir+=")


def _layers(fields: list[str]) -> tuple[str, ...]:
    """An overlay's layer folders from the fields after " - " (type, source, options)."""
    if len(fields) < 3 or fields[0] != "overlay":
        return ()
    out: list[str] = []
    for option in fields[2].split(","):
        for name in _LAYER_OPTIONS:
            if option.startswith(name):
                value = option[len(name):]
                parts = value.split(":") if name == "lowerdir=" else [value]
                out += [_unescape(p) for p in parts if p]
    return tuple(out)


class Place(NamedTuple):
    """Where a location lies: the mount that shows it and its file-system path."""

    mount: Mount
    fs_path: str


class MountsUnreadable(Exception):
    """The mount table could not be read: nothing can be decided about aliases."""


def _unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse(text: str) -> tuple[Mount, ...]:
    """The mounts of a mountinfo text, in its order. Lines that do not parse are an
    error: a table read wrongly could hide a mount."""
    out: list[Mount] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(" ")
        if len(fields) < 5 or ":" not in fields[2]:
            raise MountsUnreadable(f"an unexpected line in {MOUNTINFO}: {line[:80]!r}")
        try:
            mount_id, parent = int(fields[0]), int(fields[1])
        except ValueError as err:
            raise MountsUnreadable(f"an unexpected line in {MOUNTINFO}: {line[:80]!r}") from err
        # The optional fields end at a lone "-"; then type, source, super options.
        after = fields[fields.index("-", 6) + 1:] if "-" in fields[6:] else []
        out.append(Mount(mount_id, parent, fields[2], _unescape(fields[3]),
                         _unescape(fields[4]), _layers(after)))
    return tuple(out)


def read(path: str = MOUNTINFO) -> tuple[Mount, ...]:
    """This process's mounts. Raises :class:`MountsUnreadable`."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return parse(f.read())
    except OSError as err:
        raise MountsUnreadable(f"{path} could not be read ({err.strerror})") from err


def _join(base: str, rest: str) -> str:
    if not rest:
        return base
    return (base.rstrip("/") + "/" + rest.lstrip("/")) if base != "/" else "/" + rest.lstrip("/")


class Mounts:
    """The mount table, with the question "which mount shows this location?"."""

    def __init__(self, mounts: tuple[Mount, ...]) -> None:
        self.mounts = mounts
        self._by_id = {m.id: m for m in mounts}
        # Mount point -> the mounts there, in table order: a location's candidates are
        # found by its prefixes, not by scanning a table of hundreds (snaps, containers).
        self._at: dict[str, list[tuple[int, Mount]]] = {}
        for i, m in enumerate(mounts):
            self._at.setdefault(m.point, []).append((i, m))
        self._places: dict[str, Place | None] = {}

    def _ancestors(self, mount: Mount) -> set[int]:
        seen: set[int] = set()
        m: Mount | None = mount
        while m is not None and m.id not in seen:
            seen.add(m.id)
            m = self._by_id.get(m.parent) if m.parent != m.id else None
        return seen

    def _candidates(self, location: str) -> list[Mount]:
        """The mounts whose point is ``location`` or a folder above it, in table order."""
        found: list[tuple[int, Mount]] = list(self._at.get("/", []))
        end = 0
        while True:
            end = location.find("/", end + 1)
            prefix = location if end < 0 else location[:end]
            if prefix and prefix != "/":
                found += self._at.get(prefix, [])
            if end < 0:
                break
        return [m for _, m in sorted(found, key=lambda pair: pair[0])]

    def place(self, location: str) -> Place | None:
        """The mount showing canonical ``location`` and the location's file-system path
        (None when no mount covers it, which only a broken table gives)."""
        if location in self._places:
            return self._places[location]
        best: Mount | None = None
        for m in self._candidates(location):
            if best is None or len(m.point) >= len(best.point):
                # Deeper, or stacked on the same point later: it is what is seen.
                best = m
            elif m.id not in self._ancestors(best):
                # Mounted later over a folder above the best so far: it hides it.
                best = m
        found = None
        if best is not None:
            rest = location[len(best.point):] if best.point != "/" else location
            found = Place(best, _join(best.root, rest))
        self._places[location] = found
        return found


def same_or_inside(place: Place, folder: Place, *, strict: bool = False) -> str | None:
    """When ``place`` shows ``folder`` or something in it (the same device, a
    file-system path equal to or below the folder's; strictly below with ``strict``),
    the part below the folder ("" for the folder itself), else None."""
    if place.mount.device != folder.mount.device:
        return None
    path, base = place.fs_path, folder.fs_path
    if path == base:
        return None if strict else ""
    prefix = base if base.endswith("/") else base + "/"
    if path.startswith(prefix):
        return path[len(prefix):]
    return None


def load() -> Mounts:
    """This process's mount table. Raises :class:`MountsUnreadable`."""
    return Mounts(read())
