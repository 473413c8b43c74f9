"""What a session makes outside the box and must not leave behind: the files and
folders made over protected git names, and the private temp folder.

:func:`make` writes them and a manifest naming them (and the owner: this process, by
pid and start time) in the per-user private root; the session's end removes them with
:func:`sandbox.process.made.clean_session`, the watchdog does the same if the harness dies,
and :func:`sweep` at the next session's start does it for an owner that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable

from . import beneath
from .process.made import clean_session, live_made, start_time

MANIFEST_SUFFIX = ".made"


def start(tmp: str) -> str:
    """The manifest of the session whose private temp folder is ``tmp``, written beside
    it naming only that folder so far; its path."""
    manifest = tmp + MANIFEST_SUFFIX
    _write(manifest, {"pid": os.getpid(), "start": start_time(os.getpid()), "tmp": tmp,
                      "made": []})
    return manifest


def make(manifest: str, tmp: str, roots: tuple[str, ...], *, dirs: Iterable[str],
         files: Iterable[tuple[str, bytes]], protected: Iterable[str] = ()) -> None:
    """Make each folder, then each file, where nothing is yet (never through a link).
    The manifest lists them before anything is made, so a kill half-way leaves nothing
    unlisted (removing what was never made is harmless). What another live session
    made and this one protects is listed too: the last of them to end removes it."""
    made: list[list[str]] = []
    data = {"pid": os.getpid(), "start": start_time(os.getpid()), "tmp": tmp,
            "made": made}
    plan = [(d, "dir", b"") for d in dirs] + [(p, "file", c) for p, c in files]
    entries: list[tuple[str, str, str, bytes]] = []
    for path, kind, content in plan:
        where = beneath.relative(path, roots)
        if where is not None:
            entries.append((*where, kind, content))
    made += [[r, rel, k, c.hex()] for r, rel, k, c in entries]
    _write(manifest, data)
    shared = live_made(os.path.dirname(manifest), manifest)
    done: list[list[str]] = [
        [r, rel, k, c.hex()] for r, rel, k, c in _adopted(protected, roots, shared)]
    made += done
    _write(manifest, data)
    for root, rel, kind, content in entries:
        with contextlib.suppress(OSError):
            if beneath.create_beneath(root, rel, folder=kind == "dir", content=content):
                done.append([root, rel, kind, content.hex()])
    data["made"] = done
    _write(manifest, data)


def _adopted(protected: Iterable[str], roots: tuple[str, ...],
             shared: set[tuple[str, str]]) -> list[tuple[str, str, str, bytes]]:
    out: list[tuple[str, str, str, bytes]] = []
    for p in protected:
        where = beneath.relative(p, roots)
        if where is None or where not in shared:
            continue
        found = beneath.find(*where)
        if found.kind == "dir":
            out.append((*where, "dir", b""))
        elif found.kind == "file":
            data = beneath.read_beneath(*where, 4096)
            if data is not None:
                out.append((*where, "file", data))
    return out


def _write(manifest: str, data: object) -> None:
    part = manifest + ".part"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(part, manifest)


def sweep(root: str) -> int:
    """Clean up after every session in ``root`` whose owner is gone; how many. Only
    regular files named ``*.made`` owned by this user are read."""
    cleaned = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if not name.endswith(MANIFEST_SUFFIX):
            continue
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if not os.path.isfile(path) or os.path.islink(path) or st.st_uid != os.getuid():
            continue
        pid = data.get("pid")
        if not isinstance(pid, int) or not data.get("start"):
            continue  # no start time to tell a live owner from a gone one: left alone
        if start_time(pid) == data["start"]:
            continue  # its owner still runs
        with contextlib.suppress(Exception):
            clean_session(path)
            cleaned += 1
    return cleaned
