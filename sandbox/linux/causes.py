"""Why the box cannot be built here, when it could not: the cause this machine shows,
with the fix for that cause.

Read only once a box failed (or by ``doctor``): each check is a real look at this
process's place, not at bwrap's words.

- A container runtime's seccomp profile (Docker's and Kubernetes' defaults) that
  refuses the calls namespaces are made with: a child of this process really tries
  ``unshare(0)`` (which the kernel never refuses) and ``unshare(CLONE_NEWUSER)``.
- The sysctls that turn user namespaces off, and Ubuntu's AppArmor rule on them
  (:func:`diagnose_userns`).
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

from pathguard.records import NamedTuple
from sandbox.errors import SandboxUnavailable

CLONE_NEWUSER = 0x10000000
CAP_SYS_ADMIN = 21
# A mount below /proc that leaves it fully visible: on an empty procfs folder.
_EMPTY_IN_PROC = ("/proc/sys/fs/binfmt_misc", "/proc/fs/nfsd")

APPARMOR_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
MAX_USERNS_SYSCTL = "/proc/sys/user/max_user_namespaces"
USERNS_CLONE_SYSCTL = "/proc/sys/kernel/unprivileged_userns_clone"


# Where namespaces are refused and the place cannot be changed: the box without them.
LANDLOCK_FIX = ('or write [sandbox] box = "landlock" for the box without namespaces '
                "(weaker: docs/linux-box.md says what it gives up)")
APPARMOR_DIAGNOSIS = (
    "user namespaces are blocked by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1)"
)
APPARMOR_FIX = (
    "allow them with sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, "
    "or install an AppArmor profile for bwrap that allows userns, " + LANDLOCK_FIX
)
MAX_USERNS_DIAGNOSIS = "user namespaces are turned off (user.max_user_namespaces=0)"
MAX_USERNS_FIX = ("turn them on with sudo sysctl -w user.max_user_namespaces=15000, "
                  + LANDLOCK_FIX)
USERNS_CLONE_DIAGNOSIS = (
    "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone=0)"
)
USERNS_CLONE_FIX = ("turn them on with sudo sysctl -w kernel.unprivileged_userns_clone=1, "
                    + LANDLOCK_FIX)
DOCTOR_FIX = "run harness-sandbox doctor for details"
LIMIT_DIAGNOSIS = (
    "no user namespace can be made here: user.max_user_namespaces is reached or "
    "namespaces are nested too deep"
)
LIMIT_FIX = (
    "raise the limit with sudo sysctl -w user.max_user_namespaces=15000; inside a "
    "container, run harness-sandbox on the host or allow nested user namespaces, "
    + LANDLOCK_FIX
)

# What bwrap prints when it cannot make the box's namespaces (as opposed to the
# command's own failure): bwrap's messages start with "bwrap: ".
_NAMESPACE_MARKERS = ("namespace", "uid map", "gid map", "setgroups")


def read_sysctl(path: str) -> int | None:
    """An integer sysctl, or None where this kernel has no such file."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def diagnose_userns(
    *,
    euid: int,
    apparmor_restrict: int | None,
    max_user_namespaces: int | None,
    unprivileged_userns_clone: int | None,
    error: str | None = None,
) -> SandboxUnavailable | None:
    """Why user namespaces cannot be made, from the sysctls (and bwrap's error, if a box
    failed to start). None when the sysctls allow them and nothing failed.

    ``max_user_namespaces = 0`` and (for a user other than root)
    ``unprivileged_userns_clone = 0`` block without doubt. The AppArmor restriction only
    counts once a box has failed: a profile for bwrap may allow it.
    """
    if max_user_namespaces == 0:
        return SandboxUnavailable(MAX_USERNS_DIAGNOSIS, MAX_USERNS_FIX)
    if euid != 0 and unprivileged_userns_clone == 0:
        return SandboxUnavailable(USERNS_CLONE_DIAGNOSIS, USERNS_CLONE_FIX)
    if error is None:
        return None
    if euid != 0 and apparmor_restrict == 1:
        return SandboxUnavailable(APPARMOR_DIAGNOSIS, APPARMOR_FIX)
    if at_limit(error):
        return SandboxUnavailable(LIMIT_DIAGNOSIS, LIMIT_FIX)
    error = error.removeprefix("bwrap: ")
    return SandboxUnavailable(f"bwrap could not create the box: {error}", DOCTOR_FIX)


def namespace_error(stderr: bytes) -> str | None:
    """bwrap's own message when it failed to set up the box's namespaces, else None."""
    first = stderr.decode("utf-8", "replace").strip().splitlines()[:1]
    if not first or not first[0].startswith("bwrap: "):
        return None
    line = first[0]
    return line if any(m in line.lower() for m in _NAMESPACE_MARKERS) else None


class Sysctls(NamedTuple):
    """The kernel settings that decide whether user namespaces can be made."""

    apparmor_restrict: int | None
    max_user_namespaces: int | None
    unprivileged_userns_clone: int | None


def sysctls() -> Sysctls:
    return Sysctls(read_sysctl(APPARMOR_SYSCTL), read_sysctl(MAX_USERNS_SYSCTL),
                   read_sysctl(USERNS_CLONE_SYSCTL))


def at_limit(error: str) -> bool:
    """The namespaces' limit was met (ENOSPC), whatever else this place shows."""
    return "ENOSPC" in error or "No space left on device" in error


def diagnose_start_failure(error: str) -> SandboxUnavailable:
    """The cause and fix for a box that failed to start with bwrap's ``error``: the
    cause this place shows (:func:`found`), else what the sysctls and ``error`` say."""
    seen = None if at_limit(error) else found(os.geteuid())
    if seen is not None:
        return SandboxUnavailable(f"{seen.diagnosis} ({error})", seen.fix)
    s = sysctls()
    said = diagnose_userns(
        euid=os.geteuid(),
        apparmor_restrict=s.apparmor_restrict,
        max_user_namespaces=s.max_user_namespaces,
        unprivileged_userns_clone=s.unprivileged_userns_clone,
        error=error,
    )
    assert said is not None  # an error was given
    return said


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
