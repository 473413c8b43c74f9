"""What the macOS box asks of the system once per session, through ctypes (no /proc).
(The user temp folder it writes is the policy's: :mod:`sandbox.policy.usertmp`.)

- A harness that already runs inside a Seatbelt sandbox cannot start ``sandbox-exec``
  (a sandboxed process may not apply another profile): every command would fail, found
  only mid-session. ``sandbox_check(getpid(), NULL, 0)`` tells at session start.

Everything here is importable on any platform; the ctypes calls are made only when a
macOS session asks.
"""

from __future__ import annotations

import ctypes
import os

from sandbox.errors import SandboxUnavailable

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

_LIBSYSTEM_SANDBOX = "/usr/lib/system/libsystem_sandbox.dylib"



def inside_seatbelt() -> bool:
    """True when this process already runs under a Seatbelt profile.

    Raises :class:`SandboxUnavailable` when the question cannot be asked: a box that
    may fail on every command is not started on a guess.
    """
    try:
        lib = ctypes.CDLL(_LIBSYSTEM_SANDBOX)
    except OSError:
        lib = ctypes.CDLL(None)
    try:
        fn = lib.sandbox_check
    except AttributeError as err:
        raise SandboxUnavailable(
            "cannot tell whether the harness already runs inside a macOS sandbox "
            "(sandbox_check is missing from libsystem_sandbox)",
            "report this with your macOS version; nothing was run") from err
    # int sandbox_check(pid_t pid, const char *operation, int type, ...): only the
    # fixed arguments are passed, so the variadic calling convention does not matter.
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    fn.restype = ctypes.c_int
    return bool(fn(os.getpid(), None, 0))


NESTED_DIAGNOSIS = ("the harness already runs inside a macOS sandbox (Seatbelt), where "
                    "sandbox-exec cannot apply the box's profile")
NESTED_FIX = ("start the harness outside any sandbox, or set [sandbox] enabled = false "
              "to run every hook on the host with no box")


def require_seatbelt(*, program: str = SANDBOX_EXEC, nested: bool | None = None) -> str:
    """``program`` (``/usr/bin/sandbox-exec``) once it is known to be there and usable
    from this process; else :class:`SandboxUnavailable`. Called once, at session start.
    ``nested`` is what :func:`inside_seatbelt` says, asked here when not given."""
    if not os.access(program, os.X_OK):
        raise SandboxUnavailable(f"{program} is missing or not executable",
                                 "the macOS box needs the system's sandbox-exec")
    if inside_seatbelt() if nested is None else nested:
        raise SandboxUnavailable(NESTED_DIAGNOSIS, NESTED_FIX)
    return program
