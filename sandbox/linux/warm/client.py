"""The host's side of a warm box: one bwrap per session, each run started inside it.

:meth:`WarmBox.start` starts bubblewrap with the session's box options and, as its
command, the resident starter (the compiled ``sandbox/linux/warm/warmstart.c`` or the Python
:mod:`sandbox.linux.warm.helper`: :mod:`sandbox.linux.warm.starting`), and waits until it is ready.
:meth:`WarmBox.run` runs one command there and returns the same
:class:`~sandbox.plan.RunResult` a cold box gives: stdin written, stdout and stderr read
and capped by the supervisor's :class:`~sandbox.process.pipes.Pipes`, timeout and
cancel ending the run's whole PID namespace, a command killed by signal N reported as
exited with 128+N, a command that cannot be executed as ``failed_to_start`` with the OS
error. Any number of threads may run at once.

bwrap is started, and waited for, by a thread that lives as long as the box: bwrap's
``--die-with-parent`` fires when the thread that started it ends, and this thread also
reads the starter's answers for every run.

Runs are made ahead by the starter (:data:`SPARE` wait here), each with a channel of
its own: a run's request goes straight to its init, which answers ``started`` and its
end on that channel, so a run passes through no process of the box but its own. Making
one costs more than a run (a fork, three namespaces, a dozen mounts, the guard), so
they are made again once no run has started or ended for :data:`IDLE` seconds: a
harness's few runs in a row (a hook, the command, a hook) each find one made, and none
is made while they run. A run that finds none asks for one at once.

A starter that has died, or that does not make a run within :data:`START_LIMIT`
seconds, or does not end a run it was told to kill within :data:`KILL_LIMIT`, ends the
box: that run and every later one raise :class:`~sandbox.errors.SandboxUnavailable`; so
does a run's init that does not say its command started within :data:`START_LIMIT`.
Nothing falls back to a cold box or to the host.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from sandbox.linux.warm.bwraplog import gone_why, keep, last_words
from sandbox.linux.warm.channel import FIX, WarmBoxDown, ask, pump, result
from sandbox.linux.warm.inbox import MAX_MESSAGE, pack, unpack
from sandbox.linux.warm.starting import called, starter_plan
from sandbox.plan import RunResult
from sandbox.process import reaper
from sandbox.process.beside import Beside
from sandbox.process.pipes import Pipes
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.process.cgroup import Spawn

START_LIMIT = 10.0
KILL_LIMIT = 5.0
# Runs made ahead and waiting here: a run's namespaces, mounts, forks and dropped
# privileges are made while nothing else runs, off the next run's start.
SPARE = 3
IDLE = 0.01


class WarmBox:
    """One session's warm box. Build with :meth:`start`; :meth:`close` ends it."""

    def __init__(self) -> None:
        self._sock, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        # Runs made ahead (their id and channel), and how many more are asked for.
        self._spares: list[tuple[bytes, socket.socket]] = []
        self._asked = 0
        self._waiting = 0   # runs waiting for one
        self._refused = 0   # answers "no process for it" owed to those
        self._changed = threading.Condition(self._lock)
        self._ended: dict[bytes, threading.Event] = {}  # runs killed, until reaped
        self._down = threading.Event()  # bwrap has ended: nothing of the box lives
        self._refill_at: float | None = None  # when to make runs ahead again
        self._nudge = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._why: str | None = None
        self._ready = threading.Event()
        self._stderr = bytearray()
        self.proc: subprocess.Popen[bytes] | None = None
        self._keeper: threading.Thread | None = None
        # How long the starter may take to start a run, and to end one it was told to.
        self.start_limit = START_LIMIT
        self.kill_limit = KILL_LIMIT
        # Whom each run's pipes are given to (sandbox.plan.LaunchPlan.stdio_owner).
        self.stdio_owner: tuple[int, int] | None = None

    @classmethod
    def start(cls, options: Sequence[str], *, bpf: bytes, shm_size: int,  # noqa: PLR0913
              read_only: Sequence[str], nulled: Sequence[str],
              pass_fds: tuple[int, ...] = (), processes: int = 0,
              launcher: Sequence[str] = (), guard: Sequence[bytes] = (),
              own_network: bool = False, starter: int | None = None,
              spawn: Spawn[subprocess.Popen[bytes]] | None = None,
              alongside: Callable[[], None] | None = None,
              meanwhile: Callable[[], None] | None = None) -> WarmBox:
        """Start the box: ``options`` is bwrap and its options up to the command (the
        session's :func:`~sandbox.linux.bwrap.box_args` with a pristine ``/proc``).
        ``bpf`` is the compiled filter each command loads; ``read_only`` and ``nulled``
        are the procfs entries each run's fresh ``/proc`` has bound read-only and
        covered by ``/dev/null``; ``shm_size`` is each run's ``/dev/shm`` in bytes.
        ``pass_fds`` (the binds' descriptors) are handed to bwrap. ``processes`` bounds
        the box's processes (``RLIMIT_NPROC``: all the session's runs together).
        ``launcher`` goes before bwrap (the session's stage,
        :mod:`sandbox.linux.stage`). ``guard`` is what each run's Unix-socket guard
        needs (:func:`sandbox.linux.sockets.guard_fields`); ``own_network`` gives each run a
        network namespace of its own, with only its loopback (a box without network).
        ``starter`` is the compiled starter's sealed memfd (None: the Python one;
        :mod:`sandbox.linux.warm.starting`).
        ``spawn`` starts bwrap (a thread in the session's control group, where bwrap is
        then born: :class:`~sandbox.process.cgroup.Spawner`). ``alongside`` is called in
        a thread of its own once bwrap has started (the stage's binds): no run is made
        in the box before it returns, and what it raises closes the box and is raised.
        ``meanwhile`` is called in this thread while the box starts; what it raises
        closes the box, once started, and is raised. Raises
        :class:`SandboxUnavailable` when the box or its starter does not come up."""
        self = cls()
        made = starter_plan(options, pass_fds, self._theirs.fileno(), starter)
        spawned = threading.Event()
        self._keeper = threading.Thread(
            # bwrap starts on the host with an empty environment: a linker variable
            # would load a library into it before any namespace exists.
            target=self._keep, args=((*launcher, *made.argv), {}, made.pass_fds, spawned,
                                     spawn),
            daemon=True, name="harness-sandbox-warm-box")
        self._keeper.start()
        spawned.wait()
        beside = None if alongside is None else Beside(alongside, "harness-sandbox-beside")
        self._theirs.close()
        for run_fd in made.run_fds:
            os.close(run_fd)
        setup = [b"setup", b"%d" % shm_size, b"\0".join(os.fsencode(p) for p in read_only),
                 b"\0".join(os.fsencode(p) for p in nulled), bpf, b"%d" % processes,
                 *(guard or (b"", b"", b"")), b"net" if own_network else b""]
        with contextlib.suppress(OSError):  # a starter already gone is said just below
            self._sock.send(pack(setup))
        self._come_up(beside, meanwhile)
        return self

    def _come_up(self, beside: Beside | None, meanwhile: Callable[[], None] | None) -> None:
        """``meanwhile`` here, then the starter's word and the work ``beside``; the
        first failure closes the box and is raised. Then the runs made ahead are asked
        for."""
        refused = called(meanwhile)
        up = self._ready.wait(START_LIMIT) and self._why is None
        failed = beside.join() if beside is not None else None
        if refused is not None:
            self.close()
            raise refused
        if not up:
            why = self._why or f"its starter did not answer within {START_LIMIT:g} s"
            self.close()
            raise WarmBoxDown(f"the warm box did not start: {why}", FIX, self.stderr)
        if failed is not None:
            self.close()
            raise failed
        with self._lock:
            for _ in range(SPARE):
                self._more()

    @property
    def made_ahead(self) -> int:
        """How many runs made ahead wait here now."""
        with self._lock:
            return len(self._spares)

    @property
    def stderr(self) -> bytes:
        """What bwrap and the starter wrote (the first 16 KiB): their own errors."""
        return bytes(self._stderr)

    # -- the keeper thread ---------------------------------------------------------------

    def _keep(self, argv: tuple[str, ...], env: dict[str, str], fds: tuple[int, ...],
              spawned: threading.Event,
              spawn: Spawn[subprocess.Popen[bytes]] | None) -> None:
        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    env=env, pass_fds=fds, close_fds=True,
                                    start_new_session=True)
        try:
            # Registered before any session reap can see it exit (sandbox.process.reaper).
            with reaper.lock:
                proc = popen() if spawn is None else spawn(popen)
                reaper.running.add(proc.pid)
        except OSError as err:
            self._fail(f"{escape(argv[0])} could not start: {err.strerror}")
            spawned.set()
            return
        self.proc = proc
        spawned.set()
        try:
            self._serve(proc)
            last_words(proc, self._stderr)
        finally:
            self._fail(gone_why(proc, self._stderr))
            proc.kill()
            proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()  # now, not when the last reference to the box goes
            reaper.running.discard(proc.pid)
            self._down.set()
            with self._lock:
                for ended in self._ended.values():
                    ended.set()

    def _serve(self, proc: subprocess.Popen[bytes]) -> None:
        """Read the starter's answers and bwrap's stderr until the box ends."""
        assert proc.stderr is not None
        err = proc.stderr.fileno()
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        poller.register(err, select.POLLIN)
        poller.register(self._nudge, select.POLLIN)
        while True:
            for fd, _ in poller.poll(self._due()):
                if fd == self._nudge:
                    os.eventfd_read(self._nudge)
                elif fd == err:
                    data = os.read(err, 4096)
                    if not data:
                        poller.unregister(err)
                    keep(self._stderr, data)
                elif not self._answer():
                    return

    def _answer(self) -> bool:
        """One answer from the starter; False when it is gone."""
        try:
            msg, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
        except OSError:
            return False
        if not msg:
            return False
        fields = unpack(msg)
        kind, rid = fields[0], fields[1] if len(fields) > 1 else b""
        if kind == b"ready":
            self._ready.set()
        elif kind == b"spare" and fds:
            self._spare(rid, socket.socket(fileno=fds.pop()))
        elif kind in (b"nospare", b"broken"):
            self._none(kind, rid)
        elif kind == b"ended":
            with self._lock:
                ended = self._ended.get(rid)
            if ended is not None:
                ended.set()
        for fd in fds:
            os.close(fd)
        return True

    def _none(self, kind: bytes, why: bytes) -> None:
        """A run asked for that could not be made: no process for it (a run waiting
        gets EAGAIN), or none can be made (the box is failed)."""
        with self._lock:
            self._asked -= 1
            if kind == b"nospare" and self._waiting > self._refused:
                self._refused += 1
            self._changed.notify_all()
        if kind == b"broken":
            self._fail("it could not make a run's namespaces: "
                       + escape(why.decode("utf-8", "replace")))

    def _spare(self, rid: bytes, chan: socket.socket) -> None:
        """A run made ahead: kept for the next run, unless enough wait already."""
        with self._lock:
            self._asked -= 1
            if self._why is None and (self._waiting or len(self._spares) < SPARE):
                self._spares.append((rid, chan))
                self._changed.notify()
                return
        chan.close()  # its init ends at the host's end

    def _more(self) -> None:
        """Ask the starter for a run made ahead (the lock held)."""
        self._asked += 1
        try:
            self._sock.send(pack([b"more"]))
        except OSError:
            self._asked -= 1

    def fail(self, why: str) -> None:
        """Take the box out of service: every later run raises :class:`WarmBoxDown`
        with ``why`` (a part of the session that its runs need has gone)."""
        self._fail(why)

    def _fail(self, why: str) -> None:
        """The box is unusable from now on: every run waiting is woken to say so."""
        with self._lock:
            if self._why is None:
                self._why = why
            spares, self._spares = self._spares, []
            self._changed.notify_all()
        for _, chan in spares:
            chan.close()
        self._ready.set()
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
        with self._lock:
            spares, self._spares = self._spares, []
        for _, chan in spares:
            chan.close()
        self._sock.close()
        self._theirs.close()
        os.close(self._nudge)

    # -- runs --------------------------------------------------------------------------

    def run(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, *,
            stdin: bytes = b"", timeout: float | None = None,
            cancel: threading.Event | None = None, output_cap: int = 1 << 20,
            pipes: type[Pipes] = Pipes) -> RunResult:
        """Run ``argv`` (a bare name is looked up on ``env``'s PATH in the box) in
        ``cwd`` with exactly ``env``, its pipes given to :attr:`stdio_owner` if any (the
        plan's field of that name says why); ``pipes`` reads the output
        (:func:`sandbox.process.supervisor.run` says how). The result has no plan. Raises
        :class:`SandboxUnavailable` when the box is gone or stops answering."""
        if not argv:
            raise ValueError("an empty command cannot run in the box")
        started = time.monotonic()
        if cancel is not None and cancel.is_set():
            return RunResult("cancelled", elapsed=0.0)
        got = self._take()
        if isinstance(got, int):
            # No process for it (the box's process bound, reached by another run): the
            # command could not start, as a fork on the host says.
            return RunResult("failed_to_start", error=os.strerror(got), errno=got,
                             elapsed=time.monotonic() - started)
        rid, chan = got
        self._touch(ended=False)
        streams: Pipes | None = None
        try:
            proc = ask(chan, argv, env, cwd, self.stdio_owner, reader=pipes)
            streams = pipes(proc, stdin, output_cap)
            streams.poller.register(chan.fileno(), select.POLLIN)
            deadline = None if timeout is None else started + timeout
            pumped = pump(streams, chan, deadline, cancel, started, start_limit=self.start_limit)
            if pumped is None:
                self._fail(f"its starter did not start a run within {self.start_limit:g} s")
                raise WarmBoxDown(f"the warm box is gone: {self._gone()}", FIX, self.stderr)
            outcome, reply = pumped
            if outcome != "exited" or reply is None:
                self._kill(rid)
            if reply is None and outcome == "exited":
                raise WarmBoxDown(f"the warm box is gone: {self._gone()}", FIX, self.stderr)
            streams.poller.unregister(chan.fileno())
            streams.close_stdin()
            # Every process of the run is gone: its pipes are at their end.
            streams.drain(0.25, time.monotonic() + 1.0)
            return result(outcome, reply, streams, started)
        finally:
            if streams is not None:
                streams.close()
            chan.close()
            self._touch(ended=True)

    def _gone(self) -> str:
        with self._lock:
            return self._why or "a run's init ended without saying how its command ended"

    def _take(self) -> tuple[bytes, socket.socket] | int:
        """A run made ahead (asked for now when none waits), or EAGAIN when the
        starter had no process for it. Raises :class:`WarmBoxDown`."""
        deadline = time.monotonic() + self.start_limit
        with self._lock:
            if not self._spares and self._why is None:
                self._more()
            self._waiting += 1
            try:
                while not self._spares and self._why is None:
                    if self._refused:
                        self._refused -= 1
                        return errno.EAGAIN
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                if self._spares and self._why is None:
                    return self._spares.pop(0)
                why = self._why
            finally:
                self._waiting -= 1
                if not self._waiting:
                    self._refused = 0
        if why is None:
            why = f"its starter did not start a run within {self.start_limit:g} s"
            self._fail(why)
        raise WarmBoxDown(f"the warm box is gone: {why}", FIX, self.stderr)

    def _touch(self, ended: bool) -> None:
        """A run started or ended: runs are made ahead again once the box is idle
        (:meth:`_due`); at once when none is left for the next run."""
        with self._lock:
            if self._why is not None:
                return
            if ended and not self._spares and not self._asked:
                self._more()
            was, self._refill_at = self._refill_at, time.monotonic() + IDLE
        if was is None:
            os.eventfd_write(self._nudge, 1)

    def _due(self) -> int | None:
        """For the keeper: ask for the runs made ahead that are due, and how long its
        next wait may be (milliseconds; None: until something comes)."""
        with self._lock:
            at = self._refill_at
            if at is None or self._why is not None:
                return None
            left = at - time.monotonic()
            if left > 0:
                return math.ceil(left * 1000)
            self._refill_at = None
            for _ in range(SPARE - len(self._spares) - self._asked):
                self._more()
        return None

    def _kill(self, rid: bytes) -> None:
        """End the run and wait until nothing of it lives; a starter that does not end
        it ends the box (and waits for that)."""
        ended = threading.Event()
        with self._lock:
            self._ended[rid] = ended
        try:
            try:
                self._sock.send(pack([b"kill", rid]))
            except OSError:
                self._fail("its starter is gone")
            if not (ended.wait(self.kill_limit) or self._down.is_set()):
                self._fail(f"its starter did not end a run within {self.kill_limit:g} s")
                self._down.wait(KILL_LIMIT)
        finally:
            with self._lock:
                del self._ended[rid]
