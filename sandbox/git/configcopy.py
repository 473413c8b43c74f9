"""The box's own copy of the project's ``.git/config``, and what the host takes from it.

git writes its config by making ``config.lock`` beside it and renaming that over the
file; a file bound over ``.git/config`` (read-only or not) cannot be renamed over
("Device or resource busy"), so no bind of a file lets git in the box write its config.
git resolves a link first, though, and locks and renames beside the file the link
names. So the box is shown, over ``.git/config``, a *link* (a mount of a symlink, made
by the session's stage, :mod:`sandbox.linux.stagebinds`) to ``/tmp/.harness-git/config``,
a copy of the project's config in the box's own ``/tmp`` (the session's private temp
folder). git in the box reads and writes that copy; the project's file is never
written from the box, and host git reading it during a run sees the user's config.

After each boxed run (and at the session's end) the host compares the copy with what
it was at the run's start, both read by the host's own git (``git config --file F
--no-includes --list -z``, the file first copied out of the box's reach), and applies
to the project's config only the changes to keys :mod:`sandbox.git.writes` allows
(additions, changes, removals, and a section left empty removed), with the host's git
on a private scratch copy. The result is written into the project's file in place,
under git's own ``config.lock``: renaming over it would free the name from the mounts
on it in every session's box. The refused changes are said in the session's warnings.
The copy is then set to the project's new config, for the next run.

A link is a mount only the session's stage makes (bwrap would follow it), so a plain
user's box gets a stage wherever the config is a copy
(:meth:`sandbox.linux.bwrap.BwrapBackend.stage`). When the host replaces the project's
config during a session, the box's link goes with the old file: :func:`repair` and
:func:`settled` are what the box does then (:mod:`sandbox.linux.replaced`).
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Mapping

from sandbox.fs import beneath
from sandbox.git import config as gitconfig
from sandbox.git import safe as gitsafe
from sandbox.git.writes import refusal
from sandbox.text import escape

# In the box's /tmp (the session's private temp folder): the folder of the copy.
FOLDER = ".harness-git"
NAME = "config"
# In the session's views folder, outside the box's sight: the link the stage mounts,
# and what the copy held at the run's start.
LINK = "git-config.link"
BASE = ".base"
MADE = ".made"  # beside the link: the stage mounted it, and the copy was made
LIMIT = 1 << 20  # a config this large is not git's ordinary work
_merging = threading.Lock()

Config = dict[str, list[str | None]]


def make_view(config: str, folder: str, tmp: str) -> tuple[str, str] | None:
    """(``config``, the link the box sees over it): the copy made in ``tmp`` (the
    session's private temp folder), the link in ``folder`` (made here, mode 700).
    None when ``config`` is not a plain file that can be read."""
    data = _read_real(config)
    if data is None:
        return None
    if not os.path.isdir(folder):
        os.mkdir(folder, 0o700)
    link = os.path.join(folder, LINK)
    os.symlink(os.path.join("/tmp", FOLDER, NAME), link)
    _write_private(link + BASE, data)
    return config, link


def prepare(link: str, tmp: str) -> None:
    """Make the copy the config ``link`` names in ``tmp`` (the box's ``/tmp``), from
    what the project's config held at the session's open, if ``link`` is a view of
    this module's: called as the stage mounts the link, once the session's ``/tmp`` is
    mounted (it would hide a copy made before). Raises OSError when it cannot be
    made."""
    if not is_view(link):
        return
    with open(link + BASE, "rb") as f:
        data = f.read()
    if not _reset(tmp, data):
        raise OSError(0, "the box's copy of git's config could not be made", tmp)
    _write_private(link + MADE, b"")


def is_view(source: str) -> bool:
    """Whether a view's ``source`` is a config link of this module's."""
    return os.path.basename(source) == LINK and os.path.islink(source)


def after_run(views: tuple[tuple[str, str], ...], tmp: str, env: Mapping[str, str]
              ) -> list[str]:
    """Take the box's allowed changes of each config link in ``views`` into the
    project's config; the refused ones, said. ``tmp``: the private temp folder."""
    out: list[str] = []
    for config, source in views:
        if os.path.basename(source) != LINK:
            continue
        with _merging:
            out += _merge(config, source, tmp, env)
    return out


def repair(views: tuple[tuple[str, str], ...], replaced: set[str], tmp: str,
           env: Mapping[str, str]) -> list[str]:
    """Each project config of ``views`` in ``replaced`` (its name replaced on the host
    while a run was going: the box's link over it went, and the box could write the
    project's file itself, :mod:`sandbox.linux.replaced`) taken back to what it held
    at the run's start with only the changes :mod:`sandbox.git.writes` allows (the
    host's own ``user.name`` stays; a ``core.fsmonitor`` goes, whoever wrote it); what
    was taken out, said. The copy is then set to the result."""
    out: list[str] = []
    for config, link in views:
        if os.path.basename(link) != LINK or config not in replaced:
            continue
        with _merging:
            out += _repair(config, link, tmp, env)
    return out


def settled(views: tuple[tuple[str, str], ...], replaced: set[str], tmp: str) -> list[str]:
    """Each project config of ``views`` in ``replaced`` (by the host, while no run was
    going: the host's own change) taken as the copy's new start."""
    out: list[str] = []
    for config, link in views:
        if os.path.basename(link) == LINK and config in replaced:
            with _merging:
                out += _settle(config, link, tmp)
    return out


def _repair(config: str, link: str, tmp: str, env: Mapping[str, str]) -> list[str]:
    try:
        with open(link + BASE, "rb") as f:
            base = f.read()
    except OSError:
        return []
    now = _read_real(config)
    git = gitconfig.find_git(env, ())
    if now is None or now == base or git is None:
        return _settle(config, link, tmp)
    old, new = _listed(git, link + BASE, env), _listed(git, _scratch(link, now), env)
    if old is None or new is None:
        return [f"{escape(config)} was replaced on the host during a run, and git cannot "
                "read it now; it was put back as it was at the run's start",
                *_write_in_place(config, base), *_settle(config, link, tmp)]
    apply, refused = _changes(old, new, config)
    said = [f"{escape(config)} was replaced on the host during a run (the box's read-only "
            f"bind of it went with the old file), and {escape(key)} changed meanwhile: "
            f"put back as it was at the run's start: {why}"
            for key, why in _refusals(old, new)]
    if refused:
        said += _apply(git, config, link, apply, env, start=base)
    return said + _settle(config, link, tmp)


def _merge(config: str, link: str, tmp: str, env: Mapping[str, str]) -> list[str]:
    try:
        with open(link + BASE, "rb") as f:
            base = f.read()
    except OSError:
        return []  # the session is ending: its views folder is gone
    now = beneath.read_beneath(tmp, os.path.join(FOLDER, NAME), LIMIT + 1)
    if now == base or not os.path.exists(link + MADE):
        return []  # no change, or a box bwrap bound, which sees no copy
    git = gitconfig.find_git(env, ())
    if now is None or len(now) > LIMIT or git is None:
        # Removed, or made unreadable, by the box: made again. Nothing to take.
        return _settle(config, link, tmp)
    old, new = _listed(git, link + BASE, env), _listed(git, _scratch(link, now), env)
    if old is None or new is None:
        return [f"the box wrote a copy of {escape(config)} that git cannot read; "
                "nothing of it was taken", *_settle(config, link, tmp)]
    apply, said = _changes(old, new, config)
    if apply:
        said += _apply(git, config, link, apply, env)
    return said + _settle(config, link, tmp)


def _changes(old: Config, new: Config, config: str
             ) -> tuple[list[tuple[str, list[str | None]]], list[str]]:
    """The keys to set (to their new values, none: removed) and what was refused."""
    apply: list[tuple[str, list[str | None]]] = []
    said: list[str] = []
    for key in dict.fromkeys((*old, *new)):
        before, after = old.get(key, []), new.get(key, [])
        if before == after:
            continue
        why = next((w for v in (after or before) if (w := refusal(key, v)) is not None),
                   None)
        if why is None:
            apply.append((key, after))
            continue
        what = ("removed " + escape(key) if not after else
                f"set {escape(key)} = {escape(_shown(after))}")
        said.append(f"the box {what} in git's config; refused, not written to "
                    f"{escape(config)}: {why}")
    return apply, said


def _refusals(old: Config, new: Config) -> list[tuple[str, str]]:
    """Each key that changed from ``old`` to ``new`` and may not, with why."""
    out: list[tuple[str, str]] = []
    for key in dict.fromkeys((*old, *new)):
        before, after = old.get(key, []), new.get(key, [])
        why = next((w for v in (after or before) if (w := refusal(key, v)) is not None),
                   None) if before != after else None
        if why is not None:
            out.append((key, why))
    return out


def _shown(values: list[str | None]) -> str:
    return ", ".join("(no value)" if v is None else v for v in values)


def _apply(git: str, config: str, link: str, apply: list[tuple[str, list[str | None]]],
           env: Mapping[str, str], *, start: bytes | None = None) -> list[str]:
    """Set the keys of ``apply`` on a scratch copy of the project's config (or of
    ``start``) with the host's git, and write the result into ``config`` in place."""
    real = _read_real(config) if start is None else start
    if real is None:
        return [f"{escape(config)} could not be read; the box's changes were not taken"]
    scratch = _scratch(link, real)
    emptied: set[str] = set()
    for key, values in apply:
        _git(git, ["--unset-all", "--", key], scratch, env)  # 5: nothing to unset
        for v in values:
            if v is not None and not _git(git, ["--add", "--", key, v], scratch, env):
                return [f"git could not set {escape(key)} in a copy of {escape(config)}; "
                        "the box's changes were not taken"]
        if not values:
            emptied.add(key.rpartition(".")[0])
    left = _listed(git, scratch, env) or {}
    for section in emptied:
        if not any(k.rpartition(".")[0] == section for k in left):
            _git(git, ["--remove-section", "--", section], scratch, env)
    with open(scratch, "rb") as f:
        return _write_in_place(config, f.read())


def _git(git: str, args: list[str], file: str, env: Mapping[str, str]) -> bool:
    done = subprocess.run(gitsafe.argv(git, ["config", "--file", file, *args]),
                          env=gitconfig.git_env(env), cwd="/", capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=30)
    return done.returncode == 0


def _listed(git: str, file: str, env: Mapping[str, str]) -> Config | None:
    """Every entry of ``file`` as git reads it (no includes), by key, in order."""
    done = subprocess.run(gitsafe.argv(git, ["config", "--file", file, "--no-includes",
                                             "--list", "-z"]),
                          env=gitconfig.git_env(env), cwd="/", capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=30)
    if done.returncode != 0:
        return None
    out: Config = {}
    for entry in done.stdout.split(b"\0"):
        if not entry:
            continue
        key, nl, value = entry.decode("utf-8", "surrogateescape").partition("\n")
        out.setdefault(key, []).append(value if nl else None)
    return out


def _scratch(link: str, data: bytes) -> str:
    path = link + ".scratch"
    _write_private(path, data)
    return path


def _write_private(path: str, data: bytes) -> None:
    """``data`` into ``path`` in the session's own views folder."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as f:
        f.write(data)


def _read_real(config: str) -> bytes | None:
    try:
        fd = os.open(config, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, LIMIT + 1)
        return data if len(data) <= LIMIT else None
    finally:
        os.close(fd)


def _write_in_place(config: str, data: bytes) -> list[str]:
    """``data`` written into ``config`` itself (same inode), holding git's lock."""
    import time

    lock = config + ".lock"
    for _ in range(40):
        try:
            held = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            time.sleep(0.05)
    else:
        return [f"{escape(lock)} stayed locked; the box's changes to git's config were "
                "not taken"]
    try:
        fd = os.open(config, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
    finally:
        os.close(held)
        os.unlink(lock)
    return []


def _settle(config: str, link: str, tmp: str) -> list[str]:
    """The copy (and what it holds at the next run's start) set to ``config`` now."""
    data = _read_real(config)
    if data is None:
        return []
    _write_private(link + BASE, data)
    if not _reset(tmp, data):
        return [f"the box's copy of {escape(config)} could not be made again"]
    return []


def _reset(tmp: str, data: bytes) -> bool:
    """``data`` as the copy in ``tmp`` (the box's ``/tmp``), never through a link the
    box put there: a new file renamed over the copy, in a folder reached without
    following one (made, or a link or file in its place removed)."""
    try:
        top = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        folder = _folder(top)
        if folder < 0:
            return False
        try:
            new = f"{NAME}.{os.urandom(6).hex()}.new"  # no name the box could have made
            fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
            with open(fd, "wb") as f:
                f.write(data)
            os.rename(new, NAME, src_dir_fd=folder, dst_dir_fd=folder)
            return True
        except OSError:
            return False
        finally:
            os.close(folder)
    finally:
        os.close(top)


def _folder(top: int) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(2):
        try:
            return os.open(FOLDER, flags, dir_fd=top)
        except FileNotFoundError:
            pass
        except OSError:
            try:
                os.unlink(FOLDER, dir_fd=top)  # a link or a file the box put there
            except OSError:
                return -1
        try:
            os.mkdir(FOLDER, 0o700, dir_fd=top)
        except FileExistsError:
            pass
        except OSError:
            return -1
    return -1
