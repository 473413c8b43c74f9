"""The client side of the watchdog: one watchdog program per harness process.

:data:`watchdog` is started on the first watched run and told about each run with one
write on its pipe. If the harness dies, even by SIGKILL, the watchdog
(:mod:`sandbox.process.watchdog_main`) sees the pipe close and kills every running group
and every process carrying one of this harness's markers.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import threading

from sandbox.errors import SandboxError
from sandbox.platform import LINUX

# The watchdog program imports only the standard library and the markers module: -I
# drops the user site and PYTHON* variables, -S site-packages (Linux reads /proc), so
# the package's folder is put on its path by hand.
_BOOTSTRAP = (
    "import sys; sys.path[:0] = [sys.argv[1]]; "
    "from sandbox.process.watchdog_main import main; sys.exit(main(sys.argv[1:]))"
)
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WatchdogClient:
    """This process's watchdog: started once, told about each run with one write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._owner = -1
        self.instance = ""
        self._counter = itertools.count(1)

    def ensure(self) -> None:
        if self._proc is not None and self._owner == os.getpid():
            return
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                self._start()

    def _start(self) -> None:
        self.instance = os.urandom(8).hex()
        read_end, write_end = os.pipe()
        if LINUX:
            # Room for thousands of run events while the watchdog is busy sweeping.
            try:
                import fcntl

                fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)
            except (OSError, AttributeError):
                pass
        # psutil (site-packages) is needed only where there is no /proc.
        flags = ["-I", "-S"] if LINUX else ["-I"]
        argv = [sys.executable, *flags, "-c", _BOOTSTRAP, _PACKAGE_ROOT, self.instance,
                str(os.getpid())]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                cwd="/",
                env={"PATH": os.defpath},
                # Its own session: signals for the harness's terminal group miss it, and a
                # run's group kill can never reach it.
                start_new_session=True,
            )
        except OSError as err:
            os.close(write_end)
            raise SandboxError(f"the process watchdog could not start: {err.strerror}") from err
        finally:
            os.close(read_end)
        self._proc, self._fd, self._owner = proc, write_end, os.getpid()

    def marker(self) -> str:
        return f"{self.instance}.{next(self._counter)}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else -1

    def send(self, line: bytes) -> None:
        try:
            os.write(self._fd, line)
        except OSError:
            # The watchdog is gone (killed by someone): start another, which learns about
            # this run from here on.
            with self._lock:
                old = self._proc
                if old is not None:
                    old.wait()
                os.close(self._fd)
                self._start()
            os.write(self._fd, line)

    def forget_after_fork(self) -> None:
        # A forked child must not hold the pipe open: the watchdog would never see the
        # harness die. The child starts its own watchdog when it first runs something.
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._proc, self._fd, self._owner = None, -1, -1
        self._lock = threading.Lock()


watchdog = WatchdogClient()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=watchdog.forget_after_fork)


def watch_session(manifest: str) -> None:
    """Tell the watchdog (started now if need be) what a session made, listed in
    ``manifest``: if the harness dies, the watchdog removes it."""
    watchdog.ensure()
    watchdog.send(b"c " + os.fsencode(manifest) + b"\n")


def forget_session(manifest: str) -> None:
    """The session of ``manifest`` cleaned up after itself."""
    if watchdog.pid > 0 and watchdog._owner == os.getpid():
        watchdog.send(b"u " + os.fsencode(manifest) + b"\n")


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, or None before the first run."""
    pid = watchdog.pid
    return pid if pid > 0 else None
