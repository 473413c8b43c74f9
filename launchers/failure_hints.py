"""Why a hook failed: the end of its stderr, and a hint where the cause can be told.

The seed's texts for a failure (the model's, the panel's, the warnings) never change.
This module adds beside them what the person fixing the hook needs: the last lines the
hook wrote on stderr (cut, control characters escaped, since a hook's output is not
trusted) and, where its stderr or its answer shows a cause this toolkit knows, a hint:

* a boxed hook's write refused in a folder the box hides or keeps read-only;
* exit 127, a program not found;
* a prompt hook that printed plain text, where context must be hook JSON.

Pure: nothing here runs or opens anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pathguard.records import NamedTuple

TAIL_LINES = 5
HINTS_LIMIT = 3  # write hints per failure: a hook's stderr could name any number of paths
LINE_LIMIT = 300

# The patterns are compiled at their first use (re keeps them): only a failed hook has
# its output read for hints.
_REFUSED = (r"Read-only file system|Permission denied|\[Errno (?:13|30)\]|EROFS|"
            r"EACCES")
_ABSOLUTE = r"(?<![\w.~])(/[^\s:'\"(),\[\]`]+)"

# uv's own errors: its cache (read-only in the box) and the network (none in the box).
_UV_CACHE = (r"Failed to initialize cache|\.cache/uv\S*`?: (?:Read-only file system|"
             r"Permission denied)")
_NETWORK = (r"Failed to fetch|Failed to download|dns error|failed to lookup address|"
            r"Temporary failure in name resolution|Network is unreachable|"
            r"error sending request|Could not connect|Connection refused")
_EXEC = r"(?i)execvp|could not start|can't execute|exec format"

CONTEXT_JSON = ('{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", '
                '"additionalContext": "..."}}')


class Failure(NamedTuple):
    """One failed run: the hook, the seed's failure kind, the end of its stderr (None
    when it wrote nothing) and the hints."""

    hook: str
    kind: str
    stderr: str | None
    hints: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"hook": self.hook, "kind": self.kind, "stderr": self.stderr,
                "hints": list(self.hints)}

    def lines(self) -> list[str]:
        """What ``harness-sandbox hook`` prints on stderr beside the seed's texts."""
        out: list[str] = []
        if self.stderr is not None:
            out.append(f"stderr of hook {self.hook} (last lines):")
            out += [f"  {line}" for line in self.stderr.split("\n")]
        out += [f"hint: {h}" for h in self.hints]
        return out


def _escape(text: str) -> str:
    """Control and other unprintable characters as escapes (a tab too)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def tail(stderr: bytes) -> str | None:
    """The last lines of a hook's stderr, each cut and escaped; None when it wrote only
    white space."""
    text = stderr[-64 * 1024:].decode("utf-8", errors="replace")
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return None
    out = []
    for line in lines[-TAIL_LINES:]:
        shown = _escape(line)
        out.append(shown[:LINE_LIMIT] + ("…" if len(shown) > LINE_LIMIT else ""))
    return "\n".join(out)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class Places(NamedTuple):
    """What the box lets a hook write, and what it hides (from the session's policy)."""

    writable: tuple[str, ...]
    hidden: tuple[str, ...]


def _write_hints(hook: str, text: str, places: Places) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        if (not re.search(_REFUSED, line) or re.search(_EXEC, line)
                or re.search(_UV_CACHE, line)):
            continue
        for path in re.findall(_ABSOLUTE, line):
            path = path.rstrip(".")
            hidden = next((h for h in places.hidden if _within(path, h)), None)
            if hidden is not None:
                what = f"{_escape(hidden)} is hidden in the box"
            elif not any(_within(path, w) for w in places.writable):
                what = f"{_escape(os.path.dirname(path) or '/')} is read-only in the box"
            else:
                continue
            hint = (f"{what}, so hook {hook} cannot write there. Set sandbox = false for "
                    "this hook to run it on the host, or have it write somewhere else.")
            if hint not in out:
                out.append(hint)
            if len(out) == HINTS_LIMIT:
                return out
    return out


def box_hints(hook: str, text: str) -> list[str]:
    """What the box took from a boxed hook, told from its stderr: uv's cache, the network."""
    out: list[str] = []
    if re.search(_UV_CACHE, text):
        out.append(f"hook {hook} failed because uv could not write its cache: the box keeps "
                   '~/.cache/uv read-only. Add [sandbox] writable = ["~/.cache/uv"] to your '
                   "config (the folder must exist: mkdir -p ~/.cache/uv), or set sandbox = "
                   "false for this hook to run it on the host.")
    if re.search(_NETWORK, text):
        out.append(f"hook {hook} failed because it needs the network, which the box does "
                   "not have. Fetch what it needs beforehand (uv sync, outside the box), "
                   "allow the host names with [sandbox] network = [\"...\"], or set sandbox = "
                   "false for this hook to run it on the host.")
    return out


_NOT_FOUND = r"(?i)not found|No such file or directory"


def _crlf_named(hook: str, text: str) -> list[str]:
    """A script the hook ran, named in its stderr as not found, that exists and has
    Windows line ends in its ``#!`` line (``sh: 1: /x/check.sh: not found``). The hook's
    stderr is not trusted: only the line end is looked at, nothing of the file shown."""
    from launchers.startable import crlf_reason

    out: list[str] = []
    for line in text.splitlines():
        if not re.search(_NOT_FOUND, line):
            continue
        for path in re.findall(_ABSOLUTE, line):
            reason = crlf_reason(path.rstrip("."))
            hint = f"hook {hook} ran a script that cannot start: {reason}"
            if reason is not None and hint not in out:
                out.append(hint)
            if len(out) == HINTS_LIMIT:
                return out
    return out


def start_hints(hook: str, kind: str, text: str, argv: Sequence[str]) -> list[str]:
    """Why a hook's program could not start, or an interpreter was not found, where a
    file shows it: the execute bit, a CRLF first line (its own, or that of a script it
    ran that its stderr calls not found)."""
    from launchers.startable import start_problem

    program = argv[0] if argv else ""
    if kind.startswith("could not start") or kind == "exited with code 127":
        problem = start_problem(hook, program) if program else None
        if problem is not None:
            return [problem.message]
        named = _crlf_named(hook, text)  # a script it ran, said to be missing
        if named:
            return named
    if "\r'" in text or "\r:" in text or "\\r" in text or "\r\"" in text:
        return [f"hook {hook}'s stderr names a program ending in a carriage return (\\r): "
                "a script saved with Windows line ends; convert it to Unix line ends "
                "(sed -i 's/\\r$//' FILE)."]
    return []


def describe(hook: str, kind: str, stderr: bytes, *, prompt: bool, boxed: bool,
             places: Places, argv: Sequence[str] = ()) -> Failure:
    """The stderr tail and the hints for one failure of kind ``kind``."""
    shown = tail(stderr)
    text = stderr[-64 * 1024:].decode("utf-8", errors="replace")
    hints: list[str] = []
    if boxed:
        hints += box_hints(hook, text)
        hints += _write_hints(hook, text, places)
    started = start_hints(hook, kind, text, argv)
    hints += started
    if kind == "exited with code 127" and not started:
        hints.append(f"exit code 127 means a program hook {hook} runs was not found; name "
                     "it by its absolute path (a host hook's PATH leaves out the folders the "
                     "agent can write).")
    if prompt and kind == "printed output that is not hook JSON":
        hints.append(f"hook {hook} printed text that is not hook JSON. A prompt hook adds "
                     f"context by printing {CONTEXT_JSON} (or prints nothing); plain text on "
                     "stdout is not read here.")
    return Failure(hook, kind, shown, tuple(hints))


def places_of(writable: Sequence[str], hidden: Sequence[str]) -> Places:
    """The box's places: its read-write folders and ``/tmp`` (the session's own), and
    the hidden paths."""
    return Places((*writable, "/tmp", "/dev"), tuple(hidden))


def block_hints(hook: str, stderr: bytes, *, boxed: bool) -> list[str]:
    """Warnings for a block whose reason is the box's doing, not the hook's decision:
    uv exits 2 on its own errors, and exit 2 is a block."""
    if not boxed:
        return []
    hints = box_hints(hook, stderr[-64 * 1024:].decode("utf-8", errors="replace"))
    return [f"⚠ hook {hook} exited 2 (a block), but its reason is an error of the box, not "
            f"a decision: {h}" for h in hints]
