"""Building real trees for the path tests: files, links, and the fix texts they expect."""

from __future__ import annotations

import os
from pathlib import Path

FIX_W = "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks."
FIX_H = "Move it, or set sandbox = false for this hook."


def touch(p: Path, mode: int = 0o755) -> Path:
    """An executable script at ``p``, folders made on the way."""
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(mode)
    return p


def link(at: Path, target: str | Path) -> Path:
    """A symlink at ``at`` to ``target`` (which need not exist), folders made on the way."""
    at.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(str(target), at)
    return at
