"""What a session made outside the box, and removing it. A leaf: only the standard
library, since the watchdog program (:mod:`sandbox.process.watchdog_main`) imports it
with nothing else on its path.

A session makes files in the user's repository (a ``commondir`` of ".", empty files and
folders over protected names) and a private temp folder. Its manifest, a JSON file in
the per-user private root, lists them; whoever cleans up (the session's end, the
watchdog, or the next session once the owner is gone) removes each only if it is still
what was made, owned by this user, and reached without following a link. It also names
the project's tool configs that were missing at the open: what the box made there is
moved out of the project first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress


def _open_parent(root: str, rel: str) -> int:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [p for p in rel.split("/")[:-1] if p]:
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


class _Parents:
    """The folders things are removed from, each opened once (without following a
    link) for all the names in it: a repository with hundreds of modules has two or
    three made names in each of hundreds of git folders."""

    def __init__(self) -> None:
        self._fds: dict[tuple[str, str], int] = {}

    def of(self, root: str, rel: str) -> int:
        key = (root, rel.rsplit("/", 1)[0] if "/" in rel else "")
        fd = self._fds.get(key)
        if fd is None:
            fd = self._fds[key] = _open_parent(root, rel)
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _unmake(root: str, rel: str, kind: str, content: bytes, parents: _Parents) -> None:
    import stat as _stat

    fd = parents.of(root, rel)
    name = rel.rsplit("/", 1)[-1]
    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if st.st_uid != os.getuid():
        return
    if kind == "dir" and _stat.S_ISDIR(st.st_mode):
        os.rmdir(name, dir_fd=fd)  # only if empty
    elif kind == "file" and _stat.S_ISREG(st.st_mode) and st.st_size == len(content):
        same = not content  # an empty file is what was made: nothing to read
        if content:
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                same = os.read(f, len(content) + 1) == content
            finally:
                os.close(f)
        if same:
            os.unlink(name, dir_fd=fd)


def start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(b")", 1)[-1].split()[19].decode()


# Beside the manifests: held while a session finds what it protects and makes what is
# missing (its layout, what it adopts, its manifest), and while one removes what it made.
LOCK = "made.lock"


@contextmanager
def made_lock(folder: str) -> Iterator[None]:
    """Sessions of this user side by side on one project (a harness's sub-agents, a hook
    beside a command) take turns here: otherwise one could remove what it made while
    another, which found it there, had not yet said it uses it (that one's box then
    opens on a name gone, or host git reads a ``commondir`` half gone), or two ending at
    once could each leave it to the other."""
    import fcntl

    fd = os.open(os.path.join(folder, LOCK),
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    _held.add(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        _held.discard(fd)
        os.close(fd)


# The lock's descriptors this process holds: a child forked meanwhile (by another
# thread: a stage's namespace holder) closes its copies, or it would hold the lock on
# for as long as it lives.
_held: set[int] = set()


def _forget_held() -> None:
    for fd in list(_held):
        with suppress(OSError):
            os.close(fd)
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_held)


def live_made(folder: str, but: str = "") -> set[tuple[str, str]]:
    """(root, rel) of everything listed by the manifests in ``folder`` (but ``but``)
    whose owner still runs: another session of this user may use what one made."""
    import contextlib
    import json

    out: set[tuple[str, str]] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if not name.endswith(".made") or path == but:
                continue
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                if data["start"] and start_time(int(data["pid"])) == data["start"]:
                    out.update((r, rel) for r, rel, *_ in data["made"])
    return out


def own_tmp(manifest: str, pid: object) -> str:
    """The private temp folder a manifest may remove: the one beside it, whose name it
    carries (``<root>/session-<pid>-*`` for ``<root>/session-<pid>-*.made``), never a
    path read from inside it -- a forged manifest would otherwise name any folder of
    the user's. "" when the manifest's own name is not a session's."""
    folder, name = os.path.split(manifest)
    if not name.endswith(".made") or not isinstance(pid, int):
        return ""
    tmp = name[:-len(".made")]
    prefix = f"session-{pid}-"
    if not tmp.startswith(prefix) or len(tmp) == len(prefix) or "/" in tmp:
        return ""
    return os.path.join(folder, tmp)


SHM = "/dev/shm"


def shm_views(tmp: str) -> str:
    """Where the session whose private temp folder is ``tmp`` may make its views of the
    module configs (sandbox/git/views.py): in this user's folder on ``/dev/shm``, a
    tmpfs no box sees (a box's ``/dev`` is its own), where a file is made without the
    disk's journal. Named after ``tmp``, so that whoever cleans up finds it from the
    manifest's own name."""
    return os.path.join(SHM, f"harness-sandbox-{os.getuid()}",
                        os.path.basename(tmp) + ".views")


# From this many files to make or remove, two threads do it: a disk's journal makes or
# removes a file in up to 0.1 ms, most of it waiting, with the interpreter's lock let go.
IN_TWO_AT = 64


def half_at(entries: Sequence[Sequence[str | bytes]]) -> int:
    """Where to cut ``entries`` (root, relative path, ...) in two: about the middle,
    between two folders, so that each half opens its own."""
    at = len(entries) // 2
    while 0 < at < len(entries) and os.path.dirname(str(entries[at][1])) == \
            os.path.dirname(str(entries[at - 1][1])):
        at += 1
    return at


def _unmake_all(entries: Sequence[Sequence[str]], busy: set[tuple[str, str]]) -> None:
    import contextlib

    parents = _Parents()
    try:
        for root, rel, kind, content in entries:
            if (root, rel) in busy:
                continue
            with contextlib.suppress(OSError):
                _unmake(root, rel, kind, bytes.fromhex(content), parents)
    finally:
        parents.close()


def _move_out(moves: object) -> None:
    """Other tools' configs the box made, moved out of the project
    (:mod:`sandbox.process.moving`): after the session's own last move, nothing is left
    to move; after a harness that died, what its box made since its last run ended."""
    import contextlib

    if not isinstance(moves, dict):
        return
    with contextlib.suppress(Exception):
        from sandbox.process.moving import move_rows

        project, rows, links, base = (moves["project"], moves["rows"], moves["links"],
                                      moves["base"])
        if (isinstance(project, str) and isinstance(base, str) and isinstance(links, dict)
                and isinstance(rows, list) and all(isinstance(r, str) for r in rows)):
            move_rows(project, rows, links, base)


def _move_kept(kept: object) -> None:
    """git's names missing at the session's open (:func:`sandbox.session.leftovers.kept_record`):
    what a box made there and its keeper did not move (the harness died), moved out."""
    import contextlib

    if not isinstance(kept, dict):
        return
    with contextlib.suppress(Exception):
        from sandbox.process.moving import move_rows

        rows, base = kept["rows"], kept["base"]
        if isinstance(base, str) and isinstance(rows, list):
            for root, rel in rows:
                if isinstance(root, str) and isinstance(rel, str):
                    move_rows(root, [rel], {}, base)


def clean_session(manifest: str) -> None:
    """Remove what the session of ``manifest`` made and no other live session uses,
    then the manifest: the files (many in two threads), then the folders, the last
    made first; in turn with the sessions opening (:func:`made_lock`)."""
    with made_lock(os.path.dirname(manifest)):
        _clean_locked(manifest)


def _clean_locked(manifest: str) -> None:
    import contextlib
    import json
    import stat as _stat

    with open(manifest, encoding="utf-8") as f:
        data = json.load(f)
    _move_out(data.get("moves"))
    _move_kept(data.get("kept"))
    busy = live_made(os.path.dirname(manifest), manifest)
    made = list(reversed(data.get("made", [])))
    files = [e for e in made if e[2] == "file"]
    half = half_at(files) if len(files) >= IN_TWO_AT else len(files)
    other = None
    if half < len(files):
        import threading

        other = threading.Thread(target=_unmake_all, args=(files[half:], busy),
                                 name="harness-sandbox-unmade", daemon=True)
        other.start()
    try:
        _unmake_all(files[:half], busy)
    finally:
        if other is not None:
            other.join()
    _unmake_all([e for e in made if e[2] != "file"], busy)
    tmp = own_tmp(manifest, data.get("pid"))
    if tmp and os.path.ismount(tmp):
        # A root session's /tmp is a tmpfs on its folder (sandbox/box/harden.py): a mount
        # point cannot be removed, so it is detached first.
        from sandbox.libc import detach

        detach(tmp)
    # The box's /tmp, the module configs' views (sandbox/git/views.py), and the folder of
    # the stage's copy of / (sandbox/linux/stage.py), empty on the host.
    for folder in (tmp, tmp + ".views", shm_views(tmp), tmp + ".root") if tmp else ():
        with contextlib.suppress(OSError):
            st = os.lstat(folder)
            if _stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                remove_folder(folder)
    with contextlib.suppress(OSError):
        os.unlink(manifest)


def remove_folder(folder: str, *, ignore_errors: bool = False) -> None:
    """Remove ``folder`` and what it holds, never through a link (as
    :func:`shutil.rmtree`). Most often it is empty (a session's /tmp once its tmpfs is
    detached): then without importing shutil, which costs a command's start
    milliseconds."""
    try:
        os.rmdir(folder)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass  # not empty, or not a folder: rmtree says which
    import shutil

    shutil.rmtree(folder, ignore_errors=ignore_errors)  # fd-based: it never follows a link
