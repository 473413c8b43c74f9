"""What the box without namespaces may not change in its writable folders, put back
after each run.

Landlock's rules are granted to a folder and all beneath it: a writable project cannot
hold a read-only ``.git/config``, nor a name that must not be made (``.git/hooks``,
``commondir``). The namespace box binds those read-only; this box cannot. So each of
the session's protected paths (:meth:`~sandbox.policy.Policy.protected_paths`, and the
``hooks`` folders that were missing) is read at the session's open, whole (a folder with
all it holds, modes, links as links), and compared after each run, once every process
of that run has ended, and at the session's end. One that changed is moved out of the
project as the box left it (:func:`sandbox.process.moving.move_rows`, no link followed,
a link on the way moved in its place) into the user's data folder, and put back as it
was at the open; the session's warnings say which, and where the box's version went.

What this does not stop: while a run is going, the changed file is there for whatever
reads it then. A host program that runs *during* a boxed run (a ``serve`` client's host
hook beside a boxed command, the harness's own git) can be made to run what the box
planted; after the run it is gone. Said in the box's list of what it gives up.

The namespace box keeps the same way what it cannot bind: a protected name git reads
that did not exist at the open (``commondir``, ``config.worktree``, a missing ``hooks``
folder, a file a key names). A bind needs a name that exists, and a name made for it
would be a file nobody made in the user's repository, which git itself then reads (a
``commondir`` of ``.`` makes git answer with absolute paths). So nothing is made there:
what a run makes is moved out once the run is over.

A name missing at the open is never taken as a new start, whoever made it: another
session's box on the same project is no more the host's own than this one's (were it
taken, this session's put-back would plant it again once the other moved it out).
A session takes what changed as the host's own only while no run of any of this
user's sessions is going (:mod:`sandbox.process.runs`): :meth:`Keeper.settle` in the
Landlock box; :meth:`Keeper.appeared`, a name that did not exist, in both.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Mapping

from sandbox.fs import beneath
from sandbox.text import escape

# One protected path read whole at the open: more than this, and the box is refused
# (a tree that large is not git's inputs; reading it after every run would be slow).
LIMIT = 32 << 20

# What is at a path: ("missing",), ("link", target), ("file", mode, bytes),
# ("dir", mode, ((name, entry), ...)).
Entry = tuple[object, ...]
MISSING: Entry = ("missing",)
# Why a name the box may write is kept rather than held read-only: the Landlock box's.
LANDLOCK = "the Landlock box cannot hold it read-only"


def _read_at(dfd: int, name: str, budget: list[int]) -> Entry:
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return ("missing",)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(name, dir_fd=dfd))
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISREG(st.st_mode):
        budget[0] -= st.st_size
        if budget[0] < 0:
            raise OverflowError(name)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        with open(fd, "rb") as f:
            return ("file", mode, f.read())
    if stat.S_ISDIR(st.st_mode):
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                      dir_fd=dfd)
        try:
            names = sorted(os.listdir(sub))
            return ("dir", mode, tuple((n, _read_at(sub, n, budget)) for n in names))
        finally:
            os.close(sub)
    return ("other", stat.S_IFMT(st.st_mode))


def read(root: str, rel: str) -> Entry:
    """What is at ``root/rel``, whole, never through a link; ``("blocked",)`` when a
    folder on the way is a link or no folder."""
    parent, name = os.path.split(rel)
    try:
        dfd = _open_dir(root, parent)
    except OSError as err:
        return ("missing",) if err.errno == errno.ENOENT else ("blocked",)
    try:
        return _read_at(dfd, name, [LIMIT])
    finally:
        os.close(dfd)


def _open_dir(root: str, rel: str) -> int:
    """The folder ``root/rel`` opened for making entries in, never through a link."""
    fd = beneath.open_dir_beneath(root, rel)
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.close(fd)


def _folders_to(root: str, parent: str) -> None:
    """The folders on the way to ``root/parent``, made (mode 755) where missing."""
    made = ""
    for part in [p for p in parent.split("/") if p]:
        fd = _open_dir(root, made)
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        finally:
            os.close(fd)
        made = os.path.join(made, part)


def _write_at(dfd: int, name: str, entry: Entry) -> None:
    kind = entry[0]
    if kind == "link":
        os.symlink(str(entry[1]), name, dir_fd=dfd)
    elif kind == "file":
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        with open(fd, "wb") as f:
            f.write(entry[2])  # type: ignore[arg-type]
            os.fchmod(f.fileno(), int(entry[1]))  # type: ignore[call-overload]
    elif kind == "dir":
        os.mkdir(name, 0o700, dir_fd=dfd)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                      dir_fd=dfd)
        try:
            for child, inner in entry[2]:  # type: ignore[attr-defined]
                _write_at(sub, child, inner)
            os.fchmod(sub, int(entry[1]))  # type: ignore[call-overload]
        finally:
            os.close(sub)


def put_back(root: str, rel: str, entry: Entry) -> None:
    """``entry`` made at ``root/rel`` (where nothing is now), never through a link."""
    if entry[0] == "missing":
        return
    parent, name = os.path.split(rel)
    _folders_to(root, parent)
    dfd = _open_dir(root, parent)
    try:
        _write_at(dfd, name, entry)
    finally:
        os.close(dfd)


class Keeper:
    """The protected paths as they were when no run was going; :meth:`check` after each
    run, :meth:`settle` before a run that starts while none is going (what changed then
    is the host's own: every process of the last run has ended)."""

    def __init__(self, paths: tuple[str, ...], roots: tuple[str, ...],
                 env: Mapping[str, str], session: str, *, why: str = LANDLOCK) -> None:
        from sandbox.session.moveout import data_folder

        self.base = os.path.join(data_folder(env), f"{time.strftime('%Y%m%d-%H%M%S')}-"
                                                   f"{session}-protected")
        self.why = why
        self.roots = roots
        self.kept: list[tuple[str, str, Entry]] = []
        # (root, rel) of the names missing at the start: one lstat each after a run.
        self.absent: set[tuple[str, str]] = set()
        # (root, rel) of what a run changed that could not be moved out: a run's, never
        # taken as the host's (settle, appeared) while it stays.
        self.unmoved: set[tuple[str, str]] = set()
        self.add(paths)

    def add(self, paths: tuple[str, ...]) -> None:
        """Keep ``paths`` too, as they are now (one kept already stays as it is)."""
        known = {(root, rel) for root, rel, _ in self.kept}
        for path in paths:
            where = beneath.relative(path, self.roots)
            if where is None or not where[1] or where in known:
                continue
            try:
                entry = read(*where)
            except OverflowError:
                from sandbox.errors import SandboxUnavailable

                raise SandboxUnavailable(
                    f"{escape(path)} holds more than {LIMIT >> 20} MiB, which the Landlock "
                    "box would read after every run to put it back if changed",
                    "move what it holds elsewhere, or use the namespace box "
                    '([sandbox] box = "auto")') from None
            self.kept.append((*where, entry))
            if entry == MISSING:
                self.absent.add(where)

    def settle(self) -> tuple[str, ...]:
        """The paths as they are now, as what :meth:`check` puts back (one that grew
        past :data:`LIMIT` keeps what it was); those missing before that are there now.
        Only while no run of any of the user's sessions is going
        (:mod:`sandbox.process.runs`)."""
        came = tuple(os.path.join(*w) for w in self.absent if not _gone(os.path.join(*w)))
        now = []
        for root, rel, was in self.kept:
            try:
                entry = was if (root, rel) in self.unmoved else read(root, rel)
            except OverflowError:
                entry = was
            now.append((root, rel, entry))
            if entry == MISSING:
                self.absent.add((root, rel))
            else:
                self.absent.discard((root, rel))
        self.kept = now
        return tuple(p for p in came if beneath.relative(p, self.roots) not in self.absent)

    def appeared(self) -> tuple[str, ...]:
        """The names missing at the start that are there now as a file or a folder
        reached without a link, no longer kept (a box that can bind them holds them
        read-only from now on). Only while no run of any session is going."""
        out, left = [], []
        for root, rel, was in self.kept:
            if (root, rel) in self.absent and (root, rel) not in self.unmoved and \
                    not _gone(os.path.join(root, rel)):
                try:
                    kind = read(root, rel)[0]
                except OverflowError:
                    kind = "large"
                if kind in ("file", "dir"):
                    out.append(os.path.join(root, rel))
                    self.absent.discard((root, rel))
                    continue
            left.append((root, rel, was))
        self.kept = left
        return tuple(out)

    def check(self) -> list[str]:
        """Each protected path the box changed, moved out and put back: one line each."""
        from sandbox.process.moving import move_rows

        said: list[str] = []
        for root, rel, was in self.kept:
            if (root, rel) in self.absent and _gone(os.path.join(root, rel)):
                self.unmoved.discard((root, rel))
                continue  # nothing there for host git to read (it follows links too)
            try:
                now = read(root, rel)
            except OverflowError:
                now = ("large",)
            if now == was:
                self.unmoved.discard((root, rel))
                continue
            moved = move_rows(root, [rel], {}, self.base) if now != MISSING else []
            went = next((m[2] for m in moved if m[2]), "")
            path = os.path.join(root, rel)
            if any(m[4] for m in moved):
                self.unmoved.add((root, rel))
            else:
                self.unmoved.discard((root, rel))
            if was == MISSING:  # nothing found there (a folder closed, say): nothing to say
                if moved:
                    said.append(_made(path, went, next((m[4] for m in moved if m[4]), "")))
                continue
            try:
                put_back(root, rel, was)
                done = "put back as it was at the session's open"
            except OSError as err:
                done = f"could not be put back ({err.strerror})"
            where = f"; the box's version is at {escape(went)}" if went else ""
            said.append(f"the box changed {escape(path)}, which host programs read "
                        f"({self.why}): {done}{where}")
        return said


def _gone(path: str) -> bool:
    """Nothing is at ``path`` (a folder on the way the box closed is no answer)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def _made(path: str, went: str, why: str) -> str:
    """What to say of a name, missing at the open, that a run made."""
    from sandbox.session.moveout import put_back as put_back_line

    head = (f"the box made {escape(path)}, which host programs read (it did not exist "
            "when the session opened, so nothing held it)")
    if not went:
        return (f"{head}, and it could not be moved out ({escape(why or 'unknown')}); "
                "check it before host git runs in this project")
    return (f"{head}: it was moved out to {escape(went)}; to put it back once you have "
            f"checked it, after the session: {escape(put_back_line(went, path))}")
