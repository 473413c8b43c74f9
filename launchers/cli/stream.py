"""``harness-sandbox run``'s output as it comes, as a shell would pass it on.

The supervisor reads a run's stdout and stderr into buffers capped at
``[sandbox] output_cap``: what a hook's answer and a ``--json`` document need. A command
run from a terminal or into a pipe needs the opposite: every byte, as it is
written, and the end of the run when its reader goes away (``run -- yes | head -1``).

So for the one run of a ``run`` command the pipes' reader passes each chunk on to our
own stdout or stderr, whole and unbuffered, and keeps nothing; only a stderr that
starts as bwrap's own lines do is kept for the backend to read, and printed at the end.
A write to a reader that went away raises :class:`BrokenPipeError` inside the
supervisor's loop, which ends the run and everything it started (as any exception there
does), and the command exits as a program killed by SIGPIPE
(:mod:`launchers.cli.closed_pipe`). A reader that is slow holds the command back, as a
pipe does (and ``--timeout`` is looked at once the write is done).

The streaming reader is handed to the run as its pipes' class (``Session.run(...,
pipes=StreamingPipes)``).
"""

from __future__ import annotations

import os
import select

from sandbox.process import pipes


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``, waiting for room when the descriptor is non-blocking.
    Raises BrokenPipeError when the reader is gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


# The end of what the one run of a ``run`` command wrote on stderr, passed on and not
# kept by the pipes: read for the hint of a failed run (sandbox/box/hints.py).
_tail = bytearray()
_TAIL = 16 * 1024  # sandbox.box.hints.TAIL, without importing it for every run


def stderr_tail() -> bytes:
    """The last bytes of the run's stderr passed on."""
    return bytes(_tail)


def _passed(chunk: bytes) -> None:
    _tail.extend(chunk)
    del _tail[:-_TAIL]
    write_all(2, chunk)


# bwrap says why it could not build the box or start the command on stderr, in lines
# that start so; the backend reads them from the run's result to tell its own failure
# from the command's. A stderr that starts so is kept for it, as for any run.
_BWRAP_SAYS = b"bwrap: "


class StreamingPipes(pipes.Pipes):
    """The run's pipes, their output passed on to fds 1 and 2 as it is read."""

    holding = True  # stderr's first bytes, until they cannot be bwrap's own line

    def read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, pipes.READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            self.close_read(fd)
        elif fd == self.out_fd:
            write_all(1, chunk)
        elif self.holding:
            self._hold(fd, chunk)
        else:
            _passed(chunk)

    def _hold(self, fd: int, chunk: bytes) -> None:
        """Keep stderr (capped, as the supervisor keeps it) while it may be bwrap's; pass
        what was kept on once it is not."""
        buf = self.bufs[fd]
        room = self.cap - len(buf)
        if len(chunk) > room:
            self.capped[fd] = True
        buf += chunk[:max(room, 0)]
        head = bytes(buf[:len(_BWRAP_SAYS)])
        if _BWRAP_SAYS.startswith(head):
            return  # bwrap's, or not yet known: the result carries it
        self.holding = False
        kept = bytes(buf)
        buf.clear()
        _passed(kept)


