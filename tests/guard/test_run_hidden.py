"""A boxed hook under /run is refused at audit: the Linux box's /run is an empty tmpfs,
so the hook could never start there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "harness-sandbox"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux box's /run")
def test_a_boxed_hook_under_run_is_refused_as_hidden(tmp_path: Path, project: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[hooks]]\nname = "r"\nevent = "PreToolUse"\n'
                      'command = ["/run/hs-none/h.sh"]\nsandbox = true\n')
    r = subprocess.run([str(CLI), "audit", "--config", str(config), "--project",
                        str(project)], capture_output=True, text=True, check=False,
                       env=dict(os.environ))
    assert r.returncode == 1, r.stderr
    assert ("hook r: /run/hs-none/h.sh is in a folder the sandbox hides (/run), so the "
            "hook could not read it. Move it, or set sandbox = false for this hook.\n"
            ) in r.stderr
