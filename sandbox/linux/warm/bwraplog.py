"""What the warm box's bwrap and starter write to their stderr: the first
:data:`STDERR_KEPT` bytes kept (their own errors, such as a namespace refused), read to
the end when the box ends, and said in one line."""

from __future__ import annotations

import os
import select
import subprocess
import time

from sandbox.text import escape

STDERR_KEPT = 1 << 14


def keep(kept: bytearray, data: bytes) -> None:
    """``data`` added to ``kept``, up to :data:`STDERR_KEPT` bytes in all."""
    kept += data[:max(0, STDERR_KEPT - len(kept))]


def last_words(proc: subprocess.Popen[bytes], kept: bytearray) -> None:
    """What bwrap still writes as it ends (its namespace error comes as the box's end,
    perhaps after the starter's socket closed), for the diagnosis; a second at most."""
    assert proc.stderr is not None
    err = proc.stderr.fileno()
    poller = select.poll()
    poller.register(err, select.POLLIN)
    deadline = time.monotonic() + 1.0
    while len(kept) < STDERR_KEPT and poller.poll(
            max(0, int((deadline - time.monotonic()) * 1000))):
        data = os.read(err, 4096)
        if not data:
            return
        keep(kept, data)


def gone_why(proc: subprocess.Popen[bytes], kept: bytearray) -> str:
    """Why the box ended, as its last line of stderr says, else its status."""
    text = kept.decode("utf-8", "replace").strip()
    if text:
        return f"it ended: {escape(text.splitlines()[-1])}"
    rc = proc.poll()
    return "it ended" if rc is None else f"it ended with status {rc}"
