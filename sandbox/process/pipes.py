"""The pipes of one run: stdin written, stdout and stderr read, on one poll object."""

from __future__ import annotations

import math
import os
import select
import time
from collections.abc import Callable
from typing import IO, Protocol

READ_SIZE = 1 << 16

# Called with the stream's name ("stdout" or "stderr") and each chunk as it is read.
OnOutput = Callable[[str, bytes], None]


class Piped(Protocol):
    """What :class:`Pipes` reads of a process: its three pipes (a ``Popen``'s)."""

    @property
    def stdin(self) -> IO[bytes] | None: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...


class Pipes:
    """stdin writer and stdout/stderr readers on one poll object, in the calling thread."""

    def __init__(
        self,
        proc: Piped,
        data: bytes,
        cap: int,
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.poller = select.poll()
        self.cap = cap
        self.out_fd = proc.stdout.fileno()
        self.err_fd = proc.stderr.fileno()
        self.files = {self.out_fd: proc.stdout, self.err_fd: proc.stderr}
        self.bufs = {self.out_fd: bytearray(), self.err_fd: bytearray()}
        self.capped = {self.out_fd: False, self.err_fd: False}
        for fd in (self.out_fd, self.err_fd):
            self.poller.register(fd, select.POLLIN)
        self.stdin = proc.stdin
        self.in_fd = proc.stdin.fileno()
        self.in_registered = False
        self.data = memoryview(data)
        self.pos = 0
        if not data:
            self.close_stdin()
        else:
            # Non-blocking: a hook that never reads its stdin must not stall this writer.
            os.set_blocking(self.in_fd, False)
            self.write_stdin()
            if self.in_fd >= 0:
                self.poller.register(self.in_fd, select.POLLOUT)
                self.in_registered = True

    def close_stdin(self) -> None:
        """End of file for the hook; any input not yet written is dropped."""
        if self.in_fd < 0:
            return
        if self.in_registered:
            self.poller.unregister(self.in_fd)
            self.in_registered = False
        self.stdin.close()
        self.in_fd = -1

    def write_stdin(self) -> None:
        try:
            while self.pos < len(self.data):
                self.pos += os.write(self.in_fd, self.data[self.pos : self.pos + READ_SIZE])
        except BlockingIOError:
            return  # the pipe is full; poll says when there is room
        except OSError:
            pass  # EPIPE: the hook closed its stdin, which is its right
        self.close_stdin()

    def read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            self.close_read(fd)
            return
        self.keep(fd, chunk)

    def keep(self, fd: int, chunk: bytes) -> None:
        """What the result holds: ``chunk`` up to the cap."""
        buf = self.bufs[fd]
        room = self.cap - len(buf)
        if len(chunk) > room:
            self.capped[fd] = True
            if room > 0:
                buf += chunk[:room]
        else:
            buf += chunk

    def close_read(self, fd: int) -> None:
        f = self.files.pop(fd, None)
        if f is not None:
            self.poller.unregister(fd)
            f.close()

    def handle(self, fd: int, event: int) -> None:
        if fd == self.in_fd:
            if event & select.POLLOUT:
                self.write_stdin()
            else:  # POLLERR: the hook closed its end of stdin
                self.close_stdin()
        elif fd in self.files:
            self.read(fd)

    def drain(self, idle: float, until: float) -> bool:
        """Read until both pipes end, nothing arrives for ``idle`` s, or ``until``.

        True when both pipes reached end of file.
        """
        while self.files:
            left = min(idle, until - time.monotonic())
            if left <= 0:
                break
            events = self.poller.poll(math.ceil(left * 1000))
            if not events:
                break
            for fd, event in events:
                self.handle(fd, event)
        return not self.files

    def close(self) -> None:
        self.close_stdin()
        for fd in list(self.files):
            self.close_read(fd)


def passing_on(on_output: OnOutput, base: type[Pipes] = Pipes) -> type[Pipes]:
    """``base``, which also gives every chunk read, whole and uncapped, to ``on_output``
    (on the thread that runs the command) as it comes; the result holds what ``base``
    keeps. An exception from ``on_output`` ends the run and is raised."""

    class PassingOn(base):  # type: ignore[valid-type,misc]
        def keep(self, fd: int, chunk: bytes) -> None:
            super().keep(fd, chunk)
            on_output("stdout" if fd == self.out_fd else "stderr", chunk)

    return PassingOn


def owned_pipes(owner: tuple[int, int] | None) -> list[tuple[int, int]]:
    """Three pipes (stdin's, stdout's, stderr's: read end, write end), each given to
    ``owner`` when there is one."""
    ends: list[tuple[int, int]] = []
    try:
        for _ in range(3):
            ends.append(os.pipe())
            if owner is not None:
                os.fchown(ends[-1][0], *owner)
    except BaseException:
        for r, w in ends:
            os.close(r)
            os.close(w)
        raise
    return ends
