"""Shared set-up for the hook tests: the fixture programs, copied where a hook may live.

Hook programs must lie outside the project and, for boxed hooks, outside /tmp (the
box's /tmp is the agent's, so the guard refuses it). pytest's tmp_path is under /tmp,
so the project goes there and the programs go to a folder made under /var/tmp.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hooks"
SCRIPTS = Path(__file__).parent.parent.parent / "scripts" / "hooks"
NOT_EXECUTABLE = "not-executable.sh"


def install_hooks() -> Iterator[Path]:
    """A folder under /var/tmp holding every fixture program (and the example hooks),
    removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="hook-programs-", dir="/var/tmp"))
    try:
        os.chmod(home, 0o755)
        for src in [*FIXTURES.iterdir(), *SCRIPTS.iterdir()]:
            if src.is_file():
                dst = home / src.name
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o644 if src.name == NOT_EXECUTABLE else 0o755)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)
