"""What the host reads to decide what to run, wherever it lies: read-only in the box.

The project's own files of that kind are covered by :mod:`sandbox.git.dirs` and
:mod:`sandbox.policy.toolconfigs`. A ``[sandbox] writable`` folder can hold more: a writable
home holds the toolkit's own config and trust store, git's global config and the
shells' start-up files. Each that exists inside a folder the box can write is bound
read-only. One that does not exist yet is made empty by a session on Linux, with any
folder missing above it, listed in its manifest and removed at its end if still empty,
so the box cannot make it and fill it: an empty ``~/.gitconfig`` or ``~/.bashrc`` is
what none is to git and to bash. Not ``~/.bash_profile`` or ``~/.bash_login``, whose
being there would hide ``~/.profile`` from a login bash: those the session's end says
if the box made them, as is one reached through a link in such a folder. One that is
itself a link there, or is reached through one, refuses the session
(:func:`sandbox.policy.Policy.from_settings`): the box could write what it leads to, or
point it elsewhere. What is bound is named by its folder's real path (:func:`as_bound`).

A writable folder that is or holds a home is closed by mechanism, not by this list
(:func:`homes_in`, :func:`home_kept`): the home's own folder is bound read-only, so
nothing can be made at its top, and only the entries it holds at the start whose names
start with no dot are bound read-write again. Every dot entry -- ``~/.ssh/config``,
``~/.npmrc``, ``~/.inputrc``, ``~/.config/autostart``, ``~/.local/bin``, Python's user
site, an editor's config, one no table names yet -- stays read-only whether it exists
or not, as do ``~/bin`` and ``~/node_modules`` and every entry that is or holds a folder
on the session's PATH. What a user gives up: a box that makes new entries at the top of
a writable home, or writes any dot entry there (caches and package stores included).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping

from pathguard.records import NamedTuple
from sandbox.errors import PolicyError
from sandbox.fs.beneath import link_on_the_way
from sandbox.text import escape

# Under the home folder: git's and the shells' files, and git's folder.
# (~/.bash_aliases is what Debian's and Ubuntu's ~/.bashrc reads; fish runs every file
# of its folder's conf.d, so the whole folder is covered.)
HOME_FILES = (".gitconfig", ".bashrc", ".bash_aliases", ".bash_profile", ".bash_login",
              ".profile", ".bash_logout", ".zshrc", ".zshenv", ".zprofile", ".zlogin",
              ".zlogout")
HOME_FOLDERS = (".config/git", ".config/fish")


def _kinds(env: Mapping[str, str], home: str) -> dict[str, bool]:
    """Each candidate (see :func:`candidates`), and whether it is a folder."""
    xdg_config = env.get("XDG_CONFIG_HOME") or ""
    xdg_data = env.get("XDG_DATA_HOME") or ""
    named = [*((os.path.join(home, n), False) for n in HOME_FILES),
             *((os.path.join(home, n), True) for n in HOME_FOLDERS),
             *((p, True) for p in (
                 env.get("HARNESS_HOME") or "",
                 os.path.join(xdg_config, "harness") if xdg_config else "",
                 os.path.join(xdg_config, "git") if xdg_config else "",
                 os.path.join(xdg_config, "fish") if xdg_config else "",
                 os.path.join(home, ".config", "harness"),
                 os.path.join(xdg_data, "harness") if xdg_data else "",
                 os.path.join(home, ".local", "share", "harness"))),
             (env.get("GIT_CONFIG_GLOBAL") or "", False)]
    out: dict[str, bool] = {}
    for path, folder in named:
        if path and os.path.isabs(path):
            out.setdefault(os.path.normpath(path), folder)
    return out


def candidates(env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """Every path the host reads to decide what to run that this module knows, absolute:
    git's and the shells' files in ``home``, git's global config wherever it is, and
    the toolkit's config and data folders (``$HARNESS_HOME``,
    ``$XDG_CONFIG_HOME/harness``, ``~/.config/harness``, ``$XDG_DATA_HOME/harness``,
    ``~/.local/share/harness``)."""
    return tuple(_kinds(env, home))


# Files whose being there changes which other file a shell reads (a login bash reads the
# first of .bash_profile, .bash_login and .profile): never made, only said at the end.
ORDER_SENSITIVE = (".bash_profile", ".bash_login")


class Covers(NamedTuple):
    """What a Linux session makes before the box in the folders it can write: empty
    folders (the missing ones above each cover first) and empty files."""

    folders: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def covers(roots: Iterable[str], env: Mapping[str, str], home: str) -> Covers:
    """The candidates that lie in one of ``roots`` (the folders the box can write) and
    do not exist, by their real paths: the folders, and the files whose empty stand-in
    means to their tool what no file means (all but :data:`ORDER_SENSITIVE`), each
    after any folder missing above it: what a session whose box binds names that exist
    (bwrap's) makes before the box."""
    real = [os.path.realpath(r) for r in roots]
    kinds = _kinds(env, home)
    # Nothing can be made at a writable home's read-only top: no cover is needed there.
    tops = homes_in(real, home)
    dirs: list[str] = []
    files: list[str] = []
    for p in inside(roots, env, home):
        if os.path.lexists(p) or os.path.basename(p) in ORDER_SENSITIVE:
            continue
        if any(_under(as_bound(p), t) for t in tops):
            continue
        if link_on_the_way(p, tuple(real)) is not None:
            continue  # made through a link the box could re-point: said at the end
        top = p  # the highest missing folder on the way, or p itself
        while not os.path.lexists(os.path.dirname(top)):
            top = os.path.dirname(top)
        above = os.path.dirname(top)
        there = os.path.realpath(above)
        if not (os.path.isdir(there) and any(_under(there, r) for r in real)):
            continue
        chain = [there + d[len(above):] for d in _up_to(p, above)]
        dirs += [d for d in chain[:-1] if d not in dirs]
        (dirs if kinds[p] else files).append(chain[-1])
    return Covers(tuple(dirs), tuple(files))


def _up_to(path: str, above: str) -> list[str]:
    """The folders below ``above`` on the way to ``path``, then ``path``: top down."""
    out = [path]
    while os.path.dirname(out[-1]) != above:
        out.append(os.path.dirname(out[-1]))
    return out[::-1]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def inside(roots: Iterable[str], env: Mapping[str, str], home: str) -> tuple[str, ...]:
    """The candidates that lie in one of ``roots`` (the folders the box can write, not
    the project, whose files :mod:`sandbox.policy.toolconfigs` covers), whether they exist or
    not."""
    real = [os.path.realpath(r) for r in roots]
    out = []
    for p in candidates(env, home):
        if any(_under(os.path.realpath(os.path.dirname(p)), r) or _under(p, r) for r in real):
            out.append(p)
    return tuple(out)


def as_bound(path: str) -> str:
    """``path`` as the box binds it: its folder's real path (the session's roots are
    real; a home reached through a link is named by where it is), then its name."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def present(paths: Iterable[str]) -> tuple[str, ...]:
    """Those that exist as files or real folders (a link is left alone)."""
    return tuple(p for p in paths if os.path.lexists(p) and not os.path.islink(p))


# Entries at a home's top, without a dot, that the host runs code from: the folder
# Debian's and Ubuntu's ~/.profile puts on PATH, and the last folder Node looks in for
# a module a script in the home requires.
HOME_TOP_RUN = ("bin", "node_modules")


def homes_in(roots: Iterable[str], home: str) -> tuple[str, ...]:
    """The homes -- the session's and every account's -- that are one of ``roots`` (the
    folders the box can write, real) or lie below one, by their real paths."""
    real = [os.path.realpath(r) for r in roots]
    named = [home, *(p.pw_dir for p in _accounts())]
    out: list[str] = []
    for h in named:
        if not h or not os.path.isabs(h) or h == "/":
            continue
        h = os.path.realpath(h)
        if h not in out and os.path.isdir(h) and any(_under(h, r) for r in real):
            out.append(h)
    return tuple(out)


def _accounts() -> list[pwd.struct_passwd]:
    try:
        return pwd.getpwall()
    except OSError:
        return []


def home_kept(home: str, path_env: str | None) -> tuple[str, ...]:
    """The entries at the top of ``home`` (real) that the box may write again under its
    read-only top: real folders and plain files whose names start with no dot, but
    :data:`HOME_TOP_RUN` and any that is or holds a folder on ``path_env`` (a link
    stays as it is: the read-only top keeps it from being re-pointed)."""
    on_path = [os.path.realpath(p) for p in (path_env or "").split(":") if p.startswith("/")]
    out: list[str] = []
    try:
        entries = sorted(os.scandir(home), key=lambda e: e.name)
    except OSError:
        return ()
    for e in entries:
        if e.name.startswith(".") or e.name in HOME_TOP_RUN:
            continue
        try:
            if not (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False)):
                continue
        except OSError:
            continue
        if any(_under(p, e.path) for p in on_path):
            continue
        out.append(e.path)
    return tuple(out)


def reads_to_protect(writable: tuple[str, ...], env: Mapping[str, str], home: str
                ) -> tuple[str, ...]:
    """What the host reads to decide what to run that lies in a ``[sandbox] writable``
    folder and exists, bound as the box binds it (:func:`as_bound`). Raises :class:`PolicyError` for
    one reached through a link in such a folder: the box could point it elsewhere."""
    named = inside(writable, env, home) if writable else ()
    for p in named:
        if os.path.islink(p):
            raise PolicyError(
                f"{escape(p)}, which the host reads to decide what to run, is a link in a "
                "folder the box can write (it could point it elsewhere, or write what it "
                f"leads to): make {escape(p)} what it leads to, or leave its folder out "
                "of [sandbox] writable")
    reads = present(named)
    real = tuple(os.path.realpath(w) for w in writable)
    for p in reads:
        if os.path.realpath(p) in real:
            # Bound read-only, it would take the whole writable folder with it, unsaid.
            raise PolicyError(
                f"{escape(p)}, which the host reads to decide what to run, is itself a "
                "folder [sandbox] writable names, so the box could rewrite it: leave it "
                "out of [sandbox] writable (name the folders beside it instead), or move "
                "what the host reads elsewhere")
    for p in reads:
        link = link_on_the_way(p, real)
        if link is not None:
            raise PolicyError(
                f"{escape(p)}, which the host reads to decide what to run, is reached "
                f"through {escape(link)}, a link in a folder the box can write (it could "
                f"point it elsewhere): make {escape(link)} the folder it leads to, or "
                "leave its folder out of [sandbox] writable")
    return tuple(map(as_bound, reads))


def home_fields(writable: tuple[str, ...], env: Mapping[str, str], home: str,
           protect: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A policy's ``home_tops`` (:func:`homes_in`) and ``home_kept`` (:func:`home_kept`)."""
    if not (protect and writable):
        return (), ()  # and on macOS: see docs/limits.md
    tops = homes_in([os.path.realpath(w) for w in writable], home)
    kept = [k for t in tops for k in home_kept(t, env.get("PATH"))]
    # A home inside another's kept entry (/home/a/guests/b) keeps its own rule: the outer
    # entry's read-write bind comes first, the inner home's read-only top after it.
    return tops, tuple(dict.fromkeys(kept))
