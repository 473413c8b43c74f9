"""Whether a box per run got as far as its command: told by the launcher in the box.

bwrap's own failures (a fresh ``/proc`` refused, a namespace refused, a bind it could not
make) end it with status 1 and a line on stderr, as a command's own failure may. They
are told apart here by mechanism, not by bwrap's texts: each box per run started by the
guard's launcher is given the write end of a pipe (its number in :data:`VAR`, which the
launcher takes out of the command's environment), and the launcher writes one byte to
it once the box is built and the guard armed, just before it starts the command, and
closes it (sandbox/linux/warm/guardinit.c, sandbox/linux/warm/guarded.py). A run whose pipe holds
no byte never reached its command: whatever it printed and whatever its status, the box
failed (:func:`reached`).
"""

from __future__ import annotations

import errno as _errno
import os
import threading

from sandbox.errors import SandboxUnavailable
from sandbox.plan import LaunchPlan, RunResult
from sandbox.text import escape

VAR = "HARNESS_SANDBOX_STARTED_FD"

# bwrap reports a command it could not start as one line on stderr and exit status 1.
_EXEC_PREFIX = "bwrap: execvp "
_STRERROR = {os.strerror(n): n for n in sorted(_errno.errorcode, reverse=True)}


def exec_failure(result: RunResult) -> RunResult | None:
    """The box's "could not start the command" (bwrap's exit 1 with its one execvp
    line) as ``failed_to_start`` with the OS error, else None."""
    if result.outcome != "exited" or result.returncode != 1:
        return None
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith(_EXEC_PREFIX):
        return None
    _, _, error = lines[0][len(_EXEC_PREFIX):].rpartition(": ")
    if error not in _STRERROR:
        return None
    return result._replace(outcome="failed_to_start", returncode=None, error=error,
                   errno=_STRERROR[error])


class Started:
    """The read ends of the runs' pipes, by the run's argv, until :meth:`reached` asks
    (or :meth:`close`, for plans given out and never read)."""

    def __init__(self) -> None:
        self._ends: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()

    def pipe(self) -> tuple[int, int]:
        """A new pipe: (read end, write end), both close-on-exec (the plan's
        ``pass_fds`` hands the write end to bwrap alone)."""
        return os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)

    def told(self, made: LaunchPlan, read_end: int) -> None:
        """``made`` is the run's final plan, whose launcher writes to ``read_end``'s
        pipe."""
        with self._lock:
            old = self._ends.pop(made.argv, None)
            self._ends[made.argv] = read_end
        if old is not None:
            os.close(old)

    def reached(self, made: LaunchPlan | None) -> bool | None:
        """Whether the run of ``made`` reached its command (None: not one this told)."""
        if made is None:
            return None
        with self._lock:
            fd = self._ends.pop(made.argv, None)
        if fd is None:
            return None
        try:
            return os.read(fd, 1) == b"\x01"
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            ends, self._ends = self._ends, {}
        for fd in ends.values():
            os.close(fd)


def with_var(made: LaunchPlan, command_len: int, write_end: int) -> LaunchPlan:
    """``made`` with :data:`VAR` set for its launcher (an option before ``--``) and the
    write end passed to bwrap, closed after the run."""
    cut = len(made.argv) - command_len - 1
    if made.argv[cut] != "--":
        raise ValueError("a bwrap plan ends with -- and its command")
    return made._replace(
        argv=(*made.argv[:cut], "--setenv", VAR, str(write_end), *made.argv[cut:]),
        pass_fds=(*made.pass_fds, write_end), run_fds=(*made.run_fds, write_end))


def not_built(result: RunResult) -> SandboxUnavailable:
    """The box's own failure, for a run that never reached its command: bwrap's first
    line (or its status), with the cause found and its fix."""
    from sandbox.linux.causes import diagnose_start_failure

    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if lines:
        said = lines[0]
    elif result.outcome == "signaled":
        said = f"bwrap was ended by signal {result.signal}"
    else:
        said = f"bwrap exited with status {result.returncode}"
    return diagnose_start_failure(said)


def read(result: RunResult, reached: bool | None) -> RunResult:
    """bwrap's own failures out of the command's result: bwrap that could not start at
    all, the execvp line (the command could not start: ``failed_to_start``), and a box
    that never ``reached`` its command (raised, with the cause and the fix, whatever
    bwrap printed and its status). A box with no launcher to tell (``reached`` None: a
    bare session's) is read by bwrap's own lines."""
    if result.outcome == "failed_to_start":
        program = result.plan.argv[0] if result.plan else "bwrap"
        raise SandboxUnavailable(f"{program} could not start: {result.error}",
                                 "install the bubblewrap package: "
                                 "sudo apt-get install bubblewrap")
    if reached is False and result.outcome in ("exited", "signaled"):
        _entered(result)
        _require_bind_fd(result)
        raise not_built(result)
    if result.outcome == "exited" and result.returncode == 1:
        failed = exec_failure(result)  # the launcher's, or bwrap's own, execvp line
        if failed is not None:
            return failed
        if reached:
            return result  # the command's own status, whatever it printed
        _entered(result)
        from sandbox.linux.causes import diagnose_start_failure, namespace_error

        error = namespace_error(result.stderr)
        if error is not None:
            raise diagnose_start_failure(error)
        _require_bind_fd(result)
    return result


def _entered(result: RunResult) -> None:
    """nsenter's own failure to enter root's stand-in (its one line, exit 1), raised
    with the cause: the box did not start."""
    if result.stderr.startswith(b"nsenter: "):
        from sandbox.linux.standin import FIX

        line = result.stderr.decode("utf-8", "replace").splitlines()[0]
        raise SandboxUnavailable(f"the box's stand-in for root could not be entered: "
                                 f"{escape(line)}", FIX)


def _require_bind_fd(result: RunResult) -> None:
    """A bwrap without ``--bind-fd`` (before 0.10, unless the distribution added it with
    its fix for CVE-2024-42472) cannot build a box that binds by descriptor."""
    if result.stderr.startswith(b"bwrap: Unknown option --bind-fd") or \
            result.stderr.startswith(b"bwrap: Unknown option --ro-bind-fd"):
        program = result.plan.argv[0] if result.plan else "bwrap"
        raise SandboxUnavailable(
            f"{program} lacks --bind-fd, which the box needs to bind git's files safely",
            "install bubblewrap 0.10 or later (or your distribution's update with the fix "
            "for CVE-2024-42472), or set [sandbox] protect = false")
