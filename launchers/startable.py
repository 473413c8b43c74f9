"""Whether a hook's program can start: checked at ``audit`` (and before ``import
--write``), so a hook that would fail with "could not start" on every call is refused
before a session, with the fix.

* ``command[0]`` must be executable by the user who runs it (the box runs it as the
  same user): else the ``chmod`` that fixes it.
* A script's ``#!`` line must not end in a carriage return (a file saved with Windows
  line ends): the kernel would look for ``/bin/sh\\r``, and report a file that exists as
  "No such file or directory".
* A ``#!`` interpreter named by absolute path must exist.

Nothing here runs anything; the script's first line is read, at most 256 bytes.
"""

from __future__ import annotations

import os
import shlex
import stat

from pathguard.argv import Refusal

_HEAD = 256


def shebang(path: str) -> bytes | None:
    """The ``#!`` line of ``path`` (without its newline), or None. Only a regular file
    is read (opened without waiting, so a FIFO put there meanwhile cannot stall us)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, _HEAD)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    return head.split(b"\n", 1)[0]


def crlf_reason(path: str) -> str | None:
    """That the file at ``path`` has Windows line ends in its ``#!`` line, so starting it
    fails with "No such file or directory"; None else. Nothing of the file is shown: it
    may be the agent's, or lead to one the box hides."""
    if not (shebang(path) or b"").endswith(b"\r"):
        return None
    return (f"{_show(path)} exists but has Windows line ends: its #! line asks for an "
            "interpreter whose name ends in a carriage return (\\r), which is not found; "
            f"{crlf_fix(path)}.")


def _show(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def crlf_fix(path: str) -> str:
    return f"convert it to Unix line ends: sed -i 's/\\r$//' {shlex.quote(path)}"


def start_problem(name: str, program: str) -> Refusal | None:
    """Why hook ``name``'s ``program`` (absolute, as the guard resolved it) cannot
    start, as a refusal; None when it can (or does not exist: the guard says that)."""
    reason = start_reason(program)
    if reason is None:
        return None
    return Refusal(program, f"hook {name}: {reason}", "not-executable")


def start_reason(program: str) -> str | None:
    """Why ``program`` (absolute) cannot start, as a sentence naming it; None when it
    can, or does not exist."""
    if not os.path.isabs(program) or not os.path.exists(program):
        return None
    shown = _show(program)
    if os.path.isdir(program):
        return f"{shown} is a folder, not a program."
    if not os.access(program, os.X_OK):
        return (f"{shown} is not executable by you (uid {os.getuid()}), so it cannot start. "
                f"Run chmod +x {shlex.quote(program)}, or name its interpreter first "
                f'(["/bin/sh", "{shown}"]).')
    return interpreter_reason(program)


def interpreter_reason(program: str) -> str | None:
    """Why the ``#!`` line of ``program`` (absolute, existing) cannot start it: Windows
    line ends, or an interpreter that is not there. The kernel says only "No such file
    or directory" for both, of a file that exists."""
    line = shebang(program)
    if line is None:
        return None
    shown = _show(program)
    if line.endswith(b"\r"):
        interp = _show(line[2:].decode("utf-8", "replace").strip(" "))
        return (f"{shown} has Windows line ends: its first line asks for \"{interp}\", "
                f"which does not exist, so it cannot start; {crlf_fix(program)}.")
    words = line[2:].decode("utf-8", "replace").split()
    if words and words[0].startswith("/") and not os.path.exists(words[0]):
        return (f"{shown} asks for the interpreter {_show(words[0])} in its first line, "
                "which does not exist here, so it cannot start.")
    return None
