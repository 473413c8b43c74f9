"""The protocol's schema for a harness: ``harness-sandbox serve --schema`` prints it,
and the Python package names its path."""

from __future__ import annotations

import json
import subprocess

from helpers.schema_check import SCHEMA_PATH
from helpers.serve_client import CLI

import launchers.serve


def test_serve_schema_prints_the_protocols_schema() -> None:
    done = subprocess.run([*CLI, "serve", "--schema"], capture_output=True, text=True,
                          timeout=30, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(SCHEMA_PATH.read_text())
    assert done.stdout == SCHEMA_PATH.read_text()


def test_the_package_names_the_schemas_path() -> None:
    assert launchers.serve.SCHEMA_PATH == SCHEMA_PATH
    assert launchers.serve.SCHEMA_PATH.is_file()
