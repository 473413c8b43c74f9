"""The launcher of a box per run: its command started under the Unix-socket guard.

``python3 -I -S guarded.py PROGRAM N ROOT... M SOCKET... [--setenv NAME=VALUE]... --
CMD [ARG...]``.

bwrap starts this as the box's command (under the session's filter, which bwrap loads),
as the box's PID 1 (``--as-pid-1``): no process of the box but this one is outside the
guard's filter. It arms the guard (:mod:`sandbox.linux.warm.unixguard`: its supervisor thread,
then the guard's filter, ``PROGRAM`` in hex), starts ``CMD`` with the environment bwrap
gave it and the ``--setenv`` variables (the dynamic linker's, ``LD_PRELOAD``: given to
this interpreter, they would be loaded into it before the guard is armed), reaps
every orphan of the run, and exits as the command did (a signal N as 128+N, as bwrap
says it). It is not dumpable, so the command can neither trace it nor
take its listener. A command that cannot be executed is said as bwrap says it
(``bwrap: execvp CMD: REASON``, status 1). Once the guard is armed, before the command
starts, it writes one byte to the descriptor ``HARNESS_SANDBOX_STARTED_FD`` names and
closes it, the variable kept from the command: the host's sign that the box was built
(sandbox/linux/started.py).

Standard library only, and nothing of the toolkit but its own folder's guard: it runs
inside the box as ``python3 -I -S``.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # not signal: its enum costs a box 5 ms
import errno
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from guardparts import drop_capabilities  # type: ignore[import-not-found]
from unixguard import Guard  # type: ignore[import-not-found]

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
# What Python ignores at its start and an exec would have reset.
_DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ)


def _args(argv: list[str]) -> tuple[bytes, list[bytes], list[bytes], list[bytes],
                                   dict[bytes, bytes]]:
    n = int(argv[1])
    m = int(argv[2 + n])
    rest = argv[3 + n + m:]
    setenv = {}
    while rest[:1] == ["--setenv"] and len(rest) > 1:
        name, _, value = os.fsencode(rest[1]).partition(b"=")
        setenv[name] = value
        rest = rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        raise ValueError("usage: guarded.py PROGRAM N ROOT... M SOCKET... "
                         "[--setenv NAME=VALUE]... -- CMD [ARG...]")
    return (bytes.fromhex(argv[0]), [os.fsencode(a) for a in argv[2:2 + n]],
            [os.fsencode(a) for a in argv[3 + n:3 + n + m]], [os.fsencode(a) for a in rest[1:]],
            setenv)


def _environment() -> dict[bytes, bytes]:
    """The environment bwrap gave, as given (Python may have set ``LC_CTYPE`` in its own
    copy at its start)."""
    with open("/proc/self/environ", "rb") as f:
        items = f.read().split(b"\0")
    return dict(item.split(b"=", 1) for item in items if b"=" in item)


def _tell_started(fd: int | None) -> None:
    """The box is built and the guard armed: the host's pipe told, once, and closed."""
    if fd is not None:
        try:
            os.write(fd, b"\x01")
        finally:
            os.close(fd)


def _spawn(argv: list[bytes], env: dict[bytes, bytes], tty: bool = False) -> int:
    """As ``execvp`` would: a bare name looked up on the command's ``PATH``, a file
    without ``#!`` run by ``/bin/sh``. With ``tty``, the leader of a new session whose
    controlling terminal is its stdin, the run's terminal (inbox.py's ``TTY_OPEN``)."""
    from inbox import TTY_OPEN  # type: ignore[import-not-found]

    more = {"setsid": True, "file_actions": TTY_OPEN} if tty else {}
    if b"PATH" in env:
        os.environb[b"PATH"] = env[b"PATH"]
    else:
        os.environb.pop(b"PATH", None)
    try:
        return os.posix_spawnp(argv[0], argv, env, setsigdef=_DEFAULTS, **more)
    except OSError as err:
        if err.errno != errno.ENOEXEC:
            raise
        # The file that was found, as execvp gives it to sh (a bare name would be
        # looked for in the working folder).
        return os.posix_spawn(b"/bin/sh", [b"/bin/sh", _found(argv[0], env), *argv[1:]],
                              env, setsigdef=_DEFAULTS, **more)


def _found(name: bytes, env: dict[bytes, bytes]) -> bytes:
    """Where execvp finds ``name``: itself when it has a slash, else the first
    executable file of that name on ``PATH`` (glibc's default without one)."""
    if b"/" in name:
        return name
    for folder in env.get(b"PATH", b"/bin:/usr/bin").split(b":"):
        path = os.path.join(folder or b".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name


def main(argv: list[str]) -> int:
    # PID 1 takes no signal from inside the box but one it handles: the interpreter's
    # own for SIGINT (KeyboardInterrupt) would let the command end it, its guard with
    # it. At the default the kernel drops it. (Nothing of the box runs before this.)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    bpf, roots, allowed, command, setenv = _args(argv)
    guard = Guard(bpf, roots, allowed)
    # Read while this process is dumpable: after, its /proc files are root's, which a
    # plain user's box does not map.
    env = _environment()
    told = env.pop(b"HARNESS_SANDBOX_STARTED_FD", None)
    started = int(told) if told is not None and told.isdigit() else None
    tty = env.pop(b"HARNESS_SANDBOX_TTY", None) is not None
    env.update(setenv)  # the dynamic linker's variables: the command's, not this one's
    for option in (PR_SET_DUMPABLE, 0), (PR_SET_CHILD_SUBREAPER, 1), (PR_SET_NO_NEW_PRIVS, 1):
        if guard.libc.prctl(option[0], option[1], 0, 0, 0) != 0:
            os.write(2, b"bwrap: the Unix-socket guard could not be set up\n")
            return 1
    failed: OSError | None = None
    child = 0
    try:
        # bwrap gave the launcher two capabilities for its guard; the command gets none
        # (but the owners' a box of root's stand-in holds: guardparts.OWNER_CAPS).
        guard.arm(drop=lambda: drop_capabilities(guard.libc, owners=True))
    except OSError as err:
        # Never the command unguarded. No thread at the box's process bound (EAGAIN)
        # reads as the command's own start refused there, below.
        if err.errno != errno.EAGAIN:
            os.write(2, f"harness-sandbox: the Unix-socket guard could not be armed: {err}\n"
                     .encode())
            return 125
        failed = err
        _tell_started(started)
    else:
        _tell_started(started)
        try:
            child = _spawn(command, env, tty)
        except OSError as err:
            failed = err
    if failed is not None:
        os.write(2, f"bwrap: execvp {os.fsdecode(command[0])}: "
                 f"{os.strerror(failed.errno or 0)}\n".encode("utf-8", "surrogateescape"))
        return 1
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
