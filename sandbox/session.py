"""A session: the policy, its private temp folder, and the one box its commands share.

:meth:`Session.open` makes the private temp folder, checks the paths the user named,
finds the box (bwrap once, by absolute path), and removes the folder at the end.
:meth:`Session.run` plans one command (box or host) and hands it to the supervisor.
When the box cannot be built the error propagates: nothing ever runs on the host
instead.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from .backends import Backend, choose
from .backends.host import HostBackend
from .errors import PolicyError
from .plan import LaunchPlan, RunResult
from .policy import (
    DEFAULT_OUTPUT_CAP,
    Policy,
    git_dirs,
    pin_commondirs,
    private_tmp_root,
    unpin_commondirs,
)
from .settings import SandboxSettings


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
        self._host = HostBackend(policy)
        self._box: Backend | None = (
            choose(policy, bwrap=bwrap, features=features) if policy.boxed else None)
        # Said when the session ends (see :meth:`open`); read them after the with-block.
        self.warnings: list[str] = []

    @classmethod
    @contextmanager
    def open(
        cls,
        project: str,
        settings: SandboxSettings | None = None,
        *,
        boxed: bool = True,
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
        settings = settings if settings is not None else SandboxSettings()
        boxed = boxed and settings.enabled
        root = make_private_root(private_tmp_root())
        tmp = tempfile.mkdtemp(prefix="session-", dir=root)
        pinned: tuple[str, ...] = ()
        try:
            if boxed and settings.protect and os.path.isdir(project):
                pinned = pin_commondirs(project)
            policy = Policy.from_settings(project, settings, boxed=boxed, private_tmp=tmp,
                                          env=env, output_cap=output_cap)
            session = cls(policy)
            if session._box is not None:
                session._box.check()  # fail now, before anything runs, if there is no box
            before = set(git_dirs(policy.project, policy.common_dir))
            yield session
            if boxed and settings.protect:
                session.warnings += new_git_folders(policy, before)
        finally:
            unpin_commondirs(pinned)
            # The box's /tmp: whatever its commands left there goes with the session.
            shutil.rmtree(tmp, ignore_errors=True)

    def host_env(self) -> Mapping[str, str]:
        """The environment a host command starts from (provider keys gone, PATH pruned
        in a boxed session), computed once: pruning PATH walks every entry."""
        return self._host.env()

    def _backend(self, boxed: bool) -> Backend:
        return self._box if boxed and self._box is not None else self._host

    def plan(self, argv: Sequence[str], *, boxed: bool = True,
             env_extra: Mapping[str, str] | None = None) -> LaunchPlan:
        """The plan that runs ``argv``: in the box (``argv[0]`` may be a bare name, looked
        up on PATH inside the box), or on the host (``boxed=False`` or a session with no
        box; ``argv[0]`` must be absolute)."""
        return self._backend(boxed).plan(argv, env_extra)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        boxed: bool = True,
        env_extra: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``argv`` to its end (and everything it started) and say how it ended.

        In the box, a command killed by signal N is reported as exited with status
        128+N: bwrap waits for it inside the box and exits that way, as a shell does.
        A command the box could not start is ``failed_to_start`` with the OS error.
        Raises :class:`SandboxUnavailable` when the box itself cannot be built.
        """
        from .process import supervisor

        backend = self._backend(boxed)
        plan = backend.plan(argv, env_extra)
        result = supervisor.run(plan, stdin=stdin, timeout=timeout, cancel=cancel,
                                output_cap=self.policy.output_cap)
        return backend.read(result)
