"""Why the box cannot be built here, when it could not: the cause this machine shows,
with the fix for that cause.

Read only once a box failed (or by ``doctor``): each check is a real look at this
process's place, not at bwrap's words.

- A container runtime's seccomp profile (Docker's and Kubernetes' defaults) that
  refuses the calls namespaces are made with: a child of this process really tries
  ``unshare(0)`` (which the kernel never refuses) and ``unshare(CLONE_NEWUSER)``.
- The sysctls that turn user namespaces off, and Ubuntu's AppArmor rule on them
  (:func:`~sandbox.linux.bwrap_find.diagnose_userns`).
- Root without ``CAP_SYS_ADMIN`` (a container's root), which root's stand-in needs.
- A covered ``/proc`` (a container's: ``/proc/sys`` read-only, ``/proc/keys`` and
  others covered): the kernel mounts no fresh procfs in a new user namespace where
  the one there has parts covered, so bwrap's ``--proc`` is refused. Read from
  ``/proc/self/mountinfo``.
"""

from __future__ import annotations

import ctypes
import errno
import os

from sandbox.errors import SandboxUnavailable
from sandbox.linux.bwrap_find import LANDLOCK_FIX

CLONE_NEWUSER = 0x10000000
CAP_SYS_ADMIN = 21
# A mount below /proc that leaves it fully visible: on an empty procfs folder.
_EMPTY_IN_PROC = ("/proc/sys/fs/binfmt_misc", "/proc/fs/nfsd")

SECCOMP_DIAGNOSIS = (
    "this container's seccomp profile refuses the calls that make the box's namespaces "
    "(unshare, mount, clone's namespace flags), as Docker's and Kubernetes' default "
    "profiles do")
SECCOMP_FIX = (
    "start the container with --security-opt seccomp=unconfined (or a profile that "
    "allows unshare, mount and setns), or run the harness outside the container, "
    + LANDLOCK_FIX)
NO_SYS_ADMIN_DIAGNOSIS = (
    "root here has no CAP_SYS_ADMIN (a container's root), which the box's stand-in for "
    "root needs to stage its namespaces")
NO_SYS_ADMIN_FIX = (
    "run the harness as a plain user in the container (docker run --user UID:GID), or "
    "give the container CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN), " + LANDLOCK_FIX)
COVERED_PROC_DIAGNOSIS = (
    "a fresh /proc is refused here: this container's /proc has covered parts ({}), and "
    "the kernel mounts no new one in a user namespace over them")
COVERED_PROC_FIX = (
    "start the container with its /proc uncovered (docker run --security-opt "
    "systempaths=unconfined; podman run --security-opt unmask=ALL), or run on Linux 6.12 "
    "or later, where the box takes the container's /proc inside a Landlock domain")


def _status(field: str) -> str | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def seccomp_refuses() -> bool:
    """Whether a system-call filter of this process's refuses the namespace calls: a
    child tries ``unshare(0)`` and ``unshare(CLONE_NEWUSER)``, refused with EPERM
    (only with a filter in force: without one the kernel's own refusals are the
    sysctls')."""
    if _status("Seccomp") != "2":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: two calls, one byte, and gone
        try:
            said = b"n"
            if libc.unshare(0) != 0 and ctypes.get_errno() == errno.EPERM:
                said = b"0"
            elif libc.unshare(CLONE_NEWUSER) != 0 and ctypes.get_errno() == errno.EPERM:
                said = b"u"
            os.write(write_end, said)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        said = os.read(read_end, 1)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return said in (b"0", b"u")


def no_sys_admin(euid: int) -> bool:
    """Root without ``CAP_SYS_ADMIN`` in its effective set."""
    caps = _status("CapEff")
    return euid == 0 and caps is not None and not int(caps, 16) >> CAP_SYS_ADMIN & 1


def covered_proc(mountinfo: str = "/proc/self/mountinfo") -> tuple[str, ...]:
    """The mounts that cover parts of this place's ``/proc``."""
    found: list[str] = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                point = line.split()[4].replace("\\040", " ")
                if point.startswith("/proc/") and point not in _EMPTY_IN_PROC \
                        and point not in found:
                    found.append(point)
    except OSError:
        return ()
    return tuple(found)


def found(euid: int) -> SandboxUnavailable | None:
    """The cause this place shows for a box that could not be built, with its fix; None
    when none of these is seen."""
    from sandbox.linux.bwrap_find import (
        APPARMOR_DIAGNOSIS,
        APPARMOR_FIX,
        diagnose_userns,
        sysctls,
    )

    s = sysctls()
    blocked = diagnose_userns(euid=euid, apparmor_restrict=None,
                              max_user_namespaces=s.max_user_namespaces,
                              unprivileged_userns_clone=s.unprivileged_userns_clone)
    if blocked is not None:
        return blocked
    if seccomp_refuses():
        return SandboxUnavailable(SECCOMP_DIAGNOSIS, SECCOMP_FIX)
    if euid != 0 and s.apparmor_restrict == 1:
        return SandboxUnavailable(APPARMOR_DIAGNOSIS, APPARMOR_FIX)
    if no_sys_admin(euid):
        return SandboxUnavailable(NO_SYS_ADMIN_DIAGNOSIS, NO_SYS_ADMIN_FIX)
    covered = covered_proc()
    if covered:
        shown = ", ".join(covered[:4]) + (", ..." if len(covered) > 4 else "")
        return SandboxUnavailable(COVERED_PROC_DIAGNOSIS.format(shown), COVERED_PROC_FIX)
    return None


def named(err: SandboxUnavailable, euid: int | None = None) -> SandboxUnavailable:
    """``err`` with the cause this place shows, when one is seen: its diagnosis first,
    then what was said (bwrap's or the stage's words), and the cause's fix."""
    cause = found(os.geteuid() if euid is None else euid)
    if cause is None:
        return err
    return SandboxUnavailable(f"{cause.diagnosis} ({err.diagnosis})", cause.fix)
