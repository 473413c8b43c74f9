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

from sandbox.errors import SandboxUnavailable
from sandbox.fs.which import which
from sandbox.linux.causes import diagnose_userns, sysctls

if TYPE_CHECKING:
    from sandbox.policy import Policy

NOT_INSTALLED = "bubblewrap (bwrap) is not installed"
INSTALL_FIX = "install the bubblewrap package: sudo apt-get install bubblewrap"
# Where a package puts bwrap: named when it is there but not on PATH (never used).
USUAL_BWRAP = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
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
