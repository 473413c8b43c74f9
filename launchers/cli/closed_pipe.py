"""A reader that went away (``harness-sandbox doctor --json | head -1``) is no crash.

Python ignores SIGPIPE, so a write to a pipe nobody reads any more raises
:class:`BrokenPipeError` where a C program would be ended by the signal. Every command
ends then as such a program does, seen from the shell: nothing more is said (there is no
one to say it to on that stream, and a line on the other one would only be noise) and
the status is 141, 128 + SIGPIPE, what the shell reports for ``yes`` in ``yes | head -1``.
Not 0: a ``hook`` whose answer was not read has decided nothing anyone heard, and
``set -o pipefail`` must see that the output was cut short.

The process is not killed by a real SIGPIPE: :func:`launchers.cli.main.main` also runs
inside other programs (tests, an embedding), whose own handling of SIGPIPE is theirs.

Only our own stdout or stderr counts: a broken pipe to anything else (a hook's stdin)
is handled where it is written, and one that reaches the top is a bug, reported as one.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys

EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE


def reader_gone(fd: int) -> bool:
    """Whether ``fd`` is the write end of a pipe (or socket) whose reader closed it.

    poll() says POLLERR on a pipe's write end once every reader is gone, and POLLHUP on a
    socket whose peer shut its reading side; a terminal or a file says neither."""
    poller = select.poll()
    try:
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in events)


def closed_pipe() -> int | None:
    """When our stdout or stderr lost its reader: quiet both for good and give 141;
    else None (the broken pipe was someone else's)."""
    gone = [fd for fd in (1, 2) if reader_gone(fd)]
    if not gone:
        return None
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in gone:
            # Whatever is still buffered for it is flushed at exit, into nothing.
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def flush_stdout() -> None:
    """Write what is buffered for stdout now, so that a closed pipe is met here and not
    at the interpreter's exit (which prints "Exception ignored" and exits 120)."""
    stream = sys.stdout
    if stream is not None:
        with contextlib.suppress(ValueError):  # already closed by the command
            stream.flush()
