"""One warm run's channel to its init (:mod:`sandbox.linux.warm.client`): the request, with
the far ends of the run's three pipes; its output pumped until the init tells the run's
end; and the result that end makes."""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from sandbox.errors import WarmBoxDown as WarmBoxDown
from sandbox.linux.warm.inbox import MAX_MESSAGE, pack, unpack
from sandbox.plan import Outcome, RunResult
from sandbox.process.pipes import Pipes, owned_pipes
from sandbox.process.pty import TTY_FIELD, open_pty, tty_of
from sandbox.process.supervisor import poll_wait
from sandbox.text import escape

# A request longer than this goes in a memfd (a SOCK_SEQPACKET message must fit the
# socket's buffer whole).
BIG = 1 << 16
FIX = "the session's box must be opened again"


class Proc:
    """The host's ends of one run's pipes, as :class:`Pipes` reads a process's."""

    def __init__(self, stdin: int, stdout: int, stderr: int) -> None:
        self.stdin: IO[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = open(stdout, "rb", buffering=0)  # noqa: SIM115
        if stdin >= 0:
            self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115
        if stderr >= 0:
            self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115


def ask(chan: socket.socket, argv: Sequence[str], env: Mapping[str, str], cwd: str,
        owner: tuple[int, int] | None = None, *, reader: type[Pipes] = Pipes) -> Proc:
    """Send the run to its init with the far ends of its three pipes (given to
    ``owner``, the box's user where the host's is not it: see
    :func:`sandbox.linux.standin.stdio_owner`); the host's ends back. Where the
    run's ``reader`` asks for a terminal (:func:`sandbox.process.pty.tty_of`), the
    slave of a pty made for the run is all three, and the request says so (the
    command's process makes it its controlling terminal); the host keeps the master."""
    tty = tty_of(reader)
    if tty is not None:
        master, slave = open_pty(tty, owner)
        theirs, ours, kind = [slave, slave, slave], (-1, master, -1), TTY_FIELD
    else:
        (in_r, in_w), (out_r, out_w), (err_r, err_w) = owned_pipes(owner)
        theirs, ours, kind = [in_r, out_w, err_w], (in_w, out_r, err_r), b""
    msg = pack([b"run", kind, os.fsencode(cwd), b"%d" % len(argv),
                *(os.fsencode(a) for a in argv),
                *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())])
    try:
        if len(msg) > BIG:
            memfd = os.memfd_create("harness-sandbox-run", os.MFD_CLOEXEC)
            theirs.append(memfd)
            os.write(memfd, msg)
            os.lseek(memfd, 0, os.SEEK_SET)
            msg = pack([b"big", b""])
        socket.send_fds(chan, [msg], theirs)
    except OSError:
        # The init is gone before its request: what it said (its namespace could not
        # be made) comes as its answer, read by the pump.
        pass
    finally:
        for fd in dict.fromkeys(theirs):
            os.close(fd)
    return Proc(*ours)


def pump(streams: Pipes, chan: socket.socket, deadline: float | None,
         cancel: threading.Event | None, sent: float, *, start_limit: float
         ) -> tuple[Outcome, list[bytes] | None] | None:
    """Serve the pipes until the run's end is told (or its init is gone without a
    word: no reply), the deadline passes or cancel is set; None when the init has not
    said its command started within ``start_limit`` seconds of ``sent``."""
    begun = False
    fd = chan.fileno()
    while True:
        wait = poll_wait(deadline, cancel)
        if not begun:
            limit = sent + start_limit - time.monotonic()
            wait = limit if wait is None else min(wait, limit)
        for got, event in streams.poller.poll(
                None if wait is None else max(0, math.ceil(wait * 1000))):
            if got != fd:
                streams.handle(got, event)
                continue
            msg = recv(chan)
            if msg is None or msg[0] == b"exit":
                return "exited", msg
            begun = begun or msg[0] == b"started"
        if cancel is not None and cancel.is_set():
            return "cancelled", None
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return "timed_out", None
        if not begun and now - sent > start_limit:
            return None


def recv(chan: socket.socket) -> list[bytes] | None:
    """One message from a run's init, or None when it is gone without one.

    An init that ended with the host's request unread (its setup failed first) leaves
    ECONNRESET on the host's end, which the kernel reports before the messages queued
    ahead of it: the init's last word (``exit setup ...``) is read after it."""
    for _ in range(2):
        try:
            msg = chan.recv(MAX_MESSAGE)
        except ConnectionResetError:
            continue
        except OSError:
            return None
        return unpack(msg) if msg else None
    return None


def result(outcome: Outcome, reply: list[bytes] | None, streams: Pipes, started: float
           ) -> RunResult:
    """The run's result from its init's last word (``reply``) and its output."""
    kind, value = (reply[1], reply[2]) if reply is not None else (b"", b"")
    if kind == b"setup":
        raise WarmBoxDown("the warm box could not make a run's namespaces: "
                          + escape(value.decode("utf-8", "replace")), FIX)
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
