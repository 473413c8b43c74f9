"""The Unix-socket guard's supervisor behind the compiled launcher of a box per run.

``python3 -I -S guardmain.py [--chan FD] LISTENER CHILD NOTIFICATION N ROOT... M SOCKET...``

The launcher (``sandbox/linux/warm/guardinit.c``, the box's PID 1) answers itself the calls
that need no judgement; at the first that does, it becomes this, by an exec: it is
still the box's PID 1, outside the guard's filter, holding ``CAP_SYS_PTRACE`` alone
(kept through the exec as an ambient capability). ``LISTENER`` is the guard's listener,
``CHILD`` the command's pid, ``NOTIFICATION`` the call the launcher read and left
unanswered (a ``struct seccomp_notif`` in hex), ``N ROOT... M SOCKET...`` the box's
writable folders and the allowed sockets, as :mod:`sandbox.linux.warm.guarded` takes them.
From then on :class:`~sandbox.linux.warm.unixguard.Guard` answers every call, in a thread,
while this thread reaps every orphan of the run and exits as the command did (a signal
N as 128+N). With ``--chan``, it is a warm run's init (``sandbox/linux/warm/warmstart.c``)
and ``FD`` that run's channel to the host: it then also kills and reaps every other
process of the run before it says the run's end there (``exit status N``).

Where the guard cannot be had here, the listener is closed: every call still stopped,
and every later one, fails (``ENOSYS``), never through unchecked; the run goes on.

Standard library only, and nothing of the toolkit but its own folder's guard: it runs
inside the box as ``python3 -I -S``.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # not signal: its enum costs a box 5 ms
import os
import sys

PR_SET_DUMPABLE = 4


def _args(argv: list[str]) -> tuple[int, int, bytes, list[bytes], list[bytes]]:
    n = int(argv[3])
    m = int(argv[4 + n])
    if len(argv) != 5 + n + m:
        raise ValueError("usage: guardmain.py LISTENER CHILD NOTIFICATION N ROOT... "
                         "M SOCKET...")
    return (int(argv[0]), int(argv[1]), bytes.fromhex(argv[2]),
            [os.fsencode(a) for a in argv[4:4 + n]],
            [os.fsencode(a) for a in argv[5 + n:5 + n + m]])


def _serve(listener: int, first: bytes, roots: list[bytes], allowed: list[bytes]) -> None:
    """The guard on ``listener``, ``first`` its first call, in a thread of its own."""
    import _thread
    import ctypes

    # Not dumpable again (the exec made this process dumpable): the command can then
    # neither trace it nor take its listener, with or without the capability.
    if ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError("the supervisor could not be made not dumpable")
    from guardparts import CAP_SYS_PTRACE, drop_capabilities  # type: ignore[import-not-found]
    from unixguard import Guard  # type: ignore[import-not-found]

    guard = Guard(b"", roots, allowed)
    # The ambient and inheritable sets carried it through the exec; no further.
    drop_capabilities(guard.libc, keep=CAP_SYS_PTRACE)
    guard.listener = listener
    _thread.start_new_thread(guard.serve, (first,))


def main(argv: list[str]) -> int:
    # The box's PID 1 takes no signal from inside the box but one it handles: the
    # interpreter's own for SIGINT would let a command end the run's guard.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    chan = -1
    if argv[:1] == ["--chan"] and len(argv) > 1:
        chan, argv = int(argv[1]), argv[2:]
    listener, child, first, roots, allowed = _args(argv)
    try:
        _serve(listener, first, roots, allowed)
    except Exception as err:  # whatever went wrong, the calls are refused
        os.close(listener)
        os.write(2, f"harness-sandbox: the Unix-socket guard's supervisor could not start "
                 f"({err}): each call it would judge is refused\n".encode())
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    # Once the command has ended (main put this folder on the path).
    from inbox import end_all, exit_code, say  # type: ignore[import-not-found]

    code: int = exit_code(status)
    if chan >= 0:
        # A warm run's end: nothing else of it left, then its status to the host.
        import _socket

        end_all()
        say(_socket.socket(fileno=chan), b"exit", b"status", b"%d" % code)
    return code


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
