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

from pathguard.argv import Refusal

_HEAD = 256


def shebang(path: str) -> bytes | None:
    """The ``#!`` line of ``path`` (without its newline), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    return head.split(b"\n", 1)[0]


def _show(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def crlf_fix(path: str) -> str:
    return f"convert it to Unix line ends: sed -i 's/\\r$//' {shlex.quote(path)}"


def start_problem(name: str, program: str) -> Refusal | None:
    """Why hook ``name``'s ``program`` (absolute, as the guard resolved it) cannot
    start, as a refusal; None when it can (or does not exist: the guard says that)."""
    if not os.path.isabs(program) or not os.path.exists(program):
        return None
    shown = _show(program)
    if os.path.isdir(program):
        return Refusal(program, f"hook {name}: {shown} is a folder, not a program.",
                       "not-executable")
    if not os.access(program, os.X_OK):
        return Refusal(program, f"hook {name}: {shown} is not executable by you (uid "
                       f"{os.getuid()}), so it cannot start. Run chmod +x "
                       f"{shlex.quote(program)}, or name its interpreter first "
                       f'(["/bin/sh", "{shown}"]).', "not-executable")
    line = shebang(program)
    if line is None:
        return None
    if line.endswith(b"\r"):
        interp = _show(line[2:].decode("utf-8", "replace").strip(" "))
        return Refusal(program, f"hook {name}: {shown} has Windows line ends: its first "
                       f'line asks for "{interp}", which does not exist, so it cannot '
                       f"start; {crlf_fix(program)}.", "not-executable")
    words = line[2:].decode("utf-8", "replace").split()
    if words and words[0].startswith("/") and not os.path.exists(words[0]):
        return Refusal(program, f"hook {name}: {shown} asks for the interpreter "
                       f"{_show(words[0])} in its first line, which does not exist here, "
                       "so it cannot start.", "not-executable")
    return None
