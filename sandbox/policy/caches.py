"""Package managers' caches in the Linux box: writable, the project's own, never the
host's.

The host's caches are read-only in the box (the whole machine is; a writable home's
top too), so ``npm install`` failed on ``~/.npm/_cacache`` and pip on
``~/.cache/pip/wheels``; letting the box write them is no answer, since a poisoned
cache is host code at the next install on the host. Each project gets a folder of
its own in the user's cache folder, ``$XDG_CACHE_HOME/harness/NAME-HASH``
(``~/.cache/harness/...``), outside the project and outside every folder the box
writes, which the project's boxes alone write (another project's box
sees it read-only, as it sees the host's caches). It is bound read-write at its own
path, and each tool is pointed at a folder in it (:data:`TABLE`): by its variable
where the tool has one (``npm_config_cache``, ``PIP_CACHE_DIR``, ...), else by a bind
over the tool's own folder (cargo's ``~/.cargo/registry``), made only where that folder
is there, or its tool's folder is (an empty one is made then, as the tool would).

It starts empty, and stays warm from one session of the project to the next; a staged
box starts each tool's folder from the host's cache instead, read only below a layer of
the project's own (:mod:`sandbox.policy.layers`). Nothing is ever written to the host's caches.
A variable the host set to a folder of its own is replaced: that folder is either
read-only in the box or one the box writes, and a host cache the box writes is the
poisoning this module is for. Which folder each tool uses: :func:`lines` (``doctor``).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pathguard.records import NamedTuple
from sandbox.fs.beneath import find
from sandbox.fs.digest import sha256_hex

if TYPE_CHECKING:
    from sandbox.policy import Policy


class Row(NamedTuple):
    """One cache: the tool, the folder under the project's cache folder, how the tool is
    pointed there (``variable``, or ``at``: a folder under the home bound over, when
    there or when its tool's folder ``made_in`` is), and where the host keeps its own."""

    tool: str
    folder: str
    host: str
    variable: str = ""
    at: str = ""
    made_in: str = ""


TABLE: tuple[Row, ...] = (
    Row("npm", "npm", "~/.npm", variable="npm_config_cache"),
    Row("pip", "pip", "~/.cache/pip", variable="PIP_CACHE_DIR"),
    Row("uv", "uv", "~/.cache/uv", variable="UV_CACHE_DIR"),
    Row("yarn", "yarn", "~/.cache/yarn", variable="YARN_CACHE_FOLDER"),
    Row("yarn (berry)", "yarn-berry", "~/.yarn/berry", variable="YARN_GLOBAL_FOLDER"),
    Row("go (build)", "go-build", "~/.cache/go-build", variable="GOCACHE"),
    Row("go (modules)", "go-mod", "~/go/pkg/mod", variable="GOMODCACHE"),
    # cargo has no variable for these alone (CARGO_HOME moves its config and bin too).
    Row("cargo (registry)", "cargo-registry", "~/.cargo/registry",
        at=".cargo/registry", made_in=".cargo"),
    Row("cargo (git)", "cargo-git", "~/.cargo/git", at=".cargo/git", made_in=".cargo"),
    # pnpm's store-dir as npm_config_store_dir would make npm warn at every command.
    Row("pnpm (store)", "pnpm-store", "~/.local/share/pnpm/store",
        at=".local/share/pnpm/store", made_in=".local/share/pnpm"),
    Row("pnpm (cache)", "pnpm-cache", "~/.cache/pnpm", at=".cache/pnpm"),
)


# The box's own /dev, /proc and /run are fresh: a cache folder there (XDG_CACHE_HOME on
# /dev/shm) is not the host's in the box, and root's stand-in could not reach it.
BOX_OWN = frozenset({"dev", "proc", "sys", "run"})


def caches_home(env: Mapping[str, str], home: str) -> str:
    """Where every project's cache folder is: ``$XDG_CACHE_HOME/harness``, else
    ``~/.cache/harness`` (a relative XDG_CACHE_HOME is ignored, as XDG says). Not the
    toolkit's data folder: where the box writes beside that, it is read-only in the box
    with every mount below it, so a cache there could not be written."""
    data = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(data):
        data = os.path.join(home, ".cache")
    return os.path.join(os.path.realpath(data), "harness")


def folder_for(project: str, env: Mapping[str, str], home: str) -> str:
    """The project's cache folder: its name and a digest of its real path."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(project))[:40] or "root"
    digest = sha256_hex(os.fsencode(project))[:16]
    return os.path.join(caches_home(env, home), f"{name}-{digest}")


def _home(env: Mapping[str, str], home: str) -> str:
    return os.path.realpath(home or env.get("HOME") or os.path.expanduser("~"))


def make(project: str, env: Mapping[str, str], home: str) -> str | None:
    """Make the project's cache folder and its tools' folders (mode 0700 for what is
    made), and the empty tool folders the binds need; the folder, or None where it
    cannot be made or lies in one of the box's own folders (:data:`BOX_OWN`); None
    too when a link lies on its way from the home or the cache folder: a box that once
    wrote there could point it at a host cache."""
    root = folder_for(project, env, home)
    if root.split("/")[1] in BOX_OWN:
        return None
    if not os.path.isdir(root):
        sweep(os.path.dirname(root))  # a project's first session: the gone ones' go
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        _note(root, project)
        if os.path.realpath(root) != root or os.lstat(root).st_uid != os.getuid():
            return None
        for row in TABLE:
            os.makedirs(os.path.join(root, row.folder), mode=0o700, exist_ok=True)
    except OSError:
        return None
    h = _home(env, home)
    for row in TABLE:
        if row.at and row.made_in and find(h, row.made_in).kind == "dir" \
                and not os.path.lexists(os.path.join(h, row.at)):
            with contextlib.suppress(OSError):
                os.mkdir(os.path.join(h, row.at), 0o755)
    return root


# Beside each project's folder, out of the box's reach: the project it is for, and the
# folder of its warm caches' slots (sandbox/policy/layers.py).
NOTE = ".project"
LAYERED = ".layered"


def _note(root: str, project: str) -> None:
    note = root + NOTE
    if not os.path.lexists(note):
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as f:
            f.write(os.fsencode(project))


def sweep(caches: str) -> int:
    """Remove the cache folders of projects that are gone (their note names a folder
    that is no more); how many. A folder without a note is left alone."""
    gone = 0
    with contextlib.suppress(OSError):
        for name in os.listdir(caches):
            note = os.path.join(caches, name)
            if not name.endswith(NOTE) or not os.path.isfile(note) or os.path.islink(note):
                continue
            with contextlib.suppress(OSError):
                with open(note, "rb") as f:
                    project = f.read(4096)
                if os.path.isabs(project) and not os.path.lexists(project):
                    _remove(note[:-len(NOTE)])
                    _remove(note[:-len(NOTE)] + LAYERED)
                    os.unlink(note)
                    gone += 1
    return gone


def _remove(folder: str) -> None:
    """``folder`` and all in it, never through a link; read-only folders in it (go's
    module cache makes them) made writable first, from the top down."""
    import shutil

    for top, folders, _ in os.walk(folder):
        for name in folders:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)
    shutil.rmtree(folder, ignore_errors=True)


def made(project: str, env: Mapping[str, str], home: str) -> str | None:
    """The project's cache folder when :func:`make` has made it (a stat, no more)."""
    root = folder_for(project, env, home)
    try:
        st = os.lstat(root)
    except OSError:
        return None
    if root.split("/")[1] in BOX_OWN:
        return None
    ok = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    return root if ok and os.path.realpath(root) == root else None


def variables(root: str) -> dict[str, str]:
    """The variables that point each tool at its folder in ``root``."""
    return {r.variable: os.path.join(root, r.folder) for r in TABLE if r.variable}


def binds(root: str, env: Mapping[str, str], home: str) -> list[tuple[str, str]]:
    """(source in ``root``, the tool's folder it covers) for each row bound over its
    tool's folder where that folder is a real folder of the home (no link on the way)."""
    h = _home(env, home)
    return [(os.path.join(root, r.folder), os.path.join(h, r.at)) for r in TABLE
            if r.at and find(h, r.at).kind == "dir"]


def box_roots(policy: Policy) -> tuple[str, ...]:
    """The policy's read-write roots and, once the session has made it, the project's
    cache folder, bound read-write at its own path too."""
    cache = made(policy.project, policy.env, policy.home)
    return (*policy.read_write_paths(), *((cache,) if cache else ()))


def box_binds(policy: Policy) -> list[tuple[str, str]]:
    """:func:`binds` of the session's cache folder, once made."""
    cache = made(policy.project, policy.env, policy.home)
    return binds(cache, policy.env, policy.home) if cache else []


def box_variables(policy: Policy) -> dict[str, str]:
    """:func:`variables` of the session's cache folder, once made (Linux only). Every
    warm run asks: the answer is kept for the last policy once the folder is there (a
    policy does not change, and its folder is made once, at the session's open)."""
    if not policy.platform.startswith("linux"):
        return {}
    if _last_variables and _last_variables[0] is policy:
        return dict(_last_variables[1])
    cache = made(policy.project, policy.env, policy.home)
    if cache is None:
        return {}
    found = variables(cache)
    _last_variables[:] = [policy, found]
    return dict(found)


# The last policy box_variables answered for with a made folder, and its answer.
_last_variables: list[Any] = []


def entries(project: str, env: Mapping[str, str], home: str) -> list[tuple[str, str]]:
    """Where each tool's cache goes in the box: (tool, how), one a row (``doctor``)."""
    root = folder_for(project, env, home)
    bound = {dest for _, dest in binds(root, env, home)}
    h = _home(env, home)
    out = []
    for r in TABLE:
        where = os.path.join(root, r.folder)
        if r.variable:
            how = f"{r.variable}={where}"
        elif os.path.join(h, r.at) in bound:
            how = f"{where}, bound over {r.host}"
        else:
            how = f"not kept: {r.host} is not there (read-only in the box, as the host's)"
        out.append((r.tool, how))
    return out


def lines(project: str, env: Mapping[str, str], home: str) -> list[str]:
    """:func:`entries` as ``doctor`` says them, one line a tool."""
    return [f"cache {tool}: {how}" for tool, how in entries(project, env, home)]
