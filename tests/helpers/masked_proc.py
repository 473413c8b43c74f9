"""A masked ``/proc`` made on the host, as a container runtime leaves one: a mount
namespace of its own (``unshare -m``) where ``/proc/sys`` is bound read-only over
itself. The kernel then mounts no fresh procfs in a user namespace there (bwrap's
``Can't mount proc``), as in Podman or Docker with ``seccomp=unconfined``. Only root
can make it; a plain user's case runs in it as ``nobody`` (``setpriv``)."""

from __future__ import annotations

import os
import subprocess

import pytest

from helpers.procs import Done
from helpers.unprivileged import NOBODY

_MASK = ("mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
         'exec "$@"')


def skip_unless_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("a masked /proc is made in a mount namespace, which only root can make "
                    "here: the root pass of ./scripts/test runs these cases, the plain "
                    "user's as nobody")


def run(script: str, *, user: bool, timeout: float = 300) -> Done:
    """``sh -c script`` in a new masked ``/proc``, as root or (``user``) as nobody."""
    who = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
           if user else [])
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _MASK,
                        "sh", *who, "sh", "-c", script], capture_output=True,
                       timeout=timeout, check=False,
                       env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
    return Done(r.returncode, r.stdout.decode("utf-8", "replace"),
                r.stderr.decode("utf-8", "replace"))
