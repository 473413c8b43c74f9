"""Policy: what the box allows, computed once per session and shared by every backend.

The policy is frozen. Backends read it; nothing changes it after
:meth:`Policy.from_settings` has checked the paths the user named.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from pathguard import zones as z
from pathguard.records import NamedTuple
from pathguard.zones import Zone
from sandbox.platform import PLATFORM

if TYPE_CHECKING:
    from pathguard.guard import Guard

from sandbox.errors import PolicyError
from sandbox.fs.beneath import link_on_the_way
from sandbox.fs.systemtemp import gettempdir
from sandbox.git.dirs import GitLayout, find_layout
from sandbox.git.linked import git_common_dir
from sandbox.policy.env import drop_names
from sandbox.policy.hostreads import home_fields, reads_to_protect
from sandbox.policy.limits import Limits, resolve
from sandbox.settings import SandboxSettings
from sandbox.text import escape

# Hidden unless [sandbox] hide_defaults = false. Hidden folders become empty read-only
# folders in the box, hidden files read as empty.
DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh",                        # ssh: keys, agent configs, known hosts
    "~/.gnupg",                      # gpg: private keys
    "~/.aws",                        # AWS CLI and SDKs: credentials, SSO caches
    "~/.azure",                      # Azure CLI: tokens
    "~/.config/gcloud",              # Google Cloud CLI: credentials
    "~/.kube",                       # kubectl: cluster tokens and client keys
    "~/.docker",                     # docker: registry logins (config.json)
    "~/.netrc",                      # curl, git, pip, ftp: passwords by host
    "~/.git-credentials",            # git's credential store
    "~/.config/git/credentials",     # git's credential store, its XDG place
    "~/.config/gh",                  # GitHub CLI: OAuth tokens (hosts.yml)
    "~/.config/hub",                 # hub: GitHub tokens
    "~/.npmrc",                      # npm, pnpm, yarn 1: registry auth tokens
    "~/.pypirc",                     # twine, setuptools upload: index passwords
    "~/.cargo/credentials",          # cargo: registry tokens (old name)
    "~/.cargo/credentials.toml",     # cargo: registry tokens
    "~/.terraform.d/credentials.tfrc.json",  # terraform: cloud tokens
    "~/.vault-token",                # HashiCorp Vault CLI: the session token
    "~/.password-store",             # pass: the password store
    "~/.local/share/keyrings",       # GNOME keyring files
    "~/.bash_history",               # shells' histories: `export TOKEN=...` lives there
    "~/.zsh_history",
    "~/.local/share/fish/fish_history",
    "~/.python_history",             # the Python, Node, psql and mysql prompts' histories
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.claude",                     # Claude Code: credentials and transcripts
    "~/.codex",                      # Codex CLI: auth.json and sessions
)

DEFAULT_OUTPUT_CAP = 1 << 20


def private_tmp_root() -> str:
    """The folder under which every session's private temp folder is made.

    One per user, so that "the private temp folder" names every session's at once:
    before a session (``audit``) the exact folder does not exist yet.
    """
    return os.path.join(gettempdir(), f"harness-sandbox-{os.getuid()}")


class PolicyOptions(TypedDict, total=False):
    """What :meth:`Policy.create` takes by name: the ``[sandbox]`` keys, then the
    options of :meth:`Policy.from_settings`."""

    writable: Iterable[str]
    hidden: Iterable[str]
    hide_defaults: bool
    protect: bool
    network: bool | Iterable[str]
    enabled: bool
    scrub: Iterable[str]
    allow_unix_sockets: Iterable[str]
    allow_tool_configs: Iterable[str]
    box: str
    boxed: bool
    private_tmp: str | None
    env: Mapping[str, str] | None
    home: str | None
    platform: str


def session_env(settings: SandboxSettings, env: Mapping[str, str] | None = None
                ) -> dict[str, str]:
    """The session's environment: ``env`` (this process's by default) without the names
    ``[sandbox] scrub`` lists, so without them in every plan built on it, boxed or on
    the host."""
    return drop_names(os.environ if env is None else env, settings.scrub)


def session_home(env: Mapping[str, str]) -> str:
    """The session's home: ``HOME`` in its environment, else this user's."""
    return env.get("HOME") or os.path.expanduser("~")


def writable_roots(writable: Iterable[str], home: str) -> tuple[str, ...]:
    """``[sandbox] writable`` as the folders the box writes beside the project: absolute,
    ``~`` against ``home``, whether they exist or not. The one reading of those entries:
    the session's checks before its open, its git layout and the policy start from it."""
    return tuple(os.path.abspath(expand(w, home)) for w in writable)


def _writable_paths(writable: Iterable[str], home: str) -> tuple[str, ...]:
    """``[sandbox] writable``, absolute; each must exist."""
    roots = writable_roots(writable, home)
    for p in roots:
        if not os.path.exists(p):
            raise PolicyError(f"the writable path {escape(p)} does not exist; make it "
                              f"(mkdir -p {shlex.quote(escape(p))}) or take it out of "
                              "[sandbox] writable")
    return roots


def _hidden_paths(hidden: Iterable[str], defaults: bool, home: str) -> tuple[str, ...]:
    """The hidden paths that exist (the defaults first, unless turned off), absolute;
    each a file or a folder."""
    named = tuple(hidden)
    names = [*(DEFAULT_HIDDEN if defaults else ()), *named]
    shown: list[str] = []
    for h in names:
        p = os.path.abspath(expand(h, home))
        if not os.path.lexists(p):
            if h in named:
                # A path the user named has gone: a folder above it may have been
                # renamed by an earlier session's box, and what it held would now be
                # readable at its new place.
                raise PolicyError(
                    f"the hidden path {escape(p)} does not exist: if a folder above it "
                    "was renamed, what it holds is no longer hidden; find where it went "
                    "and name that in [sandbox] hidden, or remove the entry")
            continue  # nothing to hide
        if not (os.path.isdir(p) or os.path.isfile(p)):
            raise PolicyError(
                f"the hidden path {escape(p)} is neither a file nor a folder")
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


# Project files whose contents name programs the host runs (openHarness's ``.oh/``, and
# other tools' and editors' configs): read-only in the box. One table: sandbox/toolconfigs.
PROJECT_CONFIG_DIRS: tuple[str, ...] = (".oh",)


def project_config_dirs(project: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The rows of :data:`sandbox.policy.toolconfigs.TOOL_CONFIGS` that exist in ``project``
    (but those ``allowed``). A link is left alone (the box never binds what a link points
    at); trust by content still refuses what it leads to."""
    from sandbox.policy.toolconfigs import present

    return present(project, allowed)


def _session_place(project: str, s: SandboxSettings, env: Mapping[str, str] | None,
                   home: str | None) -> tuple[Mapping[str, str], str, str]:
    """The session's environment (``[sandbox] scrub``'s names gone from it, so from
    every plan built on it, boxed or on the host), its home, and the project as written
    (absolute; refused when it is not a folder)."""
    scrubbed = session_env(s, env)
    home = home or session_home(scrubbed)
    as_written = os.path.abspath(project)
    if not os.path.isdir(as_written):
        raise PolicyError(f"the project {escape(as_written)} is not a directory")
    return scrubbed, home, as_written


def _git_fields(project: str, writable: tuple[str, ...], git: GitLayout | None,
                env: Mapping[str, str], home: str, *,
                allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The policy's git fields from a session's layout (its missing names made), or from
    one found here without the host's git (missing names left out)."""
    common = git.common_dir if git is not None else git_common_dir(project)
    roots = (project, *((common,) if common else ()))
    for p in writable:
        link = link_on_the_way(p, roots)
        if link is not None:
            raise PolicyError(
                f"the writable path {escape(p)} leads through {escape(link)}, a link "
                "in a folder the box can write; name the folder it leads to instead")
    if git is not None:
        return {"protected": (*git.protected, *project_config_dirs(project, allowed),
                              *reads_to_protect(writable, env, home)),
                "missing_hooks": (), "views": git.views, "kept": git.kept,
                "pinned_dirs": git.pinned_dirs, "common_dir": common}
    from sandbox.git.layouts import unmade

    found = find_layout(project, env=env, home=home, ask_git=False,
                        writable=tuple(os.path.realpath(w) for w in writable))
    git = unmade(found)
    return {"protected": (*git.protected, *project_config_dirs(project, allowed),
                          *reads_to_protect(writable, env, home)),
            "missing_hooks": tuple(d for d in git.kept if d in found.make_dirs),
            "pinned_dirs": git.pinned_dirs, "common_dir": common}


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
    # The host's network shared (``[sandbox] network = true``).
    network: bool = False
    boxed: bool = True
    platform: str = PLATFORM
    # Filled in by from_settings(): build policies with it, not directly.
    home: str = ""
    tmpdir: str = ""
    env: Mapping[str, str] = MappingProxyType({})
    output_cap: int = DEFAULT_OUTPUT_CAP
    # Found once, at from_settings(): see sandbox.git.dirs. Canonical paths, each reached
    # from a writable root without following a link.
    protected: tuple[str, ...] = ()
    missing_hooks: tuple[str, ...] = ()
    # git's protected names missing at the open, not made: what a run makes there is
    # moved out after it (sandbox/linux/keeper.py; see sandbox.git.layouts.unmade).
    kept: tuple[str, ...] = ()
    pinned_dirs: tuple[str, ...] = ()
    # (protected path, what the box sees there instead): see sandbox.git.views.
    views: tuple[tuple[str, str], ...] = ()
    # [sandbox] allow_unix_sockets: absolute, ~ expanded (see sandbox/policy/sockets.py).
    allow_unix_sockets: tuple[str, ...] = ()
    # [sandbox] allow_tool_configs: rows of sandbox/policy/toolconfigs.py the box may write.
    allow_tool_configs: tuple[str, ...] = ()
    # ``[sandbox] network`` as a list: the hosts the session's proxy lets the box reach
    # (sandbox/network/); None when the network is all or nothing.
    network_allow: tuple[str, ...] | None = None
    # Where the session's proxy listens on 127.0.0.1 for a box that shares the host's
    # network (macOS); 0 where the box reaches it through a socket (Linux) or has none.
    proxy_port: int = 0
    # The password the proxy on that port asks of each request (Proxy-Authorization),
    # which only the box's environment holds: another local user reaches the port, not
    # the proxy.
    proxy_token: str = ""
    # [sandbox] processes, memory, tmp_size and shm_size, in processes and bytes against
    # this machine's memory (sandbox/policy/limits.py); the session's hardening enforces them.
    limits: Limits = Limits()
    # Homes that are, or lie in, a [sandbox] writable folder: each bound read-only, then
    # the entries of ``home_kept`` read-write again (sandbox/policy/hostreads.py). Real paths.
    home_tops: tuple[str, ...] = ()
    home_kept: tuple[str, ...] = ()
    # [sandbox] box: "auto", or "landlock" for the box without namespaces
    # (sandbox/linux/landlockbox.py).
    box: str = "auto"

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
        platform: str = PLATFORM,
        git: GitLayout | None = None,
    ) -> Policy:
        """The policy of a session for ``project`` under the ``[sandbox]`` table: the one
        mapping every entry point uses. ``boxed`` False (``--no-sandbox``) or
        ``enabled = false`` gives a session with no box.

        ``git`` is the layout a session found (asking the host's git) and made the
        missing protected names for, with what the box sees over some of them
        (:mod:`sandbox.git.views`). Without it the layout is found here without asking
        the host's git, and protected names that are missing are left out (a missing
        ``hooks`` folder becomes an empty read-only one).

        Raises :class:`PolicyError` with a one-line message naming the path for: a
        project that is not a directory, a writable path that does not exist, a
        hidden path that is neither a file nor a folder.
        """
        s = settings if settings is not None else SandboxSettings()
        scrubbed, home, as_written = _session_place(project, s, env, home)
        real_project = os.path.realpath(as_written)
        from sandbox.policy.usertmp import session_user_tmp

        # On a Mac, asked of the system and checked: never TMPDIR (see sandbox/policy/usertmp.py).
        user_tmp = session_user_tmp(scrubbed, platform=platform, boxed=boxed and s.enabled,
                                    fallback=gettempdir())
        tmp = private_tmp if private_tmp is not None else private_tmp_root()
        writable = _writable_paths(s.writable, home)
        tops, kept = home_fields(writable, scrubbed, home,
                                 s.protect and platform.startswith("linux"))
        return cls(
            home_tops=tops, home_kept=kept, box=s.box,
            **_git_fields(real_project, writable, git, scrubbed, home,
                          allowed=s.allow_tool_configs),
            allow_tool_configs=s.allow_tool_configs,
            project=real_project,
            project_as_written=as_written,
            private_tmp=os.path.realpath(tmp),
            writable=writable,
            hidden=_hidden_paths(s.hidden, s.hide_defaults, home),
            protect=s.protect,
            network=s.network is True,
            network_allow=s.network if isinstance(s.network, tuple) else None,
            boxed=boxed and s.enabled,
            platform=platform,
            home=home,
            tmpdir=user_tmp,
            env=scrubbed,
            allow_unix_sockets=tuple(os.path.abspath(expand(p, home))
                                     for p in s.allow_unix_sockets),
            limits=resolve(s.processes, s.memory, s.tmp_size, s.shm_size),
        )

    @classmethod
    def create(cls, project: str, **options: Unpack[PolicyOptions]) -> Policy:
        """:meth:`from_settings` with the table's keys named one by one (``writable=``,
        ``hidden=``, ``scrub=``, ...) beside its own options; for tests and callers that
        build a policy by hand."""
        given: dict[str, Any] = dict(options)
        keys = {k: given.pop(k) for k in SandboxSettings._fields if k in given}
        for k, default in SandboxSettings._field_defaults.items():
            if k in keys and isinstance(default, tuple):
                keys[k] = tuple(keys[k])  # the table's lists, as SandboxSettings holds them
        if not isinstance(keys.get("network", False), bool):
            keys["network"] = tuple(keys["network"])
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
        if self.boxed and self.platform.startswith("linux"):
            # The project's package caches, which its boxes write (sandbox/policy/caches.py).
            from sandbox.policy.caches import made

            cache = made(self.project, self.env, self.home)
            if cache is not None:
                out.append(Zone(cache, "writable", z.PACKAGE_CACHE))
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
        out = [Zone(h, "hidden", z.HIDDEN) for h in self.hidden]
        if self.platform.startswith("linux"):
            # The Linux box's /run is an empty tmpfs (its sockets are the host's): a hook
            # there could never start in the box.
            out.append(Zone("/run", "hidden", z.HIDDEN))
        return tuple(out)

    def guard(self, *, boxed: bool) -> Guard:
        """pathguard's Guard over W and H for a hook run boxed or on the host. Build it
        once per kind and share it: it caches what it has walked."""
        from pathguard.guard import Guard

        return Guard(self.writable_zones(boxed=boxed),
                     self.hidden_zones(boxed=boxed),
                     casefold=self.platform == "darwin")

    def protected_paths(self) -> tuple[str, ...]:
        """What git reads to decide which programs to run, read-only in the box (see
        :mod:`sandbox.git.dirs`). Empty when ``protect`` is off."""
        return self.protected if self.protect else ()

    def kept_paths(self) -> tuple[str, ...]:
        """git's protected names that did not exist at the open and were not made: the
        box can make them, and what it makes is moved out after the run. Empty when
        ``protect`` is off."""
        return self.kept if self.protect else ()

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
        out += self.home_kept
        seen: list[str] = []
        for p in out:
            if p not in seen:
                seen.append(p)
        return tuple(seen)
