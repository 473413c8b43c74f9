"""Where the box's bwrap is, and why a box cannot be made: beside the bwrap plan.

:func:`require_box` is on every session's start: a PATH lookup and two sysctl reads, no
process. When a box fails to start with a namespace error,
:func:`diagnose_start_failure` turns bwrap's message and the sysctls into the cause and
the fix. The diagnosis functions are pure over the values read, so each branch is
testable with the values a machine would give. (``harness-sandbox doctor``'s full probe,
which really starts boxes, is :mod:`sandbox.doctor.probe`.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from pathguard.records import NamedTuple
from sandbox.errors import SandboxUnavailable
from sandbox.fs.which import which

if TYPE_CHECKING:
    from sandbox.policy import Policy

APPARMOR_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
MAX_USERNS_SYSCTL = "/proc/sys/user/max_user_namespaces"
USERNS_CLONE_SYSCTL = "/proc/sys/kernel/unprivileged_userns_clone"

NOT_INSTALLED = "bubblewrap (bwrap) is not installed"
INSTALL_FIX = "install the bubblewrap package: sudo apt-get install bubblewrap"
# Where a package puts bwrap: named when it is there but not on PATH (never used).
USUAL_BWRAP = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
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


def find_bwrap(path_env: str | None) -> str | None:
    """The absolute path of ``bwrap`` on ``path_env`` (relative entries are skipped:
    which folder they name depends on where we happen to be)."""
    if not path_env:
        return None
    entries = [e for e in path_env.split(os.pathsep) if os.path.isabs(e)]
    found = which("bwrap", os.pathsep.join(entries))
    return os.path.abspath(found) if found else None


def not_found(path_env: str | None, usual: tuple[str, ...] = USUAL_BWRAP
              ) -> SandboxUnavailable:
    """Why there is no bwrap on ``path_env``: where it looked, and where bwrap is if it
    is installed but not on that PATH (the toolkit does not go and take it from there:
    the PATH is the user's choice of what runs)."""
    looked = [e for e in (path_env or "").split(os.pathsep) if os.path.isabs(e)]
    where = os.pathsep.join(looked) or "nothing (PATH is empty)"
    elsewhere = next((p for p in usual if os.path.isfile(p) and os.access(p, os.X_OK)),
                     None)
    if elsewhere is not None:
        return SandboxUnavailable(
            f"bubblewrap (bwrap) is not on PATH (looked in {where}); it is installed at "
            f"{elsewhere}", f"add {os.path.dirname(elsewhere)} to PATH")
    return SandboxUnavailable(f"{NOT_INSTALLED} (looked in {where})", INSTALL_FIX)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def writable_refusal(bwrap: str, policy: Policy) -> SandboxUnavailable | None:
    """A bwrap the boxed commands could replace is refused: it would build the next box."""
    real = os.path.realpath(bwrap)
    for zone in policy.writable_zones(boxed=True):
        for root in {zone.path, os.path.realpath(zone.path)}:
            if _inside(bwrap, root) or _inside(real, root):
                return SandboxUnavailable(
                    f"{bwrap} is in {zone.label} ({zone.path}), where boxed commands "
                    "could replace it",
                    "install bubblewrap outside it (sudo apt-get install bubblewrap) "
                    "and put that folder first on PATH",
                )
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
    cause this place shows (:mod:`.causes`), else what the sysctls and ``error`` say."""
    from sandbox.linux.causes import found as cause

    seen = None if at_limit(error) else cause(os.geteuid())
    if seen is not None:
        return SandboxUnavailable(f"{seen.diagnosis} ({error})", seen.fix)
    s = sysctls()
    found = diagnose_userns(
        euid=os.geteuid(),
        apparmor_restrict=s.apparmor_restrict,
        max_user_namespaces=s.max_user_namespaces,
        unprivileged_userns_clone=s.unprivileged_userns_clone,
        error=error,
    )
    assert found is not None  # an error was given
    return found


@lru_cache(maxsize=8)
def _require(path_env: str | None, euid: int) -> str:
    bwrap = find_bwrap(path_env)
    if bwrap is None:
        raise not_found(path_env)
    if os.stat(bwrap).st_mode & stat.S_ISUID:
        # A setuid bwrap makes its namespaces with its own privilege: the sysctls that
        # limit unprivileged users say nothing about it.
        return bwrap
    s = sysctls()
    blocked = diagnose_userns(
        euid=euid,
        apparmor_restrict=s.apparmor_restrict,
        max_user_namespaces=s.max_user_namespaces,
        unprivileged_userns_clone=s.unprivileged_userns_clone,
    )
    if blocked is not None:
        raise blocked
    return bwrap


def require_box(policy: Policy | None = None, *, env: Mapping[str, str] | None = None) -> str:
    """The absolute path of the bwrap that builds the box, or :class:`SandboxUnavailable`.

    ``bwrap`` is looked up on the PATH of ``env`` (default: this process's environment),
    once per process and PATH. Cheap: no box is started here; a box that later fails to
    start is diagnosed then (:func:`diagnose_start_failure`).
    """
    path_env = (os.environ if env is None else env).get("PATH")
    bwrap = _require(path_env, os.geteuid())
    if policy is not None:
        refused = writable_refusal(bwrap, policy)
        if refused is not None:
            raise refused
    return bwrap
