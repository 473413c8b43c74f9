"""A session's warm box: made when a box session opens, used by each boxed run.

:func:`open_box` builds the :class:`~sandbox.warm.client.WarmBox` from what the session
already holds: the bwrap backend's options and bind descriptors, the hardening's filter
and bounds. The box's processes are bounded as one box (``RLIMIT_NPROC`` on the tree, the
session's control group): the bounds are per session here, not per run. :func:`run`
runs one command in it with the environment a cold box's command would get.

A session with a network allow-list keeps a box per run (:func:`wanted`): its forwarder
listens on the box's loopback, which the runs of one warm box would share.

A box that cannot be made raises :class:`~sandbox.errors.SandboxUnavailable` (with
bwrap's diagnosis of the user namespaces when that is the cause): the session does not
open. Nothing falls back to a box per run.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.backends.bwrap import KEYRING_LISTS, PROC_READ_ONLY, BwrapBackend
from sandbox.env import box_env
from sandbox.errors import SandboxUnavailable
from sandbox.plan import LaunchPlan, RunResult
from sandbox.process.pipes import Pipes
from sandbox.sockets import guard_fields
from sandbox.warm.client import WarmBox, WarmBoxDown, box_options

if TYPE_CHECKING:
    from sandbox.harden import Hardening
    from sandbox.policy import Policy
    from sandbox.session import Session


def wanted(policy: Policy) -> bool:
    """Whether this session's boxed runs go through a warm box (when asked for)."""
    return policy.network_allow is None


def open_box(backend: BwrapBackend, hardening: Hardening) -> WarmBox:
    """Start the session's warm box (after :meth:`BwrapBackend.hold` and the
    hardening). Raises :class:`SandboxUnavailable`."""
    flt = hardening.filter
    if flt is None:
        raise SandboxUnavailable("the warm box needs the session's system-call filter")
    if hardening.guard is None:
        raise SandboxUnavailable("the warm box needs the session's Unix-socket guard")
    shm = hardening.limits.shm_size
    options = box_options(backend.policy, bwrap=backend.program(),
                          features=backend.features, fds=backend.held, shm_size=shm)
    try:
        # bwrap starts on the host: nothing of the caller's environment (a linker
        # variable would load a library into it before any namespace exists).
        box = WarmBox.start(options, bpf=os.pread(flt.fd, flt.size, 0), shm_size=shm,
                            read_only=PROC_READ_ONLY, nulled=KEYRING_LISTS,
                            pass_fds=tuple(backend.held.values()), env={},
                            processes=hardening.limits.processes,
                            guard=guard_fields(backend.policy, hardening.guard))
    except SandboxUnavailable as err:
        raise _diagnosed(err) from err
    assert box.proc is not None
    _bound(box, box.proc.pid, hardening)
    return box


def _bound(box: WarmBox, pid: int, hardening: Hardening) -> None:
    """The whole box into the session's control group now, before any run (a run's
    processes are born inside), and its process bound on every process of it."""
    from sandbox.process import cgroup

    if hardening.box_group is not None:
        try:
            cgroup.adopt(hardening.box_group, pid)
        except OSError as err:
            box.close()
            raise SandboxUnavailable(
                f"the warm box could not join the session's control group: "
                f"{err.strerror}", "the session's box must be opened again") from err
    hardening.box_started(pid, moved=False)


def _diagnosed(err: SandboxUnavailable) -> SandboxUnavailable:
    """bwrap's namespace error as the cold box gives it (cause and fix), else ``err``."""
    from sandbox.probe import diagnose_start_failure, namespace_error

    error = namespace_error(err.stderr) if isinstance(err, WarmBoxDown) else None
    return diagnose_start_failure(error) if error is not None else err


def run(session: Session, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
        stdin: bytes, timeout: float | None, cancel: threading.Event | None,
        pipes: type[Pipes] = Pipes) -> RunResult:
    """One boxed command in the session's warm box, from the project, with the
    environment a cold box's command gets (:func:`~sandbox.env.box_env`), its output read
    by ``pipes``; a run the memory bound killed says so. The result's plan describes the
    command (there is no bwrap command line)."""
    box, policy = session.warm, session.policy
    if box is None or policy.network_allow is not None:
        raise ValueError("this session has no warm box")
    if not argv:
        raise ValueError("an empty command cannot run in the box")
    env = box_env(policy, env_extra)
    plan = LaunchPlan("bwrap", tuple(argv), env, policy.project, shlex.join(argv),
                      watched=False)
    result = box.run(argv, env, policy.project, stdin=stdin, timeout=timeout,
                     cancel=cancel, output_cap=policy.output_cap, pipes=pipes)
    result = result._replace(plan=plan)
    # Nothing of the run is orphaned here: its processes end inside the warm box.
    h = session.hardening
    return result if h is None else h.box_ended(0, result, orphaned=False)
