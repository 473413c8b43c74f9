"""A user of ``import claude``: a home, a harness config folder and a project, and the
real command line run as that user (what the Claude Code import tests share)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from helpers.paths import REPO
from helpers.procs import Done


class ClaudeWorld(NamedTuple):
    home: Path
    harness_home: Path
    project: Path

    @property
    def config(self) -> Path:
        return self.harness_home / "config.toml"

    @property
    def hooks_home(self) -> Path:
        return self.home / ".local" / "share" / "harness" / "hooks"

    def cli(self, *args: str) -> Done:
        """``harness-sandbox ARGS`` as this user, with none of the caller's harness or
        Claude Code variables."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME", "CLAUDE_PROJECT_DIR")}
        env.update(HOME=str(self.home), HARNESS_HOME=str(self.harness_home))
        r = subprocess.run([sys.executable, "-m", "launchers.cli", *args], cwd=REPO,
                           capture_output=True, text=True, env=env, timeout=120, check=False)
        return Done(r.returncode, r.stdout, r.stderr)


@contextmanager
def made(tmp_path: Path, prefix: str) -> Iterator[tuple[Path, Path, Path]]:
    """(home, harness folder, project with ``.claude/hooks``). The home is outside /tmp:
    a boxed hook's files must be (the box's /tmp is the agent's)."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    base.chmod(0o755)
    home = base / "home"
    home.mkdir()
    project = tmp_path / "proj"
    (project / ".claude" / "hooks").mkdir(parents=True)
    try:
        yield home, base / "harness", project
    finally:
        shutil.rmtree(base, ignore_errors=True)
