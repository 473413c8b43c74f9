"""The project's package cache folder is one the box writes (sandbox/policy/caches.py), so it
is one of the folders a hook may not live in, and a host hook's PATH loses it: a
program the box put there is never run on the host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

pytestmark = [pytest.mark.isolation,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="the package caches are the Linux box's")]

CLI = [sys.executable, "-m", "launchers"]


def test_a_hook_the_box_left_in_the_package_cache_is_refused(outside: Path) -> None:
    home, project = outside / "home", outside / "proj"
    home.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    planted = subprocess.run(
        [*CLI, "run", "--project", str(project), "--", "sh", "-c",
         'printf "#!/bin/sh\\nexit 0\\n" > "$npm_config_cache/h.sh" && '
         'chmod +x "$npm_config_cache/h.sh" && printf %s "$npm_config_cache"'],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert planted.returncode == 0, planted
    program = Path(planted.stdout) / "h.sh"
    assert program.exists() and not str(program).startswith(str(project))
    config = outside / "config.toml"
    config.write_text(f'[[hooks]]\nname = "cached"\nevent = "PreToolUse"\n'
                      f'sandbox = false\ncommand = ["{program}"]\n')
    audit = subprocess.run([*CLI, "audit", "--config", str(config), "--project", str(project)],
                           env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
                           check=False)
    assert audit.returncode == 1, audit
    assert f"{program} is in the project's package cache folder" in audit.stderr + audit.stdout
