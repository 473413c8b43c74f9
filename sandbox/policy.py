"""Policy: what the box allows, computed once per session and shared by every backend.

The policy is frozen. Backends read it; nothing changes it after
:func:`Policy.create` has checked the paths the user named.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from pathguard import zones as z
from pathguard.zones import Zone

if TYPE_CHECKING:
    from pathguard.guard import Guard

from .errors import PolicyError

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


def git_common_dir(project: str) -> str | None:
    """A linked worktree's common directory, or None.

    A linked worktree has a ``.git`` *file* reading ``gitdir: X``; ``X/commondir``
    names the common directory, relative to X. Unreadable or odd layouts give None:
    the project itself is writable in any case.
    """
    dotgit = os.path.join(project, ".git")
    try:
        if not os.path.isfile(dotgit):
            return None
        with open(dotgit, encoding="utf-8") as f:
            first = f.readline().strip()
        if not first.startswith("gitdir:"):
            return None
        gitdir = first[len("gitdir:") :].strip()
        gitdir = os.path.join(project, gitdir)
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = f.readline().strip()
        return os.path.realpath(os.path.join(gitdir, common))
    except OSError:
        return None


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
    that exist. ``sandboxed`` is False for a session with no sandbox at all.
    """

    project: str
    project_as_written: str
    private_tmp: str
    common_dir: str | None = None
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    protect: bool = True
    network: bool = False
    sandboxed: bool = True
    platform: str = sys.platform
    # Filled in by create(): build policies with it, not directly.
    home: str = ""
    tmpdir: str = ""
    env: Mapping[str, str] = MappingProxyType({})
    output_cap: int = DEFAULT_OUTPUT_CAP

    @classmethod
    def create(
        cls,
        project: str,
        *,
        private_tmp: str | None = None,
        writable: Iterable[str] = (),
        hidden: Iterable[str] = (),
        hide_defaults: bool = True,
        protect: bool = True,
        network: bool = False,
        sandboxed: bool = True,
        env: Mapping[str, str] | None = None,
        home: str | None = None,
        platform: str = sys.platform,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> Policy:
        """Check the paths the user named and build the policy.

        Raises :class:`PolicyError` with a one-line message naming the path for: a
        project that is not a directory, a writable path that does not exist, a
        hidden path that is neither a file nor a folder.
        """
        env = dict(os.environ if env is None else env)
        home = home or env.get("HOME") or os.path.expanduser("~")
        as_written = os.path.abspath(project)
        if not os.path.isdir(as_written):
            raise PolicyError(f"the project {as_written} is not a directory")
        real_project = os.path.realpath(as_written)

        extra: list[str] = []
        for w in writable:
            p = os.path.abspath(expand(w, home))
            if not os.path.exists(p):
                raise PolicyError(f"the writable path {p} does not exist")
            extra.append(p)

        names = list(DEFAULT_HIDDEN) if hide_defaults else []
        names += list(hidden)
        shown: list[str] = []
        for h in names:
            p = os.path.abspath(expand(h, home))
            if not os.path.lexists(p):
                continue  # nothing to hide
            if not (os.path.isdir(p) or os.path.isfile(p)):
                raise PolicyError(f"the hidden path {p} is neither a file nor a folder")
            if p not in shown:
                shown.append(p)

        tmp = private_tmp if private_tmp is not None else private_tmp_root()
        return cls(
            project=real_project,
            project_as_written=as_written,
            private_tmp=os.path.realpath(tmp),
            common_dir=git_common_dir(real_project),
            writable=tuple(extra),
            hidden=tuple(shown),
            protect=protect,
            network=network,
            sandboxed=sandboxed,
            platform=platform,
            home=home,
            tmpdir=env.get("TMPDIR") or tempfile.gettempdir(),
            env=env,
            output_cap=output_cap,
        )

    # -- the sets pathguard checks against ------------------------------------------

    def writable_zones(self, *, hook_sandboxed: bool) -> tuple[Zone, ...]:
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
        boxed = hook_sandboxed and self.sandboxed
        if not self.sandboxed or (boxed and not macos):
            # Under bubblewrap the box's /tmp is the agent's; with no sandbox at all the
            # agent's commands write the real one.
            out.append(Zone("/tmp", "writable", z.SYSTEM_TMP))
        if not self.sandboxed and macos:
            out.append(Zone("/private/tmp", "writable", z.SYSTEM_TMP))
        return tuple(out)

    def hidden_zones(self, *, hook_sandboxed: bool) -> tuple[Zone, ...]:
        """H: what a boxed hook could not read. Empty for host hooks."""
        if not (hook_sandboxed and self.sandboxed):
            return ()
        return tuple(Zone(h, "hidden", z.HIDDEN) for h in self.hidden)

    def guard(self, *, hook_sandboxed: bool) -> Guard:
        """pathguard's Guard over W and H for a hook run boxed or on the host. Build it
        once per kind and share it: it caches what it has walked."""
        from pathguard.guard import Guard

        return Guard(self.writable_zones(hook_sandboxed=hook_sandboxed),
                     self.hidden_zones(hook_sandboxed=hook_sandboxed),
                     casefold=self.platform == "darwin")

    def protected_paths(self) -> tuple[str, ...]:
        """``.git/hooks`` and ``.git/config`` of the project (and its common dir) that
        exist, read-only in the box so boxed code cannot plant a git hook that later
        runs on the host. See :meth:`missing_hook_dirs` for a ``hooks`` folder that
        does not exist yet."""
        if not self.protect:
            return ()
        gitdirs = [os.path.join(self.project, ".git")]
        if self.common_dir:
            gitdirs.append(self.common_dir)
        out: list[str] = []
        for g in gitdirs:
            if not os.path.isdir(g):
                continue
            for name in ("hooks", "config"):
                p = os.path.join(g, name)
                if os.path.lexists(p) and p not in out:
                    out.append(p)
        return tuple(out)

    def missing_hook_dirs(self) -> tuple[str, ...]:
        """``.git/hooks`` folders that do not exist yet in a git folder that does: the
        box must not be able to create one and fill it (git would run it on the host).
        Backends cover each with an empty read-only folder."""
        if not self.protect:
            return ()
        gitdirs = [os.path.join(self.project, ".git")]
        if self.common_dir:
            gitdirs.append(self.common_dir)
        out: list[str] = []
        for g in gitdirs:
            p = os.path.join(g, "hooks")
            if os.path.isdir(g) and not os.path.lexists(p) and p not in out:
                out.append(p)
        return tuple(out)

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
