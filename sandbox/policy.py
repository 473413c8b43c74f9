"""Policy: what the box allows, computed once per session and shared by every backend.

The policy is frozen. Backends read it; nothing changes it after
:meth:`Policy.from_settings` has checked the paths the user named.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, Unpack

from pathguard import zones as z
from pathguard.zones import Zone

if TYPE_CHECKING:
    from pathguard.guard import Guard

from .env import drop_names
from .errors import PolicyError
from .settings import SandboxSettings

# Hidden unless [sandbox] hide_defaults = false. Hidden folders become empty read-only
# folders in the box, hidden files read as empty.
DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.claude",
    "~/.codex",
)

DEFAULT_OUTPUT_CAP = 1 << 20


def private_tmp_root() -> str:
    """The folder under which every session's private temp folder is made.

    One per user, so that "the private temp folder" names every session's at once:
    before a session (``audit``) the exact folder does not exist yet.
    """
    return os.path.join(tempfile.gettempdir(), f"harness-sandbox-{os.getuid()}")


def linked_git_dir(project: str) -> str | None:
    """The git folder a ``.git`` *file* names (``gitdir: X``: a linked worktree or a
    submodule checkout), canonical; None when ``.git`` is not such a file."""
    dotgit = os.path.join(project, ".git")
    try:
        if not os.path.isfile(dotgit):
            return None
        with open(dotgit, encoding="utf-8") as f:
            first = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir:"):
        return None
    return os.path.realpath(os.path.join(project, first[len("gitdir:") :].strip()))


def git_common_dir(project: str) -> str | None:
    """A linked worktree's common directory, or None.

    A linked worktree has a ``.git`` *file* reading ``gitdir: X``; ``X/commondir``
    names the common directory, relative to X. Unreadable or odd layouts give None:
    the project itself is writable in any case.
    """
    gitdir = linked_git_dir(project)
    if gitdir is None:
        return None
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return os.path.realpath(os.path.join(gitdir, common))


def _module_git_dirs(gitdir: str, depth: int = 0) -> list[str]:
    """The git folders of submodules kept under ``gitdir/modules`` (nested too). A
    submodule at path a/b keeps its git folder at modules/a/b; one that holds a HEAD is
    a git folder, anything else a folder on the way to one."""
    out: list[str] = []

    def visit(folder: str, level: int) -> None:
        if level > 8:
            return
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            p = os.path.join(folder, name)
            if not os.path.isdir(p) or os.path.islink(p):
                continue
            if os.path.isfile(os.path.join(p, "HEAD")):
                out.append(p)
                visit(os.path.join(p, "modules"), level + 1)
            else:
                visit(p, level + 1)

    visit(os.path.join(gitdir, "modules"), depth)
    return out


def git_dirs(project: str, common_dir: str | None) -> tuple[str, ...]:
    """The git folders whose hooks and config git would use on the host for this
    project: its ``.git`` folder, or a linked worktree's own and common git folders,
    and the submodules' git folders kept in them. Canonical paths."""
    found: list[str] = []
    own = os.path.join(project, ".git")
    for g in (own if os.path.isdir(own) else None, linked_git_dir(project), common_dir):
        if g is not None and os.path.isdir(g) and g not in found:
            found.append(g)
    for g in list(found):
        found += [m for m in _module_git_dirs(g) if m not in found]
    return tuple(found)


def git_guard_paths(project: str, common_dir: str | None) -> tuple[tuple[str, ...],
                                                                  tuple[str, ...]]:
    """(protected, missing hooks folders) for the box.

    Protected: in each git folder ``hooks``, ``config`` and ``commondir`` (which could
    point git at a folder whose hooks the box wrote), and a ``.git`` *file* in the
    project (which could point git at such a folder); only those that exist.
    Missing: the ``hooks`` folders that do not exist yet, except in a linked worktree's
    own git folder, whose hooks git takes from the common folder.
    """
    protected: list[str] = []
    dotgit = os.path.join(project, ".git")
    if os.path.isfile(dotgit):
        protected.append(dotgit)
    own_linked = linked_git_dir(project) if common_dir else None
    missing: list[str] = []
    for g in git_dirs(project, common_dir):
        for name in ("hooks", "config", "commondir"):
            p = os.path.join(g, name)
            if os.path.lexists(p):
                if p not in protected:
                    protected.append(p)
            elif name == "hooks" and g != own_linked:
                missing.append(p)
    return tuple(protected), tuple(missing)


def pin_commondirs(project: str) -> tuple[str, ...]:
    """Write ``commondir`` as ``.`` in each of the project's git folders that lacks one.

    The box must not create a ``commondir`` (git would take hooks and config from where
    it points), and a mount cannot cover a file that is not there. ``.`` names the git
    folder itself, which is what an absent ``commondir`` means, so git behaves the same
    inside and outside the box; the file is then protected like the others. Returns the
    files written, for :func:`unpin_commondirs` at the end of the session.
    """
    real = os.path.realpath(project)
    written: list[str] = []
    for g in git_dirs(real, git_common_dir(real)):
        p = os.path.join(g, "commondir")
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        except OSError:
            continue  # not ours to write (a read-only git folder): the box cannot either
        with os.fdopen(fd, "w") as f:
            f.write(".\n")
        written.append(p)
    return tuple(written)


def unpin_commondirs(paths: Iterable[str]) -> None:
    """Remove the ``commondir`` files :func:`pin_commondirs` wrote, if still as written."""
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                if f.read() != ".\n":
                    continue
            os.unlink(p)
        except OSError:
            pass


class PolicyOptions(TypedDict, total=False):
    """What :meth:`Policy.create` takes by name: the ``[sandbox]`` keys, then the
    options of :meth:`Policy.from_settings`."""

    writable: Iterable[str]
    hidden: Iterable[str]
    hide_defaults: bool
    protect: bool
    network: bool
    enabled: bool
    scrub: Iterable[str]
    allow_unix_sockets: Iterable[str]
    boxed: bool
    private_tmp: str | None
    env: Mapping[str, str] | None
    home: str | None
    platform: str
    output_cap: int


def _writable_paths(writable: Iterable[str], home: str) -> tuple[str, ...]:
    """``[sandbox] writable``, absolute; each must exist."""
    out: list[str] = []
    for w in writable:
        p = os.path.abspath(expand(w, home))
        if not os.path.exists(p):
            raise PolicyError(f"the writable path {p} does not exist")
        out.append(p)
    return tuple(out)


def _hidden_paths(hidden: Iterable[str], defaults: bool, home: str) -> tuple[str, ...]:
    """The hidden paths that exist (the defaults first, unless turned off), absolute;
    each a file or a folder."""
    names = [*(DEFAULT_HIDDEN if defaults else ()), *hidden]
    shown: list[str] = []
    for h in names:
        p = os.path.abspath(expand(h, home))
        if not os.path.lexists(p):
            continue  # nothing to hide
        if not (os.path.isdir(p) or os.path.isfile(p)):
            raise PolicyError(f"the hidden path {p} is neither a file nor a folder")
        if p not in shown:
            shown.append(p)
    return tuple(shown)


def expand(path: str, home: str) -> str:
    """``~`` and ``~/x`` against ``home``; the result must be absolute."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return os.path.join(home, path[2:])
    return path


class Policy(NamedTuple):
    """The session's box, as data.

    ``project`` and ``private_tmp`` are canonical (real) absolute paths.
    ``project_as_written`` is the absolute path the caller gave. ``writable`` holds
    ``[sandbox] writable`` entries (absolute, as written); ``hidden`` the hidden paths
    that exist. ``boxed`` is False for a session with no sandbox at all.
    """

    project: str
    project_as_written: str
    private_tmp: str
    common_dir: str | None = None
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    protect: bool = True
    network: bool = False
    boxed: bool = True
    platform: str = sys.platform
    # Filled in by from_settings(): build policies with it, not directly.
    home: str = ""
    tmpdir: str = ""
    env: Mapping[str, str] = MappingProxyType({})
    output_cap: int = DEFAULT_OUTPUT_CAP
    # Found once, at from_settings(): see git_guard_paths().
    protected: tuple[str, ...] = ()
    missing_hooks: tuple[str, ...] = ()
    # [sandbox] allow_unix_sockets: absolute, ~ expanded (see sandbox/sockets.py).
    allow_unix_sockets: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        project: str,
        settings: SandboxSettings | None = None,
        *,
        boxed: bool = True,
        private_tmp: str | None = None,
        env: Mapping[str, str] | None = None,
        home: str | None = None,
        platform: str = sys.platform,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> Policy:
        """The policy of a session for ``project`` under the ``[sandbox]`` table: the one
        mapping every entry point uses. ``boxed`` False (``--no-sandbox``) or
        ``enabled = false`` gives a session with no box.

        Raises :class:`PolicyError` with a one-line message naming the path for: a
        project that is not a directory, a writable path that does not exist, a
        hidden path that is neither a file nor a folder.
        """
        s = settings if settings is not None else SandboxSettings()
        # ``[sandbox] scrub``: gone from the session's environment, so from every plan
        # built on it (boxed or on the host).
        session_env = drop_names(os.environ if env is None else env, s.scrub)
        home = home or session_env.get("HOME") or os.path.expanduser("~")
        as_written = os.path.abspath(project)
        if not os.path.isdir(as_written):
            raise PolicyError(f"the project {as_written} is not a directory")
        real_project = os.path.realpath(as_written)
        from .darwin import session_user_tmp

        # On a Mac, asked of the system and checked: never TMPDIR (see sandbox/darwin.py).
        user_tmp = session_user_tmp(session_env, platform=platform, boxed=boxed and s.enabled,
                                    fallback=tempfile.gettempdir())
        tmp = private_tmp if private_tmp is not None else private_tmp_root()
        common = git_common_dir(real_project)
        protected, missing_hooks = git_guard_paths(real_project, common)
        return cls(
            protected=protected,
            missing_hooks=missing_hooks,
            project=real_project,
            project_as_written=as_written,
            private_tmp=os.path.realpath(tmp),
            common_dir=common,
            writable=_writable_paths(s.writable, home),
            hidden=_hidden_paths(s.hidden, s.hide_defaults, home),
            protect=s.protect,
            network=s.network,
            boxed=boxed and s.enabled,
            platform=platform,
            home=home,
            tmpdir=user_tmp,
            env=session_env,
            output_cap=output_cap,
            allow_unix_sockets=tuple(os.path.abspath(expand(p, home))
                                     for p in s.allow_unix_sockets),
        )

    @classmethod
    def create(cls, project: str, **options: Unpack[PolicyOptions]) -> Policy:
        """:meth:`from_settings` with the table's keys named one by one (``writable=``,
        ``hidden=``, ``scrub=``, ...) beside its own options; for tests and callers that
        build a policy by hand."""
        given: dict[str, Any] = dict(options)
        keys = {k: given.pop(k) for k in SandboxSettings._fields if k in given}
        for k in ("writable", "hidden", "scrub", "allow_unix_sockets"):
            if k in keys:
                keys[k] = tuple(keys[k])
        return cls.from_settings(project, SandboxSettings(**keys), **given)

    # -- the sets pathguard checks against ------------------------------------------

    def writable_zones(self, *, boxed: bool) -> tuple[Zone, ...]:
        """W: every folder the agent can write, for a hook run boxed or on the host.

        A hook is boxed only when it asks for it *and* the session has a sandbox.
        """
        out = [Zone(self.project_as_written, "project", z.PROJECT)]
        if self.project != self.project_as_written:
            out.append(Zone(self.project, "project", z.PROJECT))
        if self.common_dir:
            out.append(Zone(self.common_dir, "writable", z.COMMON_DIR))
        out.append(Zone(self.private_tmp, "writable", z.PRIVATE_TMP))
        out += [Zone(w, "writable", z.WRITABLE) for w in self.writable]
        macos = self.platform == "darwin"
        if macos:
            out.append(Zone(self.tmpdir, "writable", z.USER_TMP))
        boxed = boxed and self.boxed
        if not self.boxed or (boxed and not macos):
            # Under bubblewrap the box's /tmp is the agent's; with no sandbox at all the
            # agent's commands write the real one.
            out.append(Zone("/tmp", "writable", z.SYSTEM_TMP))
        if not self.boxed and macos:
            out.append(Zone("/private/tmp", "writable", z.SYSTEM_TMP))
        return tuple(out)

    def hidden_zones(self, *, boxed: bool) -> tuple[Zone, ...]:
        """H: what a boxed hook could not read. Empty for host hooks."""
        if not (boxed and self.boxed):
            return ()
        return tuple(Zone(h, "hidden", z.HIDDEN) for h in self.hidden)

    def guard(self, *, boxed: bool) -> Guard:
        """pathguard's Guard over W and H for a hook run boxed or on the host. Build it
        once per kind and share it: it caches what it has walked."""
        from pathguard.guard import Guard

        return Guard(self.writable_zones(boxed=boxed),
                     self.hidden_zones(boxed=boxed),
                     casefold=self.platform == "darwin")

    def protected_paths(self) -> tuple[str, ...]:
        """What git reads to decide which programs to run, read-only in the box (see
        :func:`git_guard_paths`). Empty when ``protect`` is off."""
        return self.protected if self.protect else ()

    def missing_hook_dirs(self) -> tuple[str, ...]:
        """``hooks`` folders that do not exist yet in a git folder that does: the box
        must not be able to create one and fill it (git would run it on the host).
        Backends cover each with an empty read-only folder."""
        return self.missing_hooks if self.protect else ()

    def read_write_paths(self) -> tuple[str, ...]:
        """Bound read-write in the box at their own paths (the private temp folder is
        bound at /tmp instead)."""
        out = [self.project]
        if self.common_dir:
            out.append(self.common_dir)
        out += [os.path.realpath(w) for w in self.writable]
        seen: list[str] = []
        for p in out:
            if p not in seen:
                seen.append(p)
        return tuple(seen)
