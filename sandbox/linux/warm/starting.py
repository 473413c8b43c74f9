"""The warm box's start (:class:`sandbox.linux.warm.client.WarmBox`): the starter's command
line under bwrap, and the check the caller runs while it comes up.

The starter is the compiled launcher's warm mode (``sandbox/linux/warm/warmstart.c``, from
the session's sealed memfd: :mod:`sandbox.linux.initcache`) where it could be built, else
the Python one (:mod:`sandbox.linux.warm.helper`): the same messages and the same runs; the
compiled one saves each session's open an interpreter's start."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from sandbox.linux import sockets
from sandbox.linux.bwrap import args_by_fd
from sandbox.plan import LaunchPlan

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helper.py")
# The starter's, in the box's user namespace only: each run's namespaces and mounts
# (SYS_ADMIN), its loopback brought up (NET_ADMIN), dropping them (SETPCAP), and the
# Unix-socket guard's taking a socket of a caller that is not dumpable (SYS_PTRACE).
CAPS = ("CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_SYS_PTRACE", "CAP_NET_ADMIN")


def starter_plan(options: Sequence[str], pass_fds: tuple[int, ...], fd: int,
                 launcher: int | None = None) -> LaunchPlan:
    """bwrap with ``options``, the starter's capabilities and the starter as its
    command, told its end of the box's socket (``fd``): the compiled one when
    ``launcher`` is its sealed memfd, else the Python one. The options go by
    descriptor (thousands of binds would pass the kernel's ``ARG_MAX``)."""
    python = sockets.interpreter()
    command: tuple[str, ...]
    if launcher is None:
        command = (python, "-I", "-S", HELPER, str(fd))
    else:
        command = (f"/proc/self/fd/{launcher}", "warm", str(launcher), str(fd), python,
                   sockets.GUARDMAIN)
        pass_fds = (*pass_fds, launcher)
    return args_by_fd(LaunchPlan("bwrap", (*options, *(
        x for c in CAPS for x in ("--cap-add", c)), "--", *command), {}, "/",
        "the warm box", pass_fds=(*pass_fds, fd)), len(command))


def called(check: Callable[[], None] | None) -> BaseException | None:
    """What ``check`` raised, if anything (the box is closed before it is raised)."""
    if check is not None:
        try:
            check()
        except BaseException as err:  # raised again by the caller, after the close
            return err
    return None
