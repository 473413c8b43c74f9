"""The fixtures of the ``serve`` tests: an empty user config, and the real server on
pipes with it (every line checked against the schema, helpers.serve_client)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.serve_client import Serve


@pytest.fixture
def config(tmp_path: Path) -> Path:
    home = tmp_path / "harness-home"
    home.mkdir()
    path = home / "config.toml"
    path.write_text("")
    return path


def env_for(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(config.parent)
    return env


@pytest.fixture
def served(project: Path, config: Path) -> Iterator[Serve]:
    s = Serve("--project", str(project), env=env_for(config), cwd=REPO)
    try:
        yield s
    finally:
        s.close()
