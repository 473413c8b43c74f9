"""A pseudo-terminal made for one run, when the run asks for one (``tty``).

The host opens a new pty for the run (:func:`open_pty`: ``openpty``, its window size
set with ``TIOCSWINSZ`` before anything starts, the slave given to the box's user where
the host's is not it), and the command gets its slave as stdin, stdout and stderr. The
box's launcher (``sandbox/linux/warm/guardinit.c``, ``warmstart.c``, ``guarded.py``,
``inbox.py``) makes the command the leader of a new session with that slave as its
controlling terminal (``setsid`` and ``TIOCSCTTY``, or a reopen of fd 0 where
``posix_spawn`` starts it), so ``/dev/tty`` opens, a Ctrl-C read by the terminal is
SIGINT to the command's foreground process group, and ``isatty`` is true on all three
streams. The terminal is the run's alone: never the harness's own, and the session's
filter still refuses ``TIOCSTI`` and ``TIOCLINUX`` on it (sandbox/linux/seccomp.py).

The host reads the master into the run's output (all of it is ``stdout``: stderr is
the same terminal), writes the run's stdin into it as typed keys (no end of file: a
terminal has none but ``^D`` on a line of its own), and closes it at the run's end,
after which nothing holds the pty. :func:`with_tty` turns any reader of a run's pipes
(:class:`~sandbox.process.pipes.Pipes` or a subclass) into one of the master.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import termios
from collections.abc import Mapping
from typing import Any

from pathguard.records import NamedTuple
from sandbox.process.pipes import READ_SIZE, Piped, Pipes

__all__ = ["TTY_LINKS", "TTY_VAR", "TtySize", "open_pty", "terminal", "tty_of", "with_tty"]

# Set for a box per run's launcher (in bwrap's environment, taken out of the command's):
# its command gets the run's terminal as its controlling terminal.
TTY_VAR = "HARNESS_SANDBOX_TTY"
# The warm run's request says so in its second field (sandbox/linux/warm/inbox.py).
TTY_FIELD = b"tty"
# A name in the Linux box's /dev for the run's terminal, which is not in the box's own
# /dev/pts (the host made it): ttyname() finds it there by its device and inode once the
# names it tries first fail, as tty(1) does bare. Each (target, link) leads to one of the
# command's standard streams, as /dev/stdin does (which ttyname() passes over by name).
TTY_LINKS = tuple((f"/proc/self/fd/{fd}", f"/dev/tty-of-the-run-{fd}") for fd in range(3))
# A stream key that no descriptor has: stderr is the terminal too, so it stays empty.
_NO_STDERR = -2

_openpty = os.openpty


class TtySize(NamedTuple):
    """The run's terminal: its window size in columns and rows, and ``TERM`` for the
    command (unless the run's environment names one)."""

    cols: int = 80
    rows: int = 24
    term: str = "xterm-256color"


def open_pty(size: TtySize, owner: tuple[int, int] | None = None) -> tuple[int, int]:
    """A new pty for one run: (master, slave), both close-on-exec, the window set to
    ``size`` and the slave given to ``owner`` when there is one (root's stand-in, as its
    pipes are: :func:`sandbox.process.pipes.owned_pipes`)."""
    if not (0 < size.cols < 1 << 16 and 0 < size.rows < 1 << 16):
        raise ValueError(f"a terminal of {size.cols}x{size.rows} cannot be made")
    master, slave = _openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size.rows, size.cols, 0, 0))
        if owner is not None:
            os.fchown(slave, *owner)
        # Non-blocking: a command that never reads its terminal must not stall the writer.
        os.set_blocking(master, False)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    return master, slave


def tty_of(pipes: type[Pipes]) -> TtySize | None:
    """The terminal a run's reader asks for (:func:`with_tty`), or None for pipes."""
    size = getattr(pipes, "tty", None)
    return size if isinstance(size, TtySize) else None


class _Terminal:
    """What :func:`with_tty` puts before a reader: the master as its one descriptor,
    read as stdout, written with the run's stdin."""

    tty: TtySize

    def __init__(self, proc: Piped, data: bytes, cap: int) -> None:
        master = proc.stdout
        assert master is not None
        self.poller = select.poll()
        self.cap = cap
        self.out_fd = master.fileno()
        self.err_fd = _NO_STDERR
        self.files = {self.out_fd: master}
        self.bufs = {self.out_fd: bytearray(), _NO_STDERR: bytearray()}
        self.capped = {self.out_fd: False, _NO_STDERR: False}
        self.in_fd = self.out_fd
        self.in_registered = False
        self.data = memoryview(data)
        self.pos = 0
        self.poller.register(self.out_fd, select.POLLIN)
        if data:
            self.write_stdin()

    def _watch(self) -> None:
        if self.out_fd in self.files:
            more = select.POLLOUT if self.in_fd >= 0 else 0
            self.poller.modify(self.out_fd, select.POLLIN | more)

    def close_stdin(self) -> None:
        """No more typing: what is not yet written is dropped (the master stays open
        for the output)."""
        self.in_fd = -1
        self._watch()

    def write_stdin(self) -> None:
        if self.in_fd < 0 or self.out_fd not in self.files:
            return
        try:
            while self.pos < len(self.data):
                self.pos += os.write(self.in_fd, self.data[self.pos:self.pos + READ_SIZE])
        except BlockingIOError:
            self._watch()  # the terminal's input is full; poll says when there is room
            return
        except OSError:
            pass  # EIO: no one holds the terminal any more
        self.close_stdin()

    def handle(self, fd: int, event: int) -> None:
        if fd != self.out_fd:
            return
        if event & select.POLLOUT and self.in_fd >= 0:
            self.write_stdin()
        if event & (select.POLLIN | select.POLLHUP | select.POLLERR) and fd in self.files:
            self.read(fd)  # type: ignore[attr-defined]  # the reader's, after this class

    def type_in(self, keys: bytes) -> None:
        """Type ``keys`` into the terminal now (after what is still to be written), as
        a person would: ``b"\\x03"`` is Ctrl-C."""
        self.data = memoryview(bytes(self.data[self.pos:]) + keys)
        self.pos = 0
        self.in_fd = self.out_fd
        self.write_stdin()


def with_tty(base: type[Pipes], size: TtySize) -> type[Pipes]:
    """``base`` reading a run's terminal of ``size`` instead of its pipes: the spawn
    points (:func:`sandbox.process.supervisor.run`, :func:`sandbox.linux.warm.channel.ask`)
    see :func:`tty_of` and make the pty; ``base`` keeps (and passes on) what is read,
    all of it as stdout."""
    if tty_of(base) is not None:
        base = base.__mro__[2]  # with_tty's class, then _Terminal: the reader below
    attrs: dict[str, Any] = {"tty": size}
    return type(f"Tty{base.__name__}", (_Terminal, base), attrs)


def terminal(tty: TtySize | bool, reader: type[Pipes], env_extra: Mapping[str, str] | None,
             boxed: bool) -> tuple[type[Pipes], dict[str, str]]:
    """``Session.run``'s ``tty``: its reader of a terminal of the size asked (True: 80
    by 24), and ``TERM`` in its environment unless given. Boxed runs only."""
    if not boxed:
        raise ValueError("a terminal is for boxed runs only: the host runner gives none")
    size = tty if isinstance(tty, TtySize) else TtySize()
    return with_tty(reader, size), {"TERM": size.term, **(env_extra or {})}
