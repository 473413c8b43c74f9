"""The resident starter inside a session's warm box: ``python3 -I -S helper.py FD``.

Where the guard's launcher is compiled, the box is started by its warm mode instead
(``sandbox/linux/warm/warmstart.c``), which keeps this file's messages and runs; this one
stays for the machines without a C compiler, and documents the contract.

Standard library only, and nothing of the toolkit but :mod:`sandbox.linux.warm.inbox` (from
its own folder): it runs inside the box, as the box's command, with ``CAP_SYS_ADMIN``
and ``CAP_SETPCAP`` in the box's user namespace and no system-call filter of its own.
``FD`` is its end of a ``SOCK_SEQPACKET`` pair whose other end the host holds
(:mod:`sandbox.linux.warm.client`). Each message is a list of fields
(:func:`~sandbox.linux.warm.inbox.pack`); the first names it.

From the host:

``setup SHM_SIZE READ_ONLY NULLED BPF NPROC GUARD ROOTS ALLOWED NET``
    Once, first. ``/dev/shm``'s size in bytes; the procfs entries bound read-only over
    each run's ``/proc`` and those covered by ``/dev/null`` (NUL-separated); the
    session's compiled system-call filter (BPF, 8 bytes an instruction); the box's
    process bound (``RLIMIT_NPROC``, set here before the first fork so that every run
    is under it; 0 for none); the Unix-socket guard's filter, the box's writable roots
    and the allowed sockets (NUL-separated; :mod:`sandbox.linux.warm.unixguard`), which each
    run arms (empty: none); ``net`` when each run gets a network namespace of its own.
    Answered ``ready``.
``more``
    Make one run ahead. Answered ``spare SID`` with one descriptor, the host's end of
    that run's own channel; or ``nospare ERRNO`` (no process for it: the box's
    process bound, reached by another run); or ``broken TEXT`` (no run's namespaces
    can be made here: the box must be made again).
``kill SID``
    SIGKILL to that run's init, which ends its whole PID namespace. Answered ``ended
    SID`` once the init is reaped, and so every process of the run is gone (at once
    when it was reaped already).

A run made ahead: a short-lived child makes a PID namespace and forks its first
process, the run's PID 1, which this process then adopts (it is the child subreaper).
PID 1 makes a mount and an IPC namespace of its own, mounts a fresh ``/proc`` with the
read-only belt and a fresh ``/dev/shm``, gives up every capability (effective,
permitted, inheritable, bounding, ambient), sets ``no_new_privs`` and loads the filter,
arms the Unix-socket guard (a supervisor thread, then the guard's filter), and waits
for its request, which the host sends on the run's channel, not through this process
(:func:`~sandbox.linux.warm.inbox.init` says the rest). So a run's start and end pass through
no process but its own init, and this one only makes runs and reaps them.

The host closing its end ends this process; a run's PID 1 dies with it
(``PR_SET_PDEATHSIG``), and with the box.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # not signal, socket: inbox.py
import _socket as socket
import errno
import os
import select
import sys

if __package__:  # imported by the host, for the tests
    from sandbox.linux.warm.inbox import (
        MAX_MESSAGE,
        Box,
        outer,
        pack,
        send_fds,
        unpack,
    )
else:  # the box's command: python3 -I -S puts no folder on the path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from inbox import (  # type: ignore[import-not-found,no-redef]
        MAX_MESSAGE,
        Box,
        outer,
        pack,
        send_fds,
        unpack,
    )

PR_SET_CHILD_SUBREAPER = 36


class Helper:
    """The loop: requests in, runs made ahead, the ends of those the host killed."""

    def __init__(self, sock: socket.socket, box: Box) -> None:
        self.sock = sock
        self.box = box
        self.poll = select.poll()
        self.making: dict[int, tuple[int, socket.socket]] = {}  # outer pid -> (report, chan)
        self.inits: dict[int, bytes] = {}       # a run's init -> its id
        self.by_id: dict[bytes, int] = {}       # and back
        self.killed: set[bytes] = set()         # runs whose end the host waits for
        self.next = 0
        self.broken: bytes | None = None        # why no run can be made
        box.call("prctl", box.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
        # Held open here only: each run's init reads its end to know this process lives.
        box.life, self.life_w = os.pipe()
        os.set_blocking(box.life, False)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.poll.register(self.sock.fileno(), select.POLLIN)
        self.poll.register(self.wake_r, select.POLLIN)

    def send(self, fields: list[bytes], fds: list[int] | None = None) -> None:
        if fds:
            send_fds(self.sock, pack(fields), fds)
        else:
            self.sock.send(pack(fields))

    def make(self) -> None:
        """Start making one run ahead (:func:`outer`; its end is :meth:`made`)."""
        if self.broken is not None:
            self.send([b"broken", self.broken])
            return
        err_r, err_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    outer(self.box, theirs.fileno(), err_w)
                finally:
                    os._exit(127)  # never back into this loop
        except OSError as err:
            os.close(err_r)
            ours.close()
            self.send([b"nospare", b"%d" % (err.errno or errno.EAGAIN)])
            return
        finally:
            os.close(err_w)
            theirs.close()
        self.making[pid] = (err_r, ours)

    def made(self, pid: int) -> None:
        """The child that made a run's namespace ended: the run's init (now this
        process's child) waits for its request, and the host gets its channel; or the
        namespace could not be made."""
        err_r, chan = self.making.pop(pid)
        try:
            os.set_blocking(err_r, False)
            lines = os.read(err_r, 4096).splitlines()
        except BlockingIOError:
            lines = []
        finally:
            os.close(err_r)
        init = [int(line[1:]) for line in lines if line.startswith(b"P")]
        if init:
            self.next += 1
            rid = b"%d" % self.next
            self.inits[init[0]] = rid
            self.by_id[rid] = init[0]
            try:
                self.send([b"spare", rid], [chan.fileno()])
            finally:
                chan.close()
            return
        chan.close()
        why = [line[1:] for line in lines if line.startswith(b"S")]
        if not why and any(line.startswith(b"A") for line in lines):
            # No process at the box's bound: the run asked for fails as a fork there
            # does, and the box stays whole.
            self.send([b"nospare", b"%d" % errno.EAGAIN])
            return
        self.broken = why[0] if why else b"a run's namespace could not be made"
        self.send([b"broken", self.broken])

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.making:
                self.made(pid)
            rid = self.inits.pop(pid, None)
            if rid is None:
                continue
            del self.by_id[rid]
            if rid in self.killed:
                self.killed.discard(rid)
                self.send([b"ended", rid])

    def request(self) -> bool:
        """One request from the host; False at the host's end."""
        msg = self.sock.recv(MAX_MESSAGE)
        if not msg:
            return False
        req = unpack(msg)
        if req[0] == b"more":
            self.make()
        elif req[0] == b"kill" and len(req) > 1:
            pid = self.by_id.get(req[1])
            if pid is None:
                self.send([b"ended", req[1]])
            else:
                # The init: its end kills the rest of its namespace before it is reaped.
                self.killed.add(req[1])
                try:  # noqa: SIM105 (contextlib costs the box's start an import)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return True

    def serve(self) -> None:
        sock = self.sock.fileno()
        while True:
            for fd, _ in self.poll.poll():
                if fd == self.wake_r:
                    os.read(fd, 4096)
                    self.reap()
                elif fd == sock and not self.request():
                    return


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
    try:  # noqa: SIM105 (contextlib costs the box's start an import)
        helper.serve()
    except (ConnectionError, BrokenPipeError):
        pass
    for pid in (*helper.inits, *helper.making):
        os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    # Without the interpreter's teardown (milliseconds of freeing what the box's end
    # frees anyway): the session's end waits for this process, and the next session's
    # start shares the machine with it. What the starter says goes out line by line.
    os._exit(main(sys.argv))
