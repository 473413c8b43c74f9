"""The box without namespaces (``[sandbox] box = "landlock"``): for places that refuse
them (Docker's and Kubernetes' default seccomp profiles, Ubuntu's AppArmor rule on
user namespaces, hardened kernels, root in a container without ``CAP_SYS_ADMIN``).

Each command runs through :mod:`sandbox.linux.landlockrun`, started with an empty environment
from the project: a Landlock domain of its own (reads wide but the hidden paths, ``/tmp``
and ``/dev``; writes beneath the writable roots and the session's private temp folder,
which is its ``TMPDIR``; a few device files; no TCP without the host's network; signals,
abstract sockets and ptrace-mode access scoped to it), ``no_new_privs``, no capability,
and the session's system-call filter with this box's socket rows
(:data:`sandbox.linux.seccomp.LANDLOCK_BOX`). Its lifetime is a host run's
(:mod:`sandbox.box.harden`): a group of its own, a marker, the subreaper. What Landlock cannot
hold read-only inside a writable folder (git's inputs, other tools' configs) is put back
after each run (:mod:`.keeper`; other tools' configs made by the box are moved out as in
every box, :mod:`sandbox.session.moveout`). What it gives up beside the namespace box is
:data:`sandbox.linux.kind.LANDLOCK_GIVES_UP`, said wherever the box is named.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.box.base import BoxBase
from sandbox.errors import SandboxUnavailable
from sandbox.libc import sealed
from sandbox.linux.kind import LANDLOCK, LANDLOCK_GIVES_UP, BoxKind
from sandbox.plan import BackendName, LaunchPlan, RunResult
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.linux.keeper import Keeper
    from sandbox.linux.sentry import Sentry
    from sandbox.network.session import Network
    from sandbox.policy import Policy
    from sandbox.process.pipes import Pipes

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlockrun.py")
# The device files the box may read, write and ask (``ioctl``) of, where they exist. Not
# /dev/pts, nor /dev/ptmx: those are the user's terminals (another shell's input); a run's
# own terminal (``run --tty``) reaches it as its descriptors, and /dev/tty names it.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
           "/dev/tty")
# Read by nothing in the box: the host's temp folders (other users', other sessions'),
# devices (a disk, to root) but what DEVICES names, and /run (a container's secrets,
# the users' runtime folders), as the namespace box's empty /run.
HIDDEN_PLACES = ("/tmp", "/dev", "/run")
FIX = 'use the namespace box where this place allows it ([sandbox] box = "auto")'


def refusal(policy: Policy) -> SandboxUnavailable | None:
    """What this box cannot keep of ``policy``, as a refusal with its fix; None when
    nothing."""
    from sandbox.linux import landlock

    abi = landlock.abi()
    if abi < landlock.NEEDED_ABI:
        return SandboxUnavailable(
            f"the Landlock box needs Landlock ABI {landlock.NEEDED_ABI} (Linux 6.12), and "
            f"this kernel has {abi or 'none'}",
            "run on Linux 6.12 or later with Landlock on (lsm=landlock,...), or " + FIX)
    if policy.network_allow is not None:
        return SandboxUnavailable(
            "[sandbox] network as a list has no Landlock box: Landlock allows a TCP port, "
            "not an address, so the box would reach any host on the proxy's port",
            "write network = false (no network) or true (all of it), or " + FIX)
    if policy.home_tops:
        return SandboxUnavailable(
            f"the [sandbox] writable folder {escape(policy.home_tops[0])} is or holds a "
            "home, which the Landlock box cannot keep read-only at its top",
            "name the folders in the home the box may write instead, or " + FIX)
    if policy.allow_unix_sockets:
        return SandboxUnavailable(
            "[sandbox] allow_unix_sockets has no Landlock box: it makes no Unix socket",
            "remove allow_unix_sockets, or " + FIX)
    writes = writable(policy)
    for hidden in policy.hidden:
        if any(hidden == w or hidden.startswith(w + "/") for w in writes):
            return SandboxUnavailable(
                f"the hidden path {escape(hidden)} lies in a folder the box writes, where "
                "a Landlock rule cannot hide it", "move it out of that folder, or " + FIX)
    return None


def writable(policy: Policy) -> tuple[str, ...]:
    """The roots the box writes: the project's and the named ones, the package caches,
    the private temp folder."""
    from sandbox.policy.caches import box_roots

    return (*box_roots(policy), policy.private_tmp)


def spec(policy: Policy, bpf: bytes) -> bytes:
    """The session's rules, as :mod:`sandbox.linux.landlockrun` reads them: NUL-ended
    records, each a letter and its value."""
    hidden = {*policy.hidden, *(os.path.realpath(h) for h in policy.hidden),
              *HIDDEN_PLACES, os.path.dirname(policy.private_tmp)}
    return encode([*(("h", h) for h in sorted(hidden)),
                   *(("w", w) for w in writable(policy)),
                   *(("d", d) for d in DEVICES if os.path.exists(d)),
                   *(("r", d) for d in _shown_again(policy)),
                   ("n", "1" if policy.network else "0"), ("f", bpf.hex())])


def _shown_again(policy: Policy) -> tuple[str, ...]:
    """What a hidden place shows again, read-only: with the network, the resolver's
    folder ``/etc/resolv.conf`` leads to on a systemd-resolved machine."""
    from sandbox.linux.bwrap_args import RESOLVER_DIR

    return (RESOLVER_DIR,) if policy.network and os.path.isdir(RESOLVER_DIR) else ()


def encode(records: Sequence[tuple[str, str]]) -> bytes:
    """``(letter, value)`` records, each NUL-ended; a value holding a NUL is refused
    (no path or variable can)."""
    if any("\0" in value for _, value in records):
        raise ValueError("a record holds a NUL")
    return b"".join(os.fsencode(k + v) + b"\0" for k, v in records)


class LandlockBackend:
    """Plans a run through :mod:`sandbox.linux.landlockrun` and reads what it said."""

    name: BackendName = "landlock"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.spec_fd: int | None = None
        self._started: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()

    def check(self) -> None:
        err = refusal(self.policy)
        if err is not None:
            raise err

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        """The run: the wrapper with the session's rules, the run's environment and the
        pipe it tells its start on. Holds three descriptors (``run_fds``)."""
        if not argv:
            raise ValueError("an empty command cannot run in the box")
        if self.spec_fd is None:
            raise SandboxUnavailable("the Landlock box runs only in an open session",
                                     "open the session first (Session.open)")
        from sandbox.linux.sockets import interpreter
        from sandbox.policy.startenv import box_env

        env = box_env(self.policy, env_extra, tmpdir=self.policy.private_tmp)
        run = sealed("harness-sandbox-run", encode([("", f"{k}={v}") for k, v in env.items()]))
        read_end, write_end = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        made = LaunchPlan(
            backend="landlock",
            argv=(interpreter(), "-I", "-S", HERE, str(self.spec_fd), str(run),
                  str(write_end), "--", *argv),
            env={}, cwd=self.policy.project, description=shlex.join(argv),
            pass_fds=(self.spec_fd, run, write_end), run_fds=(run, write_end))
        with self._lock:
            self._started[made.argv] = read_end
        return made

    def read(self, result: RunResult) -> RunResult:
        """The wrapper's own failures out of the command's result: a run that never
        wrote its byte was not boxed (raised, with the wrapper's line); one whose
        ``execve`` failed is ``failed_to_start`` with its errno."""
        if result.outcome == "failed_to_start":
            raise SandboxUnavailable(f"the Landlock box's interpreter could not start: "
                                     f"{result.error}", "reinstall the toolkit's Python")
        with self._lock:
            fd = self._started.pop(result.plan.argv, None) if result.plan else None
        if fd is None:
            return result
        try:
            told = os.read(fd, 64)
        except BlockingIOError:
            told = b""
        finally:
            os.close(fd)
        if not told.startswith(b"\x01"):
            lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
            said = lines[0] if lines else f"the wrapper ended ({result.outcome})"
            raise SandboxUnavailable(escape(said.removeprefix("harness-sandbox: ")), FIX)
        if told[1:2] == b"E" and told[2:].isdigit():
            code = int(told[2:])
            return result._replace(outcome="failed_to_start", returncode=None,
                                   error=os.strerror(code), errno=code)
        return result

    def release(self) -> None:
        with self._lock:
            ends, self._started = self._started, {}
        for fd in ends.values():
            os.close(fd)
        if self.spec_fd is not None:
            os.close(self.spec_fd)
            self.spec_fd = None


class LandlockBox(BoxBase):
    """One session's box without namespaces: per run, never warm."""

    name: BackendName = "landlock"
    backend: LandlockBackend

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy)
        self.backend = LandlockBackend(policy)
        self._keeper: Keeper | None = None
        self._sentry: Sentry | None = None
        # What the keeper put back, for the session's warnings (:meth:`said`).
        self._said: list[str] = []
        # The runs going on: the keeper takes the host's changes only between runs.
        self._going = 0
        self._turn = threading.Lock()

    @property
    def kind(self) -> BoxKind:
        return BoxKind(LANDLOCK, LANDLOCK_GIVES_UP)

    def proxy(self) -> Network | None:
        self.backend.check()  # an allow-list is refused, not run with no proxy
        return None

    def open(self, *, held: tuple[str, ...] | None, warm: bool,
             meanwhile: Callable[[], None]) -> None:
        """The rules, the filter and what the box may not change, read now; the host
        runs' groups for its runs. ``held`` and ``warm`` have no meaning here."""
        from sandbox.box.harden import FILTER_FIX, Hardening
        from sandbox.linux import seccomp
        from sandbox.linux.keeper import Keeper

        meanwhile()
        self.backend.check()
        table = seccomp.LANDLOCK_BOX if self.policy.network else seccomp.LANDLOCK_BOX_OFFLINE
        try:
            compiled = seccomp.compile_filter(table)
        except (ImportError, OSError, RuntimeError, AttributeError) as err:
            raise SandboxUnavailable(f"the system-call filter could not be built: {err}",
                                     FILTER_FIX) from err
        try:
            bpf = os.pread(compiled.fd, compiled.size, 0)
        finally:
            os.close(compiled.fd)
        p = self.policy
        self._keeper = Keeper(
            (*p.protected_paths(), *p.missing_hook_dirs(), *p.kept_paths()), writable(p),
            p.env, os.path.basename(p.private_tmp))
        if p.kept_paths():  # what a run makes there, moved out at once (sentry.py)
            from sandbox.linux.sentry import Sentry

            self._sentry = Sentry(p.kept_paths(), self._seen)
        self.backend.spec_fd = sealed("harness-sandbox-landlock", spec(p, bpf))
        self.hardening = Hardening.open(p.limits, boxed=False, private_tmp=p.private_tmp)

    def close(self) -> None:
        super().close()
        if self._sentry is not None:
            self._sentry.close()
            self._sentry = None
        self._put_back()
        self.backend.release()

    def _seen(self) -> None:
        """The sentry saw a kept name made: the keeper's check now, while a run goes."""
        with self._turn:
            if self._going:
                self._put_back()

    def appeared(self) -> tuple[str, ...]:
        """While no run of any of the user's sessions is going: what changed is the
        host's own edit, the keeper's new start (:meth:`Keeper.settle`); the names
        missing before that are there now (kept already: :meth:`adopt` adds none)."""
        with self._turn:
            if self._keeper is not None and self._going == 0:
                return self._keeper.settle()
        return ()

    def adopt(self, paths: tuple[str, ...]) -> None:
        """``paths`` appeared on the host (another tool's config): kept from now on."""
        with self._turn:
            if self._keeper is not None:
                self._keeper.add(paths)

    def said(self) -> list[str]:
        """What the keeper put back since the last call."""
        out, self._said = self._said, []
        return out

    def _put_back(self) -> None:
        if self._keeper is not None:
            self._said += self._keeper.check()

    def _run(self, argv: Sequence[str], *, env_extra: Mapping[str, str] | None,
             stdin: bytes, timeout: float | None, cancel: threading.Event | None,
             pipes: type[Pipes]) -> RunResult:
        """A host run's supervision (group, marker, subreaper), then the keeper's
        check."""
        with self._turn:
            self._going += 1
        try:
            return self.backend.read(self._supervised(
                argv, env_extra, box=False, stdin=stdin, timeout=timeout, cancel=cancel,
                pipes=pipes))
        finally:
            with self._turn:
                self._put_back()
                self._going -= 1
