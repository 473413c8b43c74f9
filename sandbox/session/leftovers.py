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
import stat as _stat
from collections.abc import Iterable, Mapping

from sandbox.fs import beneath
from sandbox.process.beside import Beside
from sandbox.process.made import IN_TWO_AT, clean_session, half_at, live_made, start_time

MANIFEST_SUFFIX = ".made"


def start(tmp: str, moves: Mapping[str, object] | None = None) -> str:
    """The manifest of the session whose private temp folder is ``tmp``, written beside
    it naming only that folder so far, and ``moves``, what is moved out of the project
    if the harness dies (:meth:`sandbox.session.moveout.MoveOut.record`); its path."""
    manifest = tmp + MANIFEST_SUFFIX
    _write(manifest, _head(tmp, moves))
    return manifest


def _head(tmp: str, moves: Mapping[str, object] | None) -> dict[str, object]:
    return {"pid": os.getpid(), "start": start_time(os.getpid()), "tmp": tmp, "made": [],
            **({"moves": moves} if moves else {})}


def make(manifest: str, tmp: str, roots: tuple[str, ...], *, dirs: Iterable[str],
         files: Iterable[tuple[str, bytes]], protected: Iterable[str] = (),
         moves: Mapping[str, object] | None = None,
         kept: Mapping[str, object] | None = None) -> None:
    """Make each folder, then each file, where nothing is yet (never through a link).
    The manifest lists them before anything is made, so a kill half-way leaves nothing
    unlisted (removing what was never made is harmless). What another live session
    made and this one protects is listed too: the last of them to end removes it.
    ``moves`` is kept as :func:`start` wrote it; ``kept``: git's names missing at the
    open, moved out if the harness dies (:func:`kept_record`)."""
    made: list[list[str]] = []
    data = {**_head(tmp, moves), **({"kept": kept} if kept else {}), "made": made}
    plan = [(d, "dir", b"") for d in dirs] + [(p, "file", c) for p, c in files]
    entries: list[tuple[str, str, str, bytes]] = []
    for path, kind, content in plan:
        where = beneath.relative(path, roots)
        if where is not None:
            entries.append((*where, kind, content))
    made += [[r, rel, k, c.hex()] for r, rel, k, c in entries]
    # Written again only when it changed: replacing a file costs the disk a flush (ext4
    # writes a replaced file's data out first), and most sessions make nothing.
    shown = _write(manifest, data, json.dumps(_head(tmp, moves)))  # as start() wrote
    shared = live_made(os.path.dirname(manifest), manifest)
    done: list[list[str]] = [
        [r, rel, k, c.hex()] for r, rel, k, c in _adopted(protected, roots, shared)]
    made += done
    shown = _write(manifest, data, shown)
    # The folders first (a file may go in one); many files in two threads, each with the
    # folders of its half: a disk's journal makes a file in up to 0.1 ms, most of it
    # waiting, with the interpreter's lock let go.
    named = [e for e in entries if e[2] != "dir"]
    _create_all([e for e in entries if e[2] == "dir"], done)
    half = half_at(named) if len(named) >= IN_TWO_AT else len(named)
    other = Beside(lambda: _create_all(named[half:], done), "harness-sandbox-made") \
        if half < len(named) else None
    try:
        _create_all(named[:half], done)
    finally:
        failed = other.join() if other is not None else None
    if failed is not None:
        raise failed
    data["made"] = done
    _write(manifest, data, shown)


def kept_record(kept: Iterable[str], roots: tuple[str, ...], base: str
                ) -> dict[str, object] | None:
    """What the manifest keeps of git's names missing at the open (``kept``, absolute):
    each as (root, rel), and the folder what a box made there goes to when the harness
    died before its keeper moved it (:func:`sandbox.process.made.clean_session`)."""
    rows = [list(w) for p in kept if (w := beneath.relative(p, roots)) is not None]
    return {"rows": rows, "base": base} if rows else None


def _create_all(entries: list[tuple[str, str, str, bytes]], done: list[list[str]]) -> None:
    """Make each of ``entries`` where nothing is, each made added to ``done``; one that
    another session made meanwhile, as this one would have (an empty folder, a file of
    the same bytes), is added too: its maker may end first, and would remove it from
    under this session's box, or leave it behind if it saw this one's plan."""
    folders = beneath.Folders()
    try:
        for root, rel, kind, content in entries:
            with contextlib.suppress(OSError):
                if beneath.create_beneath(root, rel, folder=kind == "dir", content=content,
                                          folders=folders) or _as_made(root, rel, kind,
                                                                       content):
                    done.append([root, rel, kind, content.hex()])
    finally:
        folders.close()


def _as_made(root: str, rel: str, kind: str, content: bytes) -> bool:
    """Whether ``root/rel`` is what :func:`make` would have made there."""
    found = beneath.find(root, rel)
    if kind == "dir":
        return found.kind == "dir"
    return found.kind == "file" and beneath.read_beneath(root, rel, 4096) == content


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


def held_now(manifest: str, paths: tuple[str, ...]) -> None:
    """``paths`` are the host's now (they appeared while no run went, and the session
    holds them): the manifest no longer names them for moving out if the harness dies."""
    gone = set(paths)
    with open(manifest, encoding="utf-8") as f:
        data = json.load(f)
    moves, kept = data.get("moves"), data.get("kept")
    if isinstance(moves, dict) and isinstance(moves.get("rows"), list):
        moves["rows"] = [r for r in moves["rows"]
                         if os.path.join(str(moves.get("project")), str(r)) not in gone]
    if isinstance(kept, dict) and isinstance(kept.get("rows"), list):
        kept["rows"] = [r for r in kept["rows"] if os.path.join(*map(str, r)) not in gone]
    _write(manifest, data)


def _write(manifest: str, data: object, shown: str = "") -> str:
    """Write ``data`` as the manifest, unless ``shown`` (what it holds) says so already;
    what it holds now."""
    text = json.dumps(data)
    if text == shown:
        return text
    part = manifest + ".part"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(part, manifest)
    return text


def sweep(root: str) -> int:
    """Clean up after every session in ``root`` whose owner is gone; how many. Only
    regular files named ``*.made`` owned by this user are read."""
    cleaned = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if name.endswith(MANIFEST_SUFFIX + ".part"):
            _drop_part(root, name)
            continue
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


def _drop_part(root: str, name: str) -> None:
    """A manifest half-written by a session that is gone (``session-<pid>-*.made.part``):
    removed when it is this user's regular file and its pid no longer runs."""
    path = os.path.join(root, name)
    pid = name[len("session-"):].split("-", 1)[0] if name.startswith("session-") else ""
    with contextlib.suppress(OSError, ValueError):
        st = os.lstat(path)
        if (_stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
                and start_time(int(pid)) is None):
            os.unlink(path)


def refuse_shared_root(root: str, writable: Iterable[str]) -> None:
    """The private root holds every session's bookkeeping: the box must never be able
    to write there. Raises :class:`PolicyError` when it lies inside a folder the box can
    write (``TMPDIR`` in the project, ``[sandbox] writable = ["/tmp"]``) or contains one."""
    from sandbox.errors import PolicyError
    from sandbox.text import escape

    for w in writable:
        real = os.path.realpath(w)
        if root == real or root.startswith(real.rstrip("/") + "/"):
            raise PolicyError(
                f"the private temp root {escape(root)} lies in {escape(real)}, which the "
                "box can write: a boxed command could forge the sessions' records; set "
                "TMPDIR to a folder outside it, or remove that entry from [sandbox] "
                "writable")
        if real.startswith(root.rstrip("/") + "/"):
            raise PolicyError(
                f"[sandbox] writable names {escape(real)}, inside the private temp root "
                f"{escape(root)}: remove that entry")


def refuse_linked(protected: Iterable[str]) -> None:
    """A read-only bind protects a name, not a file: a hard link the agent made earlier
    (``notes.txt`` for ``.git/config``) is a second, writable name for the same file.
    Raises :class:`PolicyError` for the first protected file -- or file in a protected
    folder -- that has more than one name, with the fix; and for one it cannot look
    at (but for a name that is gone): what it cannot check, it does not let through."""
    for p in protected:
        try:
            st = os.lstat(p)
        except OSError as err:
            _unchecked(p, err)
            continue
        if _stat.S_ISDIR(st.st_mode):
            _refuse_linked_in(p)
        else:
            _refuse_one(p, st)


def _refuse_linked_in(folder: str) -> None:
    """:func:`refuse_linked` for every file in ``folder``, at any depth: each name
    looked at once (the hooks folders of a repository with hundreds of modules hold
    thousands of files), no link followed."""
    try:
        entries = list(os.scandir(folder))
    except OSError as err:
        _unchecked(folder, err)
        return
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError as err:
            _unchecked(e.path, err)
            continue
        if _stat.S_ISDIR(st.st_mode):
            _refuse_linked_in(e.path)
        else:
            _refuse_one(e.path, st)


def _unchecked(path: str, err: OSError) -> None:
    """A name that is gone (or that a file stands in the way of) needs no check; any
    other failure (no descriptor left, no permission) refuses the session."""
    import errno

    if err.errno in (errno.ENOENT, errno.ENOTDIR):
        return
    from sandbox.errors import PolicyError
    from sandbox.text import escape

    raise PolicyError(f"{escape(path)} could not be checked for hard links "
                      f"({err.strerror}), so the session is not opened; make it "
                      "readable to you and try again")


def _refuse_one(path: str, st: os.stat_result) -> None:
    if st.st_nlink > 1 and _stat.S_ISREG(st.st_mode):
        from sandbox.errors import PolicyError
        from sandbox.text import escape

        shown = escape(path)
        raise PolicyError(
            f"{shown} has {st.st_nlink} names (hard links): through another one the "
            "box could rewrite it while it is read-only here; make it a file of its "
            f"own and check it: cp -p {shown} {shown}.own && mv {shown}.own {shown}")
