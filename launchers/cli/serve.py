"""``harness-sandbox serve``: one session over JSON lines on stdin and stdout.

stdout carries the protocol and nothing else: the descriptor is moved aside before the
session starts, and fd 1 (and ``sys.stdout``) become stderr, so a stray print goes to
people and never corrupts a message. See docs/serve.md for the protocol.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def cmd_serve(args: argparse.Namespace) -> int:
    from launchers.serve.methods import Defaults
    from launchers.serve.server import serve

    if args.schema:
        from launchers.serve import SCHEMA_PATH

        sys.stdout.write(SCHEMA_PATH.read_text(encoding="utf-8"))
        return 0
    out_fd = os.dup(1)  # not inherited: no child holds the harness's pipe open
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    defaults = Defaults(project=args.project, config=args.config,
                        no_hooks=bool(args.no_hooks), no_sandbox=bool(args.no_sandbox))
    out = os.fdopen(out_fd, "wb")
    try:
        return serve(sys.stdin.buffer, out, defaults)
    finally:
        # A reader that went away leaves bytes in the buffer: the session has ended
        # cleanly all the same (docs/serve.md), and they are dropped, not a crash.
        # (The descriptor is closed whether or not the flush could be.)
        with contextlib.suppress(OSError):
            out.close()
