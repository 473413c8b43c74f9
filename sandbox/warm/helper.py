"""The resident starter inside a session's warm box: ``python3 -I -S helper.py FD``.

Standard library only, and nothing of the toolkit but :mod:`sandbox.warm.inbox` (from
its own folder): it runs inside the box, as the box's command, with ``CAP_SYS_ADMIN``
and ``CAP_SETPCAP`` in the box's user namespace and no system-call filter of its own.
``FD`` is its end of a ``SOCK_SEQPACKET`` pair whose other end the host holds
(:mod:`sandbox.warm.client`). Each message is a list of fields
(:func:`~sandbox.warm.inbox.pack`); the first names it.

From the host:

``setup SHM_SIZE READ_ONLY NULLED BPF NPROC GUARD ROOTS ALLOWED NET``
    Once, first. ``/dev/shm``'s size in bytes; the procfs entries bound read-only over
    each run's ``/proc`` and those covered by ``/dev/null`` (NUL-separated); the
    session's compiled system-call filter (BPF, 8 bytes an instruction); the box's
    process bound (``RLIMIT_NPROC``, set here before the first fork so that every run
    is under it; 0 for none); the Unix-socket guard's filter, the box's writable roots
    and the allowed sockets (NUL-separated; :mod:`sandbox.warm.unixguard`), which each
    run arms (empty: none); ``net`` when each run gets a network namespace of its own.
    Answered ``ready``.
``run ID CWD ARGC ARGV... ENV...``
    With three descriptors (stdin, stdout, stderr), or ``big ID`` with a fourth, a
    memfd holding the ``run`` message. Answered ``started ID`` once the command is
    executing, then ``exit ID status N`` (a signal N is 128+N, as bwrap's init says it),
    ``exit ID exec ERRNO`` (the command could not be executed) or ``exit ID setup
    TEXT`` (the run's box could not be made).
``kill ID``
    SIGKILL to the run's init, which ends its whole PID namespace.

Each run is made ahead of its request (:data:`SPARE` of them wait): a short-lived
child makes a PID namespace and forks its first process, the run's PID 1, which this
process then adopts (it is the child subreaper). PID 1 makes a mount and an IPC
namespace of its own, mounts a fresh ``/proc`` with the read-only belt and a fresh
``/dev/shm``, gives up every capability (effective, permitted, inheritable, bounding,
ambient), sets ``no_new_privs`` and loads the filter, arms the Unix-socket guard (a
supervisor thread, then the guard's filter), and waits for its request. Then
it goes to ``CWD``, takes the three descriptors (and no other), starts ``ARGV`` with
exactly ``ENV`` (a bare name looked up on that ``PATH``) in a session of its own, and
reaps everything until the command ends; it exits with the command's status, and the
kernel kills whatever else is left in the namespace (a ``setsid`` daemon, a double
fork).

The host closing its end ends this process; a run's PID 1 dies with it
(``PR_SET_PDEATHSIG``), and with the box.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import socket
import sys
import time

if __package__:  # imported by the host, for SPARE and the tests
    from sandbox.warm.inbox import (
        MAX_MESSAGE,
        Box,
        exit_code,
        outer,
        pack,
        unpack,
    )
else:  # the box's command: python3 -I -S puts no folder on the path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from inbox import (  # type: ignore[import-not-found,no-redef]
        MAX_MESSAGE,
        Box,
        exit_code,
        outer,
        pack,
        unpack,
    )

PR_SET_CHILD_SUBREAPER = 36
# Runs made ahead, up to their request: a run's namespaces, mounts, forks and dropped
# privileges are made while the one before it runs, off its start.
SPARE = 2
# After a run could not be made ahead for want of a process (the box's process bound,
# reached by another run), the next is tried this much later, not at once in a loop.
AGAIN = 0.05


class Helper:
    """The loop: requests in, runs started, their ends reported."""

    def __init__(self, sock: socket.socket, box: Box) -> None:
        self.sock = sock
        self.box = box
        self.poll = select.poll()
        self.by_id: dict[bytes, int] = {}                # run id -> its init's pid
        self.by_pid: dict[int, tuple[bytes, int]] = {}   # init pid -> (id, error pipe)
        self.open_err: dict[int, bytes] = {}             # error pipes not yet at an end
        self.failed: dict[bytes, bytes] = {}             # run id -> why it did not start
        self.spare: dict[int, tuple[int, socket.socket]] = {}  # runs made ahead
        self.making: dict[int, tuple[int, socket.socket]] = {}  # and being made
        self.broken: bytes | None = None                 # why no run can be made
        self.later = 0.0                                 # no run made ahead before this
        box.call("prctl", box.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.poll.register(self.sock.fileno(), select.POLLIN)
        self.poll.register(self.wake_r, select.POLLIN)

    def send(self, fields: list[bytes]) -> None:
        self.sock.send(pack(fields))

    def prepare(self) -> bool:
        """Start making one run ahead (:func:`outer`; its end is :meth:`made`); False
        when no process could be made (the box's process bound)."""
        err_r, err_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    outer(self.box, theirs.fileno(), err_w)
                finally:
                    os._exit(127)  # never back into this loop
        except OSError:
            os.close(err_r)
            ours.close()
            return False
        finally:
            os.close(err_w)
            theirs.close()
        os.set_blocking(err_r, False)
        self.making[pid] = (err_r, ours)
        return True

    def made(self, pid: int) -> None:
        """The child that made a run's namespace ended: the run's init (now this
        process's child) waits for its request; or the namespace could not be made."""
        err_r, chan = self.making.pop(pid)
        try:
            lines = os.read(err_r, 4096).splitlines()
        except BlockingIOError:
            lines = []
        init = [int(line[1:]) for line in lines if line.startswith(b"P")]
        if init:
            self.spare[init[0]] = (err_r, chan)
            return
        os.close(err_r)
        chan.close()
        why = [line[1:] for line in lines if line.startswith(b"S")]
        if not why and any(line.startswith(b"A") for line in lines):
            # No process at the box's bound: a run asked for now fails as a fork there
            # does (ready() finds no spare), and the box stays whole.
            self.later = time.monotonic() + AGAIN
            return
        self.broken = why[0] if why else b"a run's namespace could not be made"

    def ready(self) -> bool:
        """A run made ahead, waiting for it (or making it) if need be."""
        if not self.spare and not self.making and self.broken is None:
            self.prepare()
        while not self.spare and self.making:
            pid = next(iter(self.making))
            os.waitpid(pid, 0)
            self.made(pid)
        return bool(self.spare)

    def start(self, rid: bytes, msg: bytes, fds: list[int]) -> None:
        """Hand the request to a run made ahead (or made now)."""
        try:
            if not self.ready():
                if self.broken is not None:
                    self.send([b"exit", rid, b"setup", self.broken])
                else:
                    # No process for it (the box's process bound, reached by another
                    # run): the command could not start, as a fork on the host says.
                    self.send([b"exit", rid, b"exec", b"%d" % errno.EAGAIN])
                return
            pid = next(iter(self.spare))
            err_r, chan = self.spare.pop(pid)
            # A run that died before its request says why when it is reaped.
            with contextlib.suppress(OSError):
                socket.send_fds(chan, [msg], fds)
            chan.close()
        finally:
            for fd in fds:
                os.close(fd)
        self.by_id[rid] = pid
        self.by_pid[pid] = (rid, err_r)
        self.open_err[err_r] = rid
        self.poll.register(err_r, select.POLLIN)

    def error_pipe(self, fd: int, final: bool = False) -> None:
        """What a run's PID 1 says before the command runs: why it did not start (``E``
        errno, ``S`` text); at the end of file, when nothing went wrong, the command is
        executing."""
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            if not final:
                return  # a stale event of an earlier pipe of this number
            data = b""  # a writer killed with its run may not be gone quite yet
        rid = self.open_err[fd]
        if data:
            self.failed.setdefault(rid, data.splitlines()[0])
            return
        del self.open_err[fd]
        self.poll.unregister(fd)
        os.close(fd)
        if rid not in self.failed:
            self.send([b"started", rid])

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.making:
                self.made(pid)
            elif pid in self.spare:
                self.spare_ended(pid)
            if pid not in self.by_pid:
                continue
            rid, err_r = self.by_pid.pop(pid)
            del self.by_id[rid]
            # Every writer is gone: the reads cannot wait.
            while self.open_err.get(err_r) == rid:
                self.error_pipe(err_r, final=True)
            self.send(self.ended(rid, status))

    def spare_ended(self, pid: int) -> None:
        """A run made ahead ended before its request: its namespaces could not be made.
        Every later run is refused with the reason (the box must be made again)."""
        err_r, chan = self.spare.pop(pid)
        chan.close()
        try:
            data = os.read(err_r, 4096)
        except BlockingIOError:
            data = b""
        os.close(err_r)
        why = [line[1:] for line in data.splitlines() if line.startswith(b"S")]
        self.broken = why[0] if why else b"a run made ahead ended before its request"

    def ended(self, rid: bytes, status: int) -> list[bytes]:
        """The ``exit`` message of a run whose init was reaped."""
        data = self.failed.pop(rid, b"")
        if data.startswith(b"E"):
            return [b"exit", rid, b"exec", data[1:]]
        if data.startswith(b"S"):
            return [b"exit", rid, b"setup", data[1:]]
        return [b"exit", rid, b"status", b"%d" % exit_code(status)]

    def request(self) -> bool:
        """One request from the host; False at the host's end."""
        msg, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 4)
        if not msg:
            return False
        req = unpack(msg)
        want = 4 if req[0] == b"big" else 3
        if req[0] in (b"run", b"big") and len(fds) == want:
            self.start(req[1], msg, fds)
            return True
        for fd in fds:
            os.close(fd)
        if req[0] == b"kill" and req[1] in self.by_id:
            # The init: its end kills the rest of its namespace before it is reaped.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.by_id[req[1]], signal.SIGKILL)
        return True

    def serve(self) -> None:
        sock = self.sock.fileno()
        while True:
            # Runs are made ahead only when nothing waits: a run's end is said first.
            events = self.poll.poll(0)
            wait = None
            if not events and len(self.spare) + len(self.making) < SPARE \
                    and self.broken is None:
                left = self.later - time.monotonic()
                if left <= 0 and self.prepare():
                    continue
                wait = max(1, int(left * 1000)) if left > 0 else None
            for fd, _ in events or self.poll.poll(wait):
                if fd == self.wake_r:
                    os.read(fd, 4096)
                    self.reap()
                elif fd == sock:
                    if not self.request():
                        return
                elif fd in self.open_err:
                    self.error_pipe(fd)


def main(argv: list[str]) -> int:
    # 0, 1 and 2 open, so that no descriptor of a run gets one of their numbers (the
    # command's dup2 onto them would then close another of its own).
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    sock = socket.socket(fileno=int(argv[1]))
    msg = sock.recv(MAX_MESSAGE)
    fields = unpack(msg)
    if not fields or fields[0] != b"setup":
        return 2
    helper = Helper(sock, Box(fields))
    helper.send([b"ready"])
    with contextlib.suppress(ConnectionError, BrokenPipeError):
        helper.serve()
    for pid in (*helper.by_pid, *helper.spare, *helper.making):
        os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
