"""What this machine can do: is bwrap there, can it make user namespaces, what a box sees.

Two speeds. :func:`require_box` is on every session's start: a PATH lookup and two
sysctl reads, no process. :func:`probe` (``harness-sandbox doctor``) really starts boxes.
When a box fails to start with a namespace error, :func:`diagnose_start_failure` turns
bwrap's message and the sysctls into the cause and the fix.

The diagnosis functions are pure over the values read, so each branch is testable with
the values a machine would give.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from .errors import SandboxUnavailable
from .policy import Policy
from .which import which

if TYPE_CHECKING:
    from .backends.stage import Stage

APPARMOR_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
MAX_USERNS_SYSCTL = "/proc/sys/user/max_user_namespaces"
USERNS_CLONE_SYSCTL = "/proc/sys/kernel/unprivileged_userns_clone"

NOT_INSTALLED = "bubblewrap (bwrap) is not installed"
INSTALL_FIX = "install the bubblewrap package: sudo apt-get install bubblewrap"
# Where a package puts bwrap: named when it is there but not on PATH (never used).
USUAL_BWRAP = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
APPARMOR_DIAGNOSIS = (
    "user namespaces are blocked by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1)"
)
APPARMOR_FIX = (
    "allow them with sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, "
    "or install an AppArmor profile for bwrap that allows userns"
)
MAX_USERNS_DIAGNOSIS = "user namespaces are turned off (user.max_user_namespaces=0)"
MAX_USERNS_FIX = "turn them on with sudo sysctl -w user.max_user_namespaces=15000"
USERNS_CLONE_DIAGNOSIS = (
    "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone=0)"
)
USERNS_CLONE_FIX = "turn them on with sudo sysctl -w kernel.unprivileged_userns_clone=1"
DOCTOR_FIX = "run harness-sandbox doctor for details"
LIMIT_DIAGNOSIS = (
    "no user namespace can be made here: user.max_user_namespaces is reached or "
    "namespaces are nested too deep"
)
LIMIT_FIX = (
    "raise the limit with sudo sysctl -w user.max_user_namespaces=15000; inside a "
    "container, run harness-sandbox on the host or allow nested user namespaces"
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
    if "ENOSPC" in error or "No space left on device" in error:
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


def diagnose_start_failure(error: str) -> SandboxUnavailable:
    """The cause and fix for a box that failed to start with bwrap's ``error``."""
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


# -- the full probe, for doctor ------------------------------------------------------


class Probe(NamedTuple):
    """What ``doctor`` reports. ``links`` are the network links a box sees (None when
    no box could start); ``diagnosis`` says why the box cannot be built. ``backend`` and
    ``program`` name what builds the box (bwrap on Linux, sandbox-exec on macOS)."""

    bwrap: str | None
    version: str | None = None
    features: tuple[str, ...] = ()
    userns_ok: bool = False
    userns_error: str | None = None
    apparmor_restrict: int | None = None
    max_user_namespaces: int | None = None
    unprivileged_userns_clone: int | None = None
    links: tuple[str, ...] | None = None
    euid: int = -1
    diagnosis: str | None = None
    fix: str | None = None
    backend: str = "bwrap"
    program: str | None = None

    @property
    def ok(self) -> bool:
        return self.diagnosis is None

    @property
    def verdict(self) -> str:
        if self.diagnosis is not None:
            return f"the box cannot be built: {self.diagnosis}"
        if self.backend != "bwrap":
            return f"the box works: {self.backend} at {self.program}"
        links = ", ".join(self.links or ())
        return f"the box works: {self.version} at {self.bwrap}, network links inside: {links}"

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "backend": self.backend,
            "program": self.program if self.backend != "bwrap" else self.bwrap,
            "bwrap": self.bwrap,
            "version": self.version,
            "features": list(self.features),
            "userns_ok": self.userns_ok,
            "userns_error": self.userns_error,
            "sysctls": {
                "kernel.apparmor_restrict_unprivileged_userns": self.apparmor_restrict,
                "user.max_user_namespaces": self.max_user_namespaces,
                "kernel.unprivileged_userns_clone": self.unprivileged_userns_clone,
            },
            "links": None if self.links is None else list(self.links),
            "euid": self.euid,
            "box_identity": self.box_identity,
            "diagnosis": self.diagnosis,
            "fix": self.fix,
        }

    @property
    def box_identity(self) -> dict[str, object]:
        """Which host user the box's processes are, and what that means: the box maps
        the user who starts it to itself in a user namespace of its own, with no
        capability in any namespace; root's boxes run as a stand-in, an id no account
        has (:mod:`sandbox.backends.standin`)."""
        from .backends.standin import UID, needed

        if self.euid == 0 and needed():
            return {"host_uid": UID, "capabilities": "none",
                    "files_made_owned_by": "the owner of the folder they are made in",
                    "note": (f"root's stand-in: uid {UID}, which no account has; the "
                             "folders the box writes are shown to it through idmapped "
                             "mounts, so what it makes there is their owner's, and "
                             "root's own files and the kernel's settings are another "
                             "user's to it")}
        return {"host_uid": self.euid, "capabilities": "none",
                "files_made_owned_by": f"uid {self.euid}",
                "note": "your own user, without capabilities"}


def parse_features(help_text: str) -> tuple[str, ...]:
    """The options ``bwrap --help`` lists, in its order."""
    out: list[str] = []
    for line in help_text.splitlines():
        word = line.strip().split(" ", 1)[0]
        if word.startswith("--") and word not in out:
            out.append(word)
    return tuple(out)


# The smallest box that needs everything the real one needs from the kernel.
_TRIAL = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
          "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--")

_LIST_LINKS = (
    "from pyroute2 import IPRoute\n"
    "with IPRoute() as ip:\n"
    "    print('\\n'.join(l.get_attr('IFLA_IFNAME') for l in ip.get_links()))\n"
)


def _run(argv: Sequence[str], timeout: float = 10.0) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, check=False, cwd="/")


def probe(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Probe:
    """What builds the box on ``platform`` (:func:`sandbox.backends.box_name`), and
    whether it works: for bwrap, its version and options, a trial box and the network
    links a box sees. Starts processes: for ``doctor``, not for every run."""
    from .backends import box_name

    if box_name(platform) == "seatbelt":
        return probe_seatbelt()
    return probe_bwrap(env)


# The smallest Seatbelt profile: a trial that sandbox-exec itself works.
_SEATBELT_TRIAL = "(version 1)(allow default)"
SEATBELT_MISSING_FIX = "sandbox-exec is part of macOS; check that /usr/bin is intact"


def probe_seatbelt() -> Probe:
    """sandbox-exec (always ``/usr/bin/sandbox-exec``) and a trial run under it."""
    from .backends.seatbelt import SANDBOX_EXEC

    euid = os.geteuid()
    base = Probe(None, euid=euid, backend="sandbox-exec", program=SANDBOX_EXEC)
    if not os.path.exists(SANDBOX_EXEC):
        return base._replace(diagnosis=f"{SANDBOX_EXEC} is not there",
                             fix=SEATBELT_MISSING_FIX)
    from .darwin import require_seatbelt
    from .errors import SandboxUnavailable

    try:
        # A harness inside Seatbelt: sandbox-exec cannot apply the box's profile.
        require_seatbelt(program=SANDBOX_EXEC)
    except SandboxUnavailable as err:
        return base._replace(diagnosis=err.diagnosis, fix=err.fix)
    t = _run([SANDBOX_EXEC, "-p", _SEATBELT_TRIAL, "/usr/bin/true"])
    if t.returncode != 0:
        lines = t.stderr.decode(errors="replace").strip().splitlines()
        error = lines[0] if lines else f"exit status {t.returncode}"
        return base._replace(diagnosis=f"sandbox-exec could not start a trial box: {error}",
                             fix=DOCTOR_FIX)
    return base


def _stand_in(euid: int) -> tuple[Stage | None, SandboxUnavailable | None]:
    """Root's stand-in for the trial box (:mod:`sandbox.backends.standin`), or why it
    cannot be made; neither for anyone else."""
    from .backends.stage import Stage
    from .backends.standin import needed

    if euid != 0 or not needed():
        return None, None
    try:
        return Stage.open((), (), stand_in=True), None
    except SandboxUnavailable as err:
        return None, err


def probe_bwrap(env: Mapping[str, str] | None = None) -> Probe:
    """Find bwrap, ask its version and options, start a trial box and list the network
    links a box sees."""
    s = sysctls()
    euid = os.geteuid()
    path_env = (os.environ if env is None else env).get("PATH")
    bwrap = find_bwrap(path_env)
    if bwrap is None:
        absent = not_found(path_env)
        return Probe(None, euid=euid, diagnosis=absent.diagnosis, fix=absent.fix,
                     **s._asdict())
    v = _run([bwrap, "--version"])
    version = v.stdout.decode(errors="replace").strip() or None
    h = _run([bwrap, "--help"])
    features = parse_features(h.stdout.decode(errors="replace"))

    # Root's trial box runs as the boxes will: as root's stand-in.
    stand, refused = _stand_in(euid)
    head = (*stand.argv(), bwrap) if stand is not None else (bwrap,)
    try:
        t = _run([*head, *_TRIAL, "true"])
        error = None
        if t.returncode != 0:
            lines = t.stderr.decode(errors="replace").strip().splitlines()
            error = lines[0] if lines else f"exit status {t.returncode}"
        links: tuple[str, ...] | None = None
        if error is None:
            r = _run([*head, *_TRIAL, sys.executable, "-I", "-c", _LIST_LINKS])
            if r.returncode == 0:
                links = tuple(r.stdout.decode().split())
    finally:
        if stand is not None:
            stand.close()
    found = refused or diagnose_userns(euid=euid, error=error, **s._asdict())
    if found is None:
        from .backends.bwrap import REQUIRED_FEATURES

        missing = [f for f in REQUIRED_FEATURES if f not in features]
        if missing:
            found = SandboxUnavailable(f"{bwrap} lacks {', '.join(missing)}", INSTALL_FIX)
    return Probe(
        bwrap, version, features, userns_ok=error is None, userns_error=error,
        links=links, euid=euid,
        diagnosis=None if found is None else found.diagnosis,
        fix=None if found is None else found.fix, **s._asdict(),
    )
