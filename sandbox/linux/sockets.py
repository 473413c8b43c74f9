"""The box's Unix-socket guard as the Linux box starts it: the folders it lets a socket
be reached in, the sockets it allows, and the launchers that arm it before a command
(the guard itself runs in the box: :mod:`sandbox.linux.warm.unixguard`). Which sockets
a user allows, and the variables that name one, are the policy's:
:mod:`sandbox.policy.sockets`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.policy import Policy


# The launchers that start a box-per-run command under the guard (in the box): the
# Python one, and the supervisor the compiled one (warm/guardinit.c) becomes.
_WARM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm")
GUARDED = os.path.join(_WARM, "guarded.py")
GUARDMAIN = os.path.join(_WARM, "guardmain.py")


def guard_roots(policy: Policy) -> tuple[str, ...]:
    """The box's own folders, as the box sees them: a socket there is one the box made
    (or could have replaced), so the guard lets it be reached. The private temp folder
    is the box's ``/tmp``; ``/dev/shm`` is a tmpfs of the box's own."""
    return ("/tmp", "/dev/shm", *policy.read_write_paths())


# Said to the guard among the allowed sockets: abstract addresses may be reached.
ABSTRACT = "@"


def guard_allowed(policy: Policy) -> tuple[str, ...]:
    """``[sandbox] allow_unix_sockets`` where each leads (the box sees the host's tree at
    the same paths), the session's proxy socket with a network allow-list, and
    :data:`ABSTRACT` where the box's network namespace is its own (``network`` false
    or a list): with ``network = true`` it is the host's, and an abstract address there
    is a host service's (an X server's ``@/tmp/.X11-unix/X0`` takes keystrokes, a
    D-Bus bus starts programs), which the guard then refuses."""
    out = [os.path.realpath(p) for p in policy.allow_unix_sockets]
    if policy.network_allow is not None:
        from sandbox.network.box import BOX_SOCKET

        out.append(BOX_SOCKET)
    if not policy.network:
        out.append(ABSTRACT)
    return tuple(out)


def guard_fields(policy: Policy, bpf: bytes) -> list[bytes]:
    """What the warm box's starter needs to arm each run's guard: the filter, the roots
    and the allowed sockets (NUL-separated)."""
    return [bpf, b"\0".join(os.fsencode(p) for p in guard_roots(policy)),
            b"\0".join(os.fsencode(p) for p in guard_allowed(policy))]


def interpreter() -> str:
    """The Python the box's launcher runs (the box sees the host's tree)."""
    return os.path.realpath(sys.executable)


def guarded(policy: Policy, bpf: bytes, argv: Sequence[str], launcher: int | None = None,
            setenv: Sequence[str] = ()) -> tuple[str, ...]:
    """``argv`` started in a box per run by the guard's launcher, which arms the guard
    and then runs it: the compiled one when ``launcher`` is its descriptor (a sealed
    memfd, :mod:`sandbox.linux.initcache`: ``/proc/self/fd/FD FD PYTHON GUARDMAIN PROGRAM N
    ROOT... M SOCKET... -- ARGV``), else the Python one (``python -I -S guarded.py
    PROGRAM N ROOT... M SOCKET... [--setenv NAME=VALUE]... -- ARGV``, the variables
    for the command alone)."""
    roots, allowed = guard_roots(policy), guard_allowed(policy)
    python = interpreter()
    guard = (bpf.hex(), str(len(roots)), *roots, str(len(allowed)), *allowed)
    if launcher is None:
        return (python, "-I", "-S", GUARDED, *guard,
                *(x for pair in setenv for x in ("--setenv", pair)), "--", *argv)
    if setenv:
        raise ValueError("the compiled launcher's command has its variables from bwrap")
    return (f"/proc/self/fd/{launcher}", str(launcher), python, GUARDMAIN, *guard, "--",
            *argv)
