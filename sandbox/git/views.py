"""What git in the box sees of a module's ``config``: the file without ``core.worktree``.

``git submodule update`` rewrites each module's ``config`` every time, to set
``core.worktree`` again, when the key is there (git 2.39's ``ensure_core_worktree``);
the file is read-only in the box, so the update would fail. Git in the box is shown a
copy without that key instead (it finds a submodule's work tree from the ``.git`` file
in it, without the key), and leaves the file alone. The copy is made once per session,
outside the box's sight (in a folder of the user's alone on ``/dev/shm``, a tmpfs, or
else beside the private temp folder: :func:`views_folder`), and bound read-only over
the file; the host's file is unchanged.

A config in the plain form git itself writes (section lines, ``key = value`` lines with
no quotes, escapes or comments) loses its ``core.worktree`` lines here; any other is
handed to the host's git (``git config --unset-all``), one process per file: a
repository with hundreds of modules would otherwise start hundreds of gits.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping

from sandbox.fs import beneath
from sandbox.git import config as gitconfig
from sandbox.git import safe as gitsafe
from sandbox.git.dirs import GitLayout

READ = 0o444


def views_folder(tmp: str, roots: tuple[str, ...]) -> str:
    """Where the session whose private temp folder is ``tmp`` makes its views: on
    ``/dev/shm`` (:func:`~sandbox.process.made.shm_views`), in a folder of this user's
    alone (made mode 700, or found a real folder of ours with that mode), unless one of
    ``roots`` (the folders the box writes) holds it; else beside ``tmp``."""
    import stat

    from sandbox.process.made import SHM, shm_views

    folder = shm_views(tmp)
    mine = os.path.dirname(folder)
    if not os.path.isdir(SHM) or beneath.relative(mine, roots) is not None:
        return tmp + ".views"
    try:
        os.mkdir(mine, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return tmp + ".views"
    try:
        st = os.lstat(mine)
    except OSError:
        return tmp + ".views"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or \
            stat.S_IMODE(st.st_mode) != 0o700:
        return tmp + ".views"  # not ours alone: the folder beside tmp is
    return folder


def module_views(layout: GitLayout, roots: tuple[str, ...], git: str | None,
                 env: Mapping[str, str], folder: str) -> tuple[tuple[str, str], ...]:
    """(module config, its copy for the box) for each protected module config that sets
    ``core.worktree``; the copies are made in ``folder`` (made here, mode 700)."""
    out: list[tuple[str, str]] = []
    for m in layout.modules if git is not None else ():
        config = os.path.join(m, "config")
        where = beneath.relative(config, roots)
        data = beneath.read_beneath(*where, 1 << 20) if where else None
        if config not in layout.protected or not data or b"worktree" not in data.lower():
            continue
        if not out and not os.path.isdir(folder):
            os.mkdir(folder, 0o700)
        copy = os.path.join(folder, f"{len(out)}.config")
        plain = without_worktree(data)
        # Written once, read-only from the start, where the key could be taken out here.
        # Readable by all: a box started by root runs as its stand-in, which reaches the
        # copy through its bind alone (the folder is this user's, mode 700).
        _write_new(copy, data if plain is None else plain, 0o600 if plain is None else READ)
        if plain is None:
            if not _unset_worktree(copy, git or "git", env):
                os.unlink(copy)
                continue
            os.chmod(copy, READ)
        out.append((config, copy))
    return (*out, *config_view(layout, roots, folder))


def config_view(layout: GitLayout, roots: tuple[str, ...], folder: str
                ) -> tuple[tuple[str, str], ...]:
    """(the project's git config, the link the box sees over it), where the box may
    write a copy of it (:mod:`sandbox.git.configcopy`): on Linux, for the config of the
    project's common git folder when it is a plain file the box would see read-only."""
    from sandbox.git import configcopy
    from sandbox.platform import LINUX

    tmp = _session_tmp(folder)
    if not LINUX or not roots or tmp is None:
        return ()
    for common in (layout.common_dir, os.path.realpath(os.path.join(roots[0], ".git"))):
        config = os.path.join(common, "config") if common else ""
        if config in layout.protected:
            made = configcopy.make_view(config, folder, tmp)
            return (made,) if made is not None else ()
    return ()


def _session_tmp(folder: str) -> str | None:
    """The private temp folder of the session whose views folder is ``folder``
    (:func:`views_folder`): ``tmp`` of ``tmp.views``, or the one of that name in the
    private temp root, for a folder on ``/dev/shm``."""
    from sandbox.policy import private_tmp_root

    name = os.path.basename(folder)
    if not name.endswith(".views"):
        return None
    for tmp in (folder[:-len(".views")], os.path.join(private_tmp_root(), name[:-6])):
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            return tmp
    return None


def _write_new(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode)
    with open(fd, "wb") as f:
        f.write(data)


# Compiled at their first use (re caches them): most sessions have no module to view.
_SECTION = rb'\[([A-Za-z0-9.-]+)(?: "(?:[^"\\\n]|\\.)*")?\]'
_VARIABLE = rb"([A-Za-z][A-Za-z0-9-]*)(?: = [^\"\\;#\n]*)?"


def without_worktree(data: bytes) -> bytes | None:
    """``data`` without the ``core.worktree`` lines, when every line is in the plain form
    git writes; None for any other file (git itself must read it)."""
    out: list[bytes] = []
    section: bytes | None = None
    for line in data.splitlines(keepends=True):
        text = line.rstrip(b"\n").strip(b" \t")
        if not text:
            out.append(line)
            continue
        head = re.fullmatch(_SECTION, text)
        if head is not None:
            plain = b'"' not in text  # no subsection: a section of its own name
            section = head.group(1).lower() if plain else b""
            out.append(line)
            continue
        var = re.fullmatch(_VARIABLE, text)
        if var is None or section is None:
            return None
        if section == b"core" and var.group(1).lower() == b"worktree":
            continue
        out.append(line)
    return b"".join(out)


def _unset_worktree(copy: str, git: str, env: Mapping[str, str]) -> bool:
    """Take ``core.worktree`` out of the file ``copy`` with the host's git (a config
    :func:`without_worktree` does not read)."""
    done = subprocess.run(gitsafe.argv(git, ["config", "--file", copy, "--unset-all",
                                             "core.worktree"]),
                          env=gitconfig.git_env(env), cwd="/",
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    return done.returncode == 0
