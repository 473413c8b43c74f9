"""What this machine can do, for ``harness-sandbox doctor``: is bwrap there, can it make
user namespaces, what a box sees. :func:`probe` really starts boxes.

What every session's start needs of it (finding bwrap, the sysctls, the diagnosis of a
box that failed to start) is beside the bwrap plan, in :mod:`sandbox.linux.bwrap_find`,
and said here too under the same names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pathguard.records import NamedTuple
from sandbox.errors import SandboxUnavailable
from sandbox.linux.bwrap_find import INSTALL_FIX, find_bwrap, not_found
from sandbox.linux.causes import Sysctls, at_limit, diagnose_userns, sysctls
from sandbox.platform import PLATFORM
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.linux.stage import Stage

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
    # The box this place allows (sandbox/linux/kind.py), and what it gives up here.
    box: str = "namespaces"
    box_gives_up: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.diagnosis is None

    @property
    def verdict(self) -> str:
        if self.diagnosis is not None:
            return f"the box cannot be built: {self.diagnosis}"
        if self.backend == "landlock":
            return f"the box works: {self.box}, through {self.program}"
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
            "box": {"name": self.box, "gives_up": list(self.box_gives_up)},
            "diagnosis": self.diagnosis,
            "fix": self.fix,
        }

    @property
    def box_identity(self) -> dict[str, object]:
        """Which host user the box's processes are, and what that means: the box maps
        the user who starts it to itself in a user namespace of its own, with no
        capability in any namespace; root's boxes run as a stand-in, an id no account
        has (:mod:`sandbox.linux.standin`)."""
        from sandbox.linux.standin import COUNT, OWNER_CAPS, UID, needed

        if self.euid == 0 and needed():
            return {"host_uid": UID,
                    "capabilities": f"{', '.join(OWNER_CAPS)}, in its own user namespace",
                    "files_made_owned_by": "the owner of the folder they are made in",
                    "note": (f"root's stand-in: uid {UID}, which no account has; the "
                             "folders the box writes are shown to it through idmapped "
                             "mounts, so what it makes there is their owner's, and "
                             "root's own files and the kernel's settings are another "
                             f"user's to it. Its ids 0 to {COUNT - 1} are the host's "
                             f"{UID} to {UID + COUNT - 1}, which no account has either: "
                             "a file the box gives its id N (chown, tar -xp) is host "
                             f"id {UID} + N, and only root on the host can give it back")}
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


def probe(env: Mapping[str, str] | None = None, platform: str = PLATFORM,
          box: str = "auto") -> Probe:
    """What builds the box on ``platform`` (:func:`sandbox.dispatch.box_name`; ``box``
    is ``[sandbox] box``), and whether it works: for bwrap, its version and options, a
    trial box and the network links a box sees; for the Landlock box, a trial of it.
    Starts processes: for ``doctor``, not for every run."""
    from sandbox.dispatch import box_name

    if box_name(platform) == "seatbelt":
        return probe_seatbelt()
    if box == "landlock":
        return probe_landlock()
    return probe_bwrap(env)


def probe_landlock() -> Probe:
    """The Landlock box's wrapper, tried: ``/bin/true`` in a domain that hides ``/tmp``
    and writes nowhere, under no filter."""
    from sandbox.libc import sealed
    from sandbox.linux.kind import LANDLOCK, LANDLOCK_GIVES_UP
    from sandbox.linux.landlock import NEEDED_ABI, abi
    from sandbox.linux.landlockbox import FIX, HERE, encode
    from sandbox.linux.sockets import interpreter

    python, euid = interpreter(), os.geteuid()
    base = Probe(bwrap=None, backend="landlock", program=python, euid=euid, box=LANDLOCK,
                 box_gives_up=LANDLOCK_GIVES_UP)
    if abi() < NEEDED_ABI:
        return base._replace(diagnosis=f"this kernel's Landlock is ABI {abi() or 'none'}; "
                                       f"the Landlock box needs {NEEDED_ABI} (Linux 6.12)",
                             fix="run on Linux 6.12 or later with Landlock on, or " + FIX)
    spec = encode([("h", "/tmp"), ("n", "0")])
    fds = (sealed("probe", spec), sealed("probe-run", encode([("", "PATH=/usr/bin:/bin")])))
    read_end, write_end = os.pipe()
    try:
        r = subprocess.run([python, "-I", "-S", HERE, *map(str, (*fds, write_end)), "--",
                            "true"], capture_output=True, timeout=30, check=False, cwd="/",
                           env={}, pass_fds=(*fds, write_end))
        os.close(write_end)
        told = os.read(read_end, 16)
    finally:
        for fd in (*fds, read_end):
            os.close(fd)
    if r.returncode == 0 and told == b"\x01":
        return base
    said = r.stderr.decode("utf-8", "replace").strip().splitlines()
    return base._replace(diagnosis=escape(said[0] if said else f"status {r.returncode}"),
                         fix=FIX)


# The smallest Seatbelt profile: a trial that sandbox-exec itself works.
_SEATBELT_TRIAL = "(version 1)(allow default)"
SEATBELT_UNKNOWN_FIX = ("try it by hand (sandbox-exec -p '(version 1)(allow default)' "
                        "/usr/bin/true) and report what it prints")
SEATBELT_MISSING_FIX = "sandbox-exec is part of macOS; check that /usr/bin is intact"


def probe_seatbelt() -> Probe:
    """sandbox-exec (always ``/usr/bin/sandbox-exec``) and a trial run under it."""
    from sandbox.macos.seatbelt import SANDBOX_EXEC

    euid = os.geteuid()
    base = Probe(None, euid=euid, backend="sandbox-exec", program=SANDBOX_EXEC)
    if not os.path.exists(SANDBOX_EXEC):
        return base._replace(diagnosis=f"{SANDBOX_EXEC} is not there",
                             fix=SEATBELT_MISSING_FIX)
    from sandbox.errors import SandboxUnavailable
    from sandbox.macos.darwin import require_seatbelt

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
                             fix=SEATBELT_UNKNOWN_FIX)
    return base


def _stand_in(euid: int) -> tuple[Stage | None, SandboxUnavailable | None]:
    """Root's stand-in for the trial box (:mod:`sandbox.linux.standin`), or why it
    cannot be made; neither for anyone else."""
    from sandbox.linux.stage import Stage
    from sandbox.linux.standin import needed

    if euid != 0 or not needed():
        return None, None
    try:
        return Stage.open((), (), stand_in=True), None
    except SandboxUnavailable as err:
        return None, err


# doctor's own last word, where no cause it knows is seen (never "run doctor").
UNKNOWN_FIX = ("no cause harness-sandbox knows is seen here: try bwrap by hand (bwrap "
               "--ro-bind / / --proc /proc --unshare-all true) and report what it prints")


def _cause(euid: int, refused: SandboxUnavailable | None, error: str | None,
           s: Sysctls) -> SandboxUnavailable | None:
    """Why the trial box failed: the cause this place shows (:mod:`.backends.causes`),
    else the stand-in's refusal or what the sysctls and bwrap's line say."""
    if refused is None and error is None:
        return diagnose_userns(euid=euid, **s._asdict())
    got = refused  # the stage names the cause it sees itself
    if got is None and not at_limit(error or ""):
        from sandbox.linux.causes import found

        seen = found(euid)
        if seen is not None:
            return SandboxUnavailable(f"{seen.diagnosis} ({error})", seen.fix)
    if got is None:
        got = diagnose_userns(euid=euid, error=error, **s._asdict())
    if got is not None and "harness-sandbox doctor" in got.fix:
        return SandboxUnavailable(got.diagnosis, UNKNOWN_FIX)
    return got


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

    # Root's trial box runs as the boxes will: as root's stand-in, and with the
    # container's /proc in a Landlock domain where a fresh one is refused.
    from sandbox.linux.kind import bound_proc_args, choose, in_domain

    kind = choose()
    trial = bound_proc_args(_TRIAL) if kind.bound_proc else _TRIAL
    stand, refused = _stand_in(euid)
    head: tuple[str, ...] = in_domain((bwrap,)) if kind.bound_proc else (bwrap,)
    head = (*stand.argv(), *head) if stand is not None else head
    if stand is not None:
        from sandbox.linux.standin import box_options

        trial = box_options(trial)  # no user namespace of bwrap's in the stand-in's
    try:
        t = _run([*head, *trial, "true"])
        error = None
        if t.returncode != 0:
            lines = t.stderr.decode(errors="replace").strip().splitlines()
            error = lines[0] if lines else f"exit status {t.returncode}"
        links: tuple[str, ...] | None = None
        if error is None:
            r = _run([*head, *trial, sys.executable, "-I", "-c", _LIST_LINKS])
            if r.returncode == 0:
                links = tuple(r.stdout.decode().split())
    finally:
        if stand is not None:
            stand.close()
    found = _cause(euid, refused, error, s)
    if found is None:
        from sandbox.linux.bwrap import REQUIRED_FEATURES

        missing = [f for f in REQUIRED_FEATURES if f not in features]
        if missing:
            found = SandboxUnavailable(f"{bwrap} lacks {', '.join(missing)}", INSTALL_FIX)
    return Probe(
        bwrap, version, features, userns_ok=error is None, userns_error=error,
        links=links, euid=euid, box=kind.name, box_gives_up=kind.gives_up,
        diagnosis=None if found is None else found.diagnosis,
        fix=None if found is None else found.fix, **s._asdict(),
    )
