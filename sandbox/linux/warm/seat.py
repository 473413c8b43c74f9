"""A session's warm box: made when a box session opens, used by each boxed run.

:func:`open_box` builds the :class:`~sandbox.linux.warm.client.WarmBox` from what the session
already holds: the bwrap backend's options and bind descriptors, the hardening's filter
and bounds. The box's processes are bounded as one box (``RLIMIT_NPROC`` on the tree, the
session's control group): the bounds are per session here, not per run. :func:`run`
runs one command in it with the environment a cold box's command would get.

A session with a network allow-list starts the forwarder once, as a run that lasts the
session (:class:`Forwarder`): every run reaches the proxy through it on the box's
loopback, which the runs of one warm box share.

A box that cannot be made raises :class:`~sandbox.errors.SandboxUnavailable` (with
bwrap's diagnosis of the user namespaces when that is the cause): the session does not
open. Nothing falls back to a box per run.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.errors import SandboxUnavailable
from sandbox.linux.bwrap import KEYRING_LISTS, PROC_READ_ONLY, BwrapBackend
from sandbox.linux.sockets import guard_fields
from sandbox.linux.standin import stdio_owner
from sandbox.linux.warm.channel import WarmBoxDown
from sandbox.linux.warm.client import WarmBox
from sandbox.plan import LaunchPlan, RunResult
from sandbox.policy.startenv import box_env
from sandbox.process.pipes import Pipes

if TYPE_CHECKING:
    from sandbox.box.harden import Hardening
    from sandbox.linux.linuxbox import LinuxBox
    from sandbox.policy import Policy


def box_options(policy: Policy, *, bwrap: str, features: Collection[str] | None = None,
                fds: Mapping[str, int] | None = None, shm_size: int | None = None,
                staged: bool = False, root: str = "/") -> tuple[str, ...]:
    """bwrap and the session's box options for a warm box: the cold box's
    (:func:`~sandbox.linux.bwrap.box_args`) with a pristine ``/proc``, which each run
    covers on its own fresh one.

    Without ``--disable-userns``, which puts the box's processes in a nested user
    namespace: from there the starter could neither go back to its own PID namespace
    after making a run's (``setns`` needs ``CAP_SYS_ADMIN`` where that namespace was
    made) nor, in a box started by root, mount a run's ``/proc`` (bwrap covers the
    writable procfs entries itself then, and in a nested namespace those covers are
    locked, which makes the kernel refuse a new procfs). What stops a run from making a
    user namespace is its filter, which refuses every new namespace
    (:data:`sandbox.linux.seccomp.DENIED`), as it does in the cold box.
    """
    from sandbox.linux.bwrap import box_args

    args = box_args(policy, bwrap=bwrap, features=features, fds=fds, shm_size=shm_size,
                    proc_belt=False, staged=staged, root=root)
    return tuple(a for a in args if a != "--disable-userns")


def open_box(backend: BwrapBackend, hardening: Hardening,
             meanwhile: Callable[[], None] | None = None) -> WarmBox:
    """Start the session's warm box (after :meth:`BwrapBackend.hold` and the
    hardening), calling ``meanwhile`` while it starts (:meth:`WarmBox.start`). Raises
    :class:`SandboxUnavailable`, or what ``meanwhile`` raises."""
    flt = hardening.filter
    if flt is None:
        raise SandboxUnavailable("the warm box needs the session's system-call filter")
    if hardening.guard is None:
        raise SandboxUnavailable("the warm box needs the session's Unix-socket guard")
    shm = hardening.limits.shm_size
    # The session's stage (root's stand-in, or a box with many binds): bwrap starts in
    # its namespaces, and the git binds are made there while it does, before any run
    # (Stage.bind_late: bwrap reads the whole mount table after each of its binds).
    stage = backend.stage(late=True)
    # Born in the session's control group (cgroup v1: the spawner's thread joined it
    # while the stage was made), not moved there after: a move waits for the kernel.
    born_in = hardening.spawner(wait=JOIN_WAIT)
    options = box_options(backend.policy, bwrap=backend.program(),
                          features=backend.features, fds=backend.held, shm_size=shm,
                          staged=stage is not None, root=stage.root if stage else "/")
    try:
        box = WarmBox.start(options, bpf=os.pread(flt.fd, flt.size, 0), shm_size=shm,
                            read_only=PROC_READ_ONLY, nulled=KEYRING_LISTS,
                            pass_fds=backend.bind_fds(),
                            processes=hardening.limits.processes,
                            launcher=stage.argv() if stage else (),
                            guard=guard_fields(backend.policy, hardening.guard),
                            own_network=_own_network(backend.policy),
                            starter=backend.launcher(), spawn=born_in,
                            alongside=stage.bind_late if stage else None,
                            meanwhile=meanwhile)
    except SandboxUnavailable as err:
        raise _diagnosed(err) from err
    assert box.proc is not None
    _bound(box, box.proc.pid, hardening, moved=born_in is None)
    return box


# How long the warm box's start waits for the spawner's thread to have joined the
# session's group, before it starts bwrap outside and moves it in (the same end).
JOIN_WAIT = 0.05


def _own_network(policy: Policy) -> bool:
    """Whether each run gets a network namespace of its own: in a box without network,
    where the box's loopback is all there is (a box on the host's network shares the
    host's, and an allow-list's runs share the forwarder on the box's loopback)."""
    return not policy.network and policy.network_allow is None


def _bound(box: WarmBox, pid: int, hardening: Hardening, *, moved: bool) -> None:
    """The whole box into the session's control group now, before any run (a run's
    processes are born inside), unless it was born there (not ``moved``), and its
    process bound on every process of it."""
    from sandbox.process import cgroup

    if hardening.box_group is not None and moved:
        try:
            cgroup.adopt(hardening.box_group, pid)
        except OSError as err:
            box.close()
            raise SandboxUnavailable(
                f"the warm box could not join the session's control group: "
                f"{err.strerror}", "the session's box must be opened again") from err
    hardening.box_started(pid, moved=False)


def _diagnosed(err: SandboxUnavailable) -> SandboxUnavailable:
    """bwrap's namespace error as the cold box gives it (cause and fix), else ``err``
    with the cause this place shows, for a warm box that did not start."""
    from sandbox.linux.causes import diagnose_start_failure, named, namespace_error

    error = namespace_error(err.stderr) if isinstance(err, WarmBoxDown) else None
    if error is not None:
        return diagnose_start_failure(error)
    return named(err) if isinstance(err, WarmBoxDown) else err


def run(owner: LinuxBox, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
        stdin: bytes, timeout: float | None, cancel: threading.Event | None,
        pipes: type[Pipes] = Pipes) -> RunResult:
    """One command in ``owner``'s warm box, from the project, with the environment a
    cold box's command gets (:func:`~sandbox.policy.startenv.box_env`), its output read by
    ``pipes``. The result's plan describes the command (there is no bwrap command
    line); the box's :meth:`~sandbox.linux.linuxbox.LinuxBox.read` reads it."""
    box, policy = owner.warm, owner.policy
    if box is None:
        raise ValueError("this session has no warm box")
    if not argv:
        raise ValueError("an empty command cannot run in the box")
    env = box_env(policy, env_extra)
    if policy.network_allow is not None:
        # The allow-list: the proxy's variables win over any the caller gave.
        from sandbox.network.box import proxy_env

        env.update(proxy_env(policy.network_allow))
    plan = LaunchPlan("bwrap", tuple(argv), env, policy.project, shlex.join(argv),
                      watched=False, stdio_owner=stdio_owner())
    box.stdio_owner = plan.stdio_owner
    result = box.run(argv, env, policy.project, stdin=stdin, timeout=timeout,
                     cancel=cancel, output_cap=policy.output_cap, pipes=pipes)
    # Nothing of the run is orphaned here: its processes end inside the warm box.
    return result._replace(plan=plan)


class _Ready(Pipes):
    """A run's output reader that says when the first byte came (:class:`Forwarder`)."""

    ready: threading.Event

    def read(self, fd: int) -> None:
        super().read(fd)
        if self.bufs[self.out_fd]:
            self.ready.set()


class Forwarder:
    """The allow-list's forwarder in a warm box (:mod:`sandbox.network.forwarder`): one
    run that lasts the session, listening on the box's loopback, where every run's
    ``HTTP_PROXY`` points, and relaying to the session's proxy. It is up before
    :meth:`start` returns; if it ends before the session does, the warm box is failed,
    so that later runs raise instead of finding no proxy."""

    START_LIMIT = 10.0

    def __init__(self, owner: LinuxBox) -> None:
        self._owner = owner
        self._cancel = threading.Event()
        self._ready = threading.Event()
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name="harness-sandbox-forwarder")

    @classmethod
    def start(cls, owner: LinuxBox) -> Forwarder:
        """Start it in ``owner``'s warm box. Raises :class:`SandboxUnavailable`."""
        self = cls(owner)
        self._thread.start()
        if not self._ready.wait(self.START_LIMIT):
            self.close()
            why = self._why()
            raise SandboxUnavailable(
                f"the network allow-list's forwarder did not start in the warm box: {why}",
                "the session's box must be opened again")
        return self

    def _why(self) -> str:
        if self._error is not None:
            return str(self._error)
        r = self._result
        if r is not None:
            err = r.stderr.decode("utf-8", "replace").strip()
            return f"it ended ({r.outcome} {r.returncode}){': ' + err if err else ''}"
        return f"it did not answer within {self.START_LIMIT:g} s"

    def _serve(self) -> None:
        from sandbox.network.box import wrap

        ready = type("Ready", (_Ready,), {"ready": self._ready})
        # Said once the forwarder listens: it starts the command only then.
        command = wrap(["/bin/sh", "-c", "echo up; exec sleep 2147483647"])
        try:
            self._result = run(self._owner, command, env_extra=None, stdin=b"",
                               timeout=None, cancel=self._cancel, pipes=ready)
        except BaseException as err:  # said to whoever waits
            self._error = err
        box = self._owner.warm
        if not self._cancel.is_set() and box is not None:
            box.fail(f"the network allow-list's forwarder ended: {self._why()}")
        self._ready.set()

    def close(self) -> None:
        """End it (before the warm box closes)."""
        self._cancel.set()
        self._thread.join(timeout=5)
