"""A session: the policy, its private temp folder, and the one box its commands share.

:meth:`Session.open` makes the private temp folder, checks the paths the user named,
finds the box (bwrap once, by absolute path), and removes the folder at the end.
:meth:`Session.run` plans one command (box or host) and hands it to the supervisor.
When the box cannot be built the error propagates: nothing ever runs on the host
instead.
"""

from __future__ import annotations

import errno as _errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import import_module
from typing import TYPE_CHECKING

from .errors import PolicyError, SandboxUnavailable
from .plan import LaunchPlan, RunResult
from .policy import (
    DEFAULT_OUTPUT_CAP,
    Policy,
    git_dirs,
    pin_commondirs,
    private_tmp_root,
    unpin_commondirs,
)

if TYPE_CHECKING:
    from launchers.config import SandboxSettings

# bwrap reports a command it could not start as one line on stderr and exit status 1.
_EXEC_PREFIX = "bwrap: execvp "
_STRERROR = {os.strerror(n): n for n in sorted(_errno.errorcode, reverse=True)}


def exec_failure(result: RunResult) -> RunResult | None:
    """The box's "could not start the command" (bwrap's exit 1 with its one execvp
    line) as ``failed_to_start`` with the OS error, else None."""
    if result.outcome != "exited" or result.returncode != 1:
        return None
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith(_EXEC_PREFIX):
        return None
    _, _, error = lines[0][len(_EXEC_PREFIX):].rpartition(": ")
    if error not in _STRERROR:
        return None
    return result._replace(outcome="failed_to_start", returncode=None, error=error,
                   errno=_STRERROR[error])


def make_private_root(path: str) -> str:
    """The per-user folder private temp folders are made in: created mode 700, or, if it
    exists, a real folder (not a link) owned by us with mode 700. Anything else could
    let another user read or swap a session's temp files, and is refused."""
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise PolicyError(f"the private temp root {path} is a link; remove it and try again")
    if not stat.S_ISDIR(st.st_mode):
        raise PolicyError(
            f"the private temp root {path} is not a folder; remove it and try again")
    if st.st_uid != os.getuid():
        raise PolicyError(
            f"the private temp root {path} belongs to uid {st.st_uid}, not to you "
            f"(uid {os.getuid()}); remove it and try again")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise PolicyError(
            f"the private temp root {path} has mode {mode:04o}, not 0700; "
            "remove it and try again")
    return path


def new_git_folders(policy: Policy, before: set[str]) -> list[str]:
    """A warning for each git folder of the project that was not there at the start."""
    out: list[str] = []
    for g in git_dirs(policy.project, policy.common_dir):
        if g in before:
            continue
        hooks_dir = os.path.join(g, "hooks")
        try:
            hooks = sorted(n for n in os.listdir(hooks_dir) if not n.endswith(".sample"))
        except OSError:
            hooks = []
        also = f", with hooks {', '.join(hooks)}," if hooks else ""
        out.append(f"the git folder {g} was created during the session{also} and git run "
                   f"on the host in {policy.project} would use it; check it before you do")
    return out


class Session:
    """Runs commands under one policy. Build it with :meth:`open` (which owns the private
    temp folder) or directly from a policy whose folders already exist."""

    def __init__(self, policy: Policy, *, bwrap: str | None = None,
                 features: tuple[str, ...] | None = None) -> None:
        self.policy = policy
        self._bwrap = bwrap
        self._features = features
        self._lock = threading.Lock()
        self._host_env: Mapping[str, str] | None = None
        self._box_args: tuple[str, ...] | None = None
        # Said when the session ends (see :meth:`open`); read them after the with-block.
        self.warnings: list[str] = []

    @classmethod
    @contextmanager
    def open(
        cls,
        project: str,
        settings: SandboxSettings | None = None,
        *,
        sandboxed: bool = True,
        env: Mapping[str, str] | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> Iterator[Session]:
        """A session for ``project`` with ``[sandbox]`` ``settings`` (defaults if None).

        Raises :class:`PolicyError` for a path the user named that cannot be used and
        :class:`SandboxUnavailable` when the session needs the box and it cannot be built.

        At the end, a git folder that appeared in the project during the session (a
        ``git init``, a new submodule's folder) is reported in :attr:`warnings`: the box
        cannot stop its creation, and git run on the host would use its hooks.
        """
        if settings is None:
            from launchers.config import SandboxSettings

            settings = SandboxSettings()
        sandboxed = sandboxed and settings.enabled
        root = make_private_root(private_tmp_root())
        tmp = tempfile.mkdtemp(prefix="session-", dir=root)
        pinned: tuple[str, ...] = ()
        try:
            if sandboxed and settings.protect and os.path.isdir(project):
                pinned = pin_commondirs(project)
            policy = Policy.create(
                project, private_tmp=tmp, writable=settings.writable, hidden=settings.hidden,
                hide_defaults=settings.hide_defaults, protect=settings.protect,
                network=settings.network, sandboxed=sandboxed, env=env, scrub=settings.scrub,
                output_cap=output_cap, allow_unix_sockets=settings.allow_unix_sockets,
            )
            session = cls(policy)
            if sandboxed:
                session.box()  # fail now, before anything runs, if there is no box
            before = set(git_dirs(policy.project, policy.common_dir))
            yield session
            if sandboxed and settings.protect:
                session.warnings += new_git_folders(policy, before)
        finally:
            unpin_commondirs(pinned)
            # The box's /tmp: whatever its commands left there goes with the session.
            shutil.rmtree(tmp, ignore_errors=True)

    def box(self) -> str:
        """The backend program of the box (bwrap's absolute path on Linux), found once."""
        if self.policy.platform == "darwin":
            if self._bwrap is None:
                from .darwin import require_seatbelt

                # Once: sandbox-exec is there, and this process is not already boxed.
                with self._lock:
                    self._bwrap = self._bwrap or require_seatbelt()
            return self._bwrap
        if self._bwrap is None:
            from .probe import require_box

            with self._lock:
                if self._bwrap is None:
                    self._bwrap = require_box(self.policy)
        return self._bwrap

    def host_env(self) -> Mapping[str, str]:
        """The environment a host command starts from (provider keys gone, PATH pruned
        in a sandboxed session), computed once: pruning PATH walks every entry."""
        if self._host_env is None:
            from .env import host_env

            self._host_env = host_env(self.policy)
        return self._host_env

    def plan(self, argv: Sequence[str], *, host: bool = False,
             env_extra: Mapping[str, str] | None = None) -> LaunchPlan:
        """The plan that runs ``argv``: on the host (``host=True`` or a session with no
        sandbox; ``argv[0]`` must be absolute) or in the box (``argv[0]`` may be a bare
        name, looked up on PATH inside the box)."""
        if host or not self.policy.sandboxed:
            from . import host as _host

            return _host.plan(self.policy, argv, env_extra=env_extra,
                              base_env=self.host_env())
        if self.policy.platform == "darwin":
            # By name: the macOS backend is only imported where it can run.
            seatbelt = import_module("sandbox.seatbelt")
            made: LaunchPlan = seatbelt.plan(self.policy, argv, env_extra=env_extra)
            return made
        from . import bwrap as _bwrap

        if self._box_args is None:
            # Once per session: the mounts stat every protected and hidden path.
            self._box_args = _bwrap.box_args(self.policy, bwrap=self.box(),
                                             features=self._features)
        return _bwrap.plan(self.policy, argv, bwrap=self.box(), features=self._features,
                           env_extra=env_extra, prefix=self._box_args)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        host: bool = False,
        env_extra: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``argv`` to its end (and everything it started) and say how it ended.

        In the box, a command killed by signal N is reported as exited with status
        128+N: bwrap waits for it inside the box and exits that way, as a shell does.
        A command the box could not start is ``failed_to_start`` with the OS error.
        Raises :class:`SandboxUnavailable` when the box itself cannot be built.
        """
        from . import supervisor

        plan = self.plan(argv, host=host, env_extra=env_extra)
        result = supervisor.run(plan, stdin=stdin, timeout=timeout, cancel=cancel,
                                output_cap=self.policy.output_cap)
        if plan.backend != "bwrap":
            return result
        if result.outcome == "failed_to_start":
            raise SandboxUnavailable(f"{plan.argv[0]} could not start: {result.error}",
                                     "install the bubblewrap package: "
                                     "sudo apt-get install bubblewrap")
        if result.outcome == "exited" and result.returncode == 1:
            failed = exec_failure(result)
            if failed is not None:
                return failed
            from .probe import diagnose_start_failure, namespace_error

            error = namespace_error(result.stderr)
            if error is not None:
                raise diagnose_start_failure(error)
        return result

