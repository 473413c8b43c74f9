"""A crash inside the toolkit, said in one line instead of a traceback.

A bug must never look like a decision: ``hook`` exits 1 for "blocked", and Python's
exit status for an uncaught exception is 1 too. So every command ends a crash with the
status that means "stopped before deciding" (2; 125 for ``run``, whose 1 and 2 are the
command's own) and one line naming the error, where it happened, and where to report it.
"""

from __future__ import annotations

import os
import sys
import traceback

from launchers.bounded import one_line

# The status a crash gives, per command; every other command gives 2.
CRASH_STATUS: dict[str, int] = {"run": 125}
REPORT = ("This is a bug in harness-sandbox: please report it, with the command you ran, "
          "to the project's issue tracker.")
_PACKAGES = ("launchers", "sandbox", "pathguard")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def where(err: BaseException) -> str:
    """The deepest place in the package the error passed through, as ``pkg/mod.py:N``."""
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        rel = os.path.relpath(frame.filename, _ROOT)
        if rel.split(os.sep, 1)[0] in _PACKAGES:
            return f"{rel}:{frame.lineno}"
    if frames:
        return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}"
    return "unknown place"


def crash_line(command: str, err: BaseException) -> str:
    """The one line a crash prints."""
    what = one_line(str(err))[:300]
    name = type(err).__name__
    said = f"{name}: {what}" if what else name
    return f"harness-sandbox {command}: internal error: {said} (at {where(err)}). {REPORT}"


def report(command: str, err: BaseException) -> int:
    """Print the line on stderr; the command's crash status."""
    print(crash_line(command, err), file=sys.stderr)
    return CRASH_STATUS.get(command, 2)
