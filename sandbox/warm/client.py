"""The host's side of a warm box: one bwrap per session, each run started inside it.

:meth:`WarmBox.start` starts bubblewrap with the session's box options and, as its
command, the resident starter (:mod:`sandbox.warm.helper`), and waits until it is ready.
:meth:`WarmBox.run` runs one command there and returns the same
:class:`~sandbox.plan.RunResult` a cold box gives: stdin written, stdout and stderr read
and capped by the supervisor's :class:`~sandbox.process.pipes.Pipes`, timeout and
cancel ending the run's whole PID namespace, a command killed by signal N reported as
exited with 128+N, a command that cannot be executed as ``failed_to_start`` with the OS
error. Any number of threads may run at once.

bwrap is started, and waited for, by a thread that lives as long as the box: bwrap's
``--die-with-parent`` fires when the thread that started it ends, and this thread also
reads the starter's answers for every run.

A starter that has died, or that does not say a run started within
:data:`START_LIMIT` seconds, or does not end a run it was told to kill within
:data:`KILL_LIMIT`, ends the box: that run and every later one raise
:class:`~sandbox.errors.SandboxUnavailable`. Nothing falls back to a cold box or to the
host.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import IO, TYPE_CHECKING

from sandbox.backends.bwrap import args_by_fd
from sandbox.errors import SandboxUnavailable
from sandbox.plan import LaunchPlan, Outcome, RunResult
from sandbox.process import orphans
from sandbox.process.pipes import Pipes
from sandbox.process.supervisor import poll_wait
from sandbox.text import escape
from sandbox.warm.inbox import MAX_MESSAGE, pack, unpack

if TYPE_CHECKING:
    from sandbox.policy import Policy

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helper.py")
# What the starter needs in the box's user namespace: new namespaces and mounts per run
# (CAP_SYS_ADMIN), and to empty each command's bounding set (CAP_SETPCAP).
# The starter's, in the box's user namespace only: each run's namespaces and mounts
# (SYS_ADMIN), its loopback brought up (NET_ADMIN), dropping them (SETPCAP), and the
# Unix-socket guard's taking a socket of a caller that is not dumpable (SYS_PTRACE).
CAPS = ("CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_SYS_PTRACE", "CAP_NET_ADMIN")
START_LIMIT = 10.0
KILL_LIMIT = 5.0
# A request longer than this goes in a memfd (a SOCK_SEQPACKET message must fit the
# socket's buffer whole).
BIG = 1 << 16
STDERR_KEPT = 1 << 14
FIX = "the session's box must be opened again"


class WarmBoxDown(SandboxUnavailable):
    """The warm box did not start, is gone or stopped answering. ``stderr`` is what
    bwrap and the starter wrote (bwrap's own errors, such as a namespace refused)."""

    def __init__(self, diagnosis: str, fix: str = FIX, stderr: bytes = b"") -> None:
        super().__init__(diagnosis, fix)
        self.stderr = stderr


def box_options(policy: Policy, *, bwrap: str, features: Collection[str] | None = None,
                fds: Mapping[str, int] | None = None, shm_size: int | None = None,
                staged: bool = False) -> tuple[str, ...]:
    """bwrap and the session's box options for a warm box: the cold box's
    (:func:`~sandbox.backends.bwrap.box_args`) with a pristine ``/proc``, which each run
    covers on its own fresh one.

    Without ``--disable-userns``, which puts the box's processes in a nested user
    namespace: from there the starter could neither go back to its own PID namespace
    after making a run's (``setns`` needs ``CAP_SYS_ADMIN`` where that namespace was
    made) nor, in a box started by root, mount a run's ``/proc`` (bwrap covers the
    writable procfs entries itself then, and in a nested namespace those covers are
    locked, which makes the kernel refuse a new procfs). What stops a run from making a
    user namespace is its filter, which refuses every new namespace
    (:data:`sandbox.seccomp.DENIED`), as it does in the cold box.
    """
    from sandbox.backends.bwrap import box_args

    args = box_args(policy, bwrap=bwrap, features=features, fds=fds, shm_size=shm_size,
                    proc_belt=False, staged=staged)
    return tuple(a for a in args if a != "--disable-userns")


class _Proc:
    """The host's ends of one run's pipes, as :class:`Pipes` reads a process's."""

    def __init__(self, stdin: int, stdout: int, stderr: int) -> None:
        self.stdin: IO[bytes] | None = open(stdin, "wb", buffering=0)  # noqa: SIM115
        self.stdout: IO[bytes] | None = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr: IO[bytes] | None = open(stderr, "rb", buffering=0)  # noqa: SIM115


class _Pending:
    """One run the starter has been asked for: woken (``notify``) at its end."""

    __slots__ = ("notify", "reply", "sent", "started")

    def __init__(self) -> None:
        self.notify = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.sent = time.monotonic()
        self.started = False
        self.reply: list[bytes] | None = None


class WarmBox:
    """One session's warm box. Build with :meth:`start`; :meth:`close` ends it."""

    def __init__(self) -> None:
        self._sock, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self._pending: dict[bytes, _Pending] = {}
        self._next = 0
        self._why: str | None = None
        self._ready = threading.Event()
        self._stderr = bytearray()
        self.proc: subprocess.Popen[bytes] | None = None
        self._keeper: threading.Thread | None = None
        # How long the starter may take to start a run, and to end one it was told to.
        self.start_limit = START_LIMIT
        self.kill_limit = KILL_LIMIT

    @classmethod
    def start(cls, options: Sequence[str], *, bpf: bytes, shm_size: int,  # noqa: PLR0913
              read_only: Sequence[str], nulled: Sequence[str],
              pass_fds: tuple[int, ...] = (), processes: int = 0,
              launcher: Sequence[str] = (), guard: Sequence[bytes] = (),
              own_network: bool = False) -> WarmBox:
        """Start the box: ``options`` is bwrap and its options up to the command (the
        session's :func:`~sandbox.backends.bwrap.box_args` with a pristine ``/proc``).
        ``bpf`` is the compiled filter each command loads; ``read_only`` and ``nulled``
        are the procfs entries each run's fresh ``/proc`` has bound read-only and
        covered by ``/dev/null``; ``shm_size`` is each run's ``/dev/shm`` in bytes.
        ``pass_fds`` (the binds' descriptors) are handed to bwrap. ``processes`` bounds
        the box's processes (``RLIMIT_NPROC``: all the session's runs together).
        ``launcher`` goes before bwrap (the session's stage,
        :mod:`sandbox.backends.stage`). ``guard`` is what each run's Unix-socket guard
        needs (:func:`sandbox.sockets.guard_fields`); ``own_network`` gives each run a
        network namespace of its own, with only its loopback (a box without network).
        Raises
        :class:`SandboxUnavailable` when the box or its starter does not come up."""
        self = cls()
        fd = self._theirs.fileno()
        python = os.path.realpath(sys.executable)
        command = (python, "-I", "-S", HELPER, str(fd))
        # The options by descriptor: thousands of binds would pass the kernel's ARG_MAX.
        made = args_by_fd(LaunchPlan("bwrap", (*options, *(
            x for c in CAPS for x in ("--cap-add", c)), "--", *command), {}, "/",
            "the warm box", pass_fds=(*pass_fds, fd)), len(command))
        spawned = threading.Event()
        self._keeper = threading.Thread(
            # bwrap starts on the host with an empty environment: a linker variable
            # would load a library into it before any namespace exists.
            target=self._keep, args=((*launcher, *made.argv), {}, made.pass_fds, spawned),
            daemon=True, name="harness-sandbox-warm-box")
        self._keeper.start()
        spawned.wait()
        self._theirs.close()
        for run_fd in made.run_fds:
            os.close(run_fd)
        setup = [b"setup", b"%d" % shm_size, b"\0".join(os.fsencode(p) for p in read_only),
                 b"\0".join(os.fsencode(p) for p in nulled), bpf, b"%d" % processes,
                 *(guard or (b"", b"", b"")), b"net" if own_network else b""]
        # A starter already gone is said just below.
        with contextlib.suppress(OSError):
            self._sock.send(pack(setup))
        if not self._ready.wait(START_LIMIT) or self._why is not None:
            why = self._why or f"its starter did not answer within {START_LIMIT:g} s"
            self.close()
            raise WarmBoxDown(f"the warm box did not start: {why}", FIX, self.stderr)
        return self

    @property
    def stderr(self) -> bytes:
        """What bwrap and the starter wrote (the first 16 KiB): their own errors."""
        return bytes(self._stderr)

    # -- the keeper thread ---------------------------------------------------------------

    def _keep(self, argv: tuple[str, ...], env: dict[str, str], fds: tuple[int, ...],
              spawned: threading.Event) -> None:
        try:
            # Registered before any session reap can see it exit (sandbox.process.orphans).
            with orphans.lock:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        env=env, pass_fds=fds, close_fds=True,
                                        start_new_session=True)
                orphans.running.add(proc.pid)
        except OSError as err:
            self._fail(f"{escape(argv[0])} could not start: {err.strerror}")
            spawned.set()
            return
        self.proc = proc
        spawned.set()
        try:
            self._serve(proc)
            self._last_words(proc)
        finally:
            self._fail(self._gone_why(proc))
            proc.kill()
            proc.wait()
            orphans.running.discard(proc.pid)

    def _last_words(self, proc: subprocess.Popen[bytes]) -> None:
        """What bwrap still writes as it ends (its namespace error comes as the box's
        end, perhaps after the starter's socket closed), for the diagnosis."""
        assert proc.stderr is not None
        err = proc.stderr.fileno()
        poller = select.poll()
        poller.register(err, select.POLLIN)
        deadline = time.monotonic() + 1.0
        while len(self._stderr) < STDERR_KEPT and poller.poll(
                max(0, int((deadline - time.monotonic()) * 1000))):
            data = os.read(err, 4096)
            if not data:
                return
            self._stderr += data[:STDERR_KEPT - len(self._stderr)]

    def _gone_why(self, proc: subprocess.Popen[bytes]) -> str:
        text = self._stderr.decode("utf-8", "replace").strip()
        if text:
            return f"it ended: {escape(text.splitlines()[-1])}"
        rc = proc.poll()
        return "it ended" if rc is None else f"it ended with status {rc}"

    def _serve(self, proc: subprocess.Popen[bytes]) -> None:
        """Read the starter's answers and bwrap's stderr until the box ends."""
        assert proc.stderr is not None
        err = proc.stderr.fileno()
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        poller.register(err, select.POLLIN)
        while True:
            for fd, _ in poller.poll(int(min(1.0, self.start_limit / 4) * 1000)):
                if fd == err:
                    data = os.read(err, 4096)
                    if not data:
                        poller.unregister(err)
                    self._stderr += data[:max(0, STDERR_KEPT - len(self._stderr))]
                elif not self._answer():
                    return
            if self._stalled():
                return

    def _answer(self) -> bool:
        """One answer from the starter; False when it is gone."""
        try:
            msg = self._sock.recv(MAX_MESSAGE)
        except OSError:
            return False
        if not msg:
            return False
        fields = unpack(msg)
        if fields[0] == b"ready":
            self._ready.set()
            return True
        with self._lock:
            pending = self._pending.get(fields[1]) if len(fields) > 1 else None
        if pending is not None and fields[0] == b"started":
            pending.started = True
        elif pending is not None and fields[0] == b"exit":
            pending.reply = fields
            os.eventfd_write(pending.notify, 1)
        return True

    def _stalled(self) -> bool:
        now = time.monotonic()
        with self._lock:
            late = any(not p.started and p.reply is None and now - p.sent > self.start_limit
                       for p in self._pending.values())
        if late:
            self._fail(f"its starter did not start a run within {self.start_limit:g} s")
        return late

    def fail(self, why: str) -> None:
        """Take the box out of service: every later run raises :class:`WarmBoxDown`
        with ``why`` (a part of the session that its runs need has gone)."""
        self._fail(why)

    def _fail(self, why: str) -> None:
        """The box is unusable from now on: every run waiting is woken to say so."""
        with self._lock:
            if self._why is None:
                self._why = why
            waiting = list(self._pending.values())
        self._ready.set()
        for p in waiting:
            os.eventfd_write(p.notify, 1)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def close(self) -> None:
        """End the box: the starter sees the host's end, and everything in it goes."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        if self._keeper is not None:
            self._keeper.join(KILL_LIMIT)
            if self._keeper.is_alive() and self.proc is not None:
                self.proc.kill()
                self._keeper.join()
        self._sock.close()
        self._theirs.close()

    # -- runs --------------------------------------------------------------------------

    def run(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, *,
            stdin: bytes = b"", timeout: float | None = None,
            cancel: threading.Event | None = None, output_cap: int = 1 << 20,
            pipes: type[Pipes] = Pipes) -> RunResult:
        """Run ``argv`` (a bare name is looked up on ``env``'s PATH in the box) in
        ``cwd`` with exactly ``env``; ``pipes`` reads the output
        (:func:`sandbox.process.supervisor.run` says how). The result has no plan. Raises
        :class:`SandboxUnavailable` when the box is gone or stops answering."""
        if not argv:
            raise ValueError("an empty command cannot run in the box")
        started = time.monotonic()
        if cancel is not None and cancel.is_set():
            return RunResult("cancelled", elapsed=0.0)
        rid, pending = self._register()
        streams: Pipes | None = None
        try:
            proc = self._ask(rid, argv, env, cwd)
            streams = pipes(proc, stdin, output_cap)
            streams.poller.register(pending.notify, select.POLLIN)
            deadline = None if timeout is None else started + timeout
            outcome = _pump(streams, pending.notify, deadline, cancel)
            if outcome != "exited":
                self._kill(rid, pending)
            reply = self._reply(pending)
            streams.poller.unregister(pending.notify)
            streams.close_stdin()
            # The run's namespace is gone: its pipes are at their end, or held by nobody.
            streams.drain(0.25, time.monotonic() + 1.0)
            return _result(outcome, reply, streams, started)
        finally:
            if streams is not None:
                streams.close()
            with self._lock:
                del self._pending[rid]
            os.close(pending.notify)

    def _register(self) -> tuple[bytes, _Pending]:
        with self._lock:
            if self._why is not None:
                raise WarmBoxDown(f"the warm box is gone: {self._why}", FIX, self.stderr)
            self._next += 1
            rid = b"%d" % self._next
            pending = self._pending[rid] = _Pending()
        return rid, pending

    def _ask(self, rid: bytes, argv: Sequence[str], env: Mapping[str, str], cwd: str
             ) -> _Proc:
        """Send the run with the far ends of its three pipes; the host's ends back."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        theirs = [in_r, out_w, err_w]
        msg = pack([b"run", rid, os.fsencode(cwd), b"%d" % len(argv),
                    *(os.fsencode(a) for a in argv),
                    *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())])
        try:
            if len(msg) > BIG:
                memfd = os.memfd_create("harness-sandbox-run", os.MFD_CLOEXEC)
                theirs.append(memfd)
                os.write(memfd, msg)
                os.lseek(memfd, 0, os.SEEK_SET)
                msg = pack([b"big", rid])
            socket.send_fds(self._sock, [msg], theirs)
        except OSError as err:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            self._fail(f"its starter is gone ({err.strerror})")
            raise WarmBoxDown(f"the warm box is gone: {self._why}", FIX, self.stderr) from err
        finally:
            for fd in theirs:
                os.close(fd)
        return _Proc(in_w, out_r, err_r)

    def _kill(self, rid: bytes, pending: _Pending) -> None:
        """Ask for the run's end; a starter that does not end it ends the box."""
        try:
            self._sock.send(pack([b"kill", rid]))
        except OSError:
            self._fail("its starter is gone")
            return
        poller = select.poll()
        poller.register(pending.notify, select.POLLIN)
        if not poller.poll(int(self.kill_limit * 1000)):
            self._fail(f"its starter did not end a run within {self.kill_limit:g} s")

    def _reply(self, pending: _Pending) -> list[bytes]:
        with self._lock:
            reply = pending.reply
        if reply is None:
            raise WarmBoxDown(f"the warm box is gone: {self._why}", FIX, self.stderr)
        return reply


def _pump(streams: Pipes, notify: int, deadline: float | None,
          cancel: threading.Event | None) -> Outcome:
    """Serve the pipes until the run's end is told, the deadline passes or cancel is
    set: "exited" (the answer says how), "timed_out" or "cancelled"."""
    while True:
        wait = poll_wait(deadline, cancel)
        ended = False
        for fd, event in streams.poller.poll(None if wait is None else math.ceil(wait * 1000)):
            if fd == notify:
                ended = True
            else:
                streams.handle(fd, event)
        if ended:
            return "exited"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if deadline is not None and time.monotonic() >= deadline:
            return "timed_out"


def _result(outcome: Outcome, reply: list[bytes], streams: Pipes, started: float
            ) -> RunResult:
    kind, value = reply[2], reply[3]
    if kind == b"setup":
        raise WarmBoxDown("the warm box could not make a run's namespaces: "
                          + escape(value.decode("utf-8", "replace")))
    base = RunResult(outcome,
                     stdout=bytes(streams.bufs[streams.out_fd]),
                     stderr=bytes(streams.bufs[streams.err_fd]),
                     stdout_capped=streams.capped[streams.out_fd],
                     stderr_capped=streams.capped[streams.err_fd],
                     elapsed=time.monotonic() - started)
    if outcome != "exited":
        return base
    if kind == b"exec":
        n = int(value)
        return base._replace(outcome="failed_to_start", error=os.strerror(n), errno=n)
    return base._replace(returncode=int(value))
