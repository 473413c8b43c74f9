"""The Node.js client package (clients/node) against the real ``harness-sandbox serve``:
its own tests, run by Node's test runner (streaming, cancel, 1,000 requests in flight,
the server killed mid-run, bad input, the types generated from the schema and checked
by ``tsc --strict``, ``npm pack`` installed into an empty folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.serve_client import CLI

from serve.test_serve_node import node

PACKAGE = REPO / "clients" / "node"
pytestmark = pytest.mark.isolation


def node_test(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env |= {"HS_SERVE_CLI": json.dumps(CLI), "TMPDIR": str(tmp_path),
            "PATH": f"{Path(node()).parent}:{env.get('PATH', '')}"}
    return subprocess.run([node(), "--test", f"test/{name}.test.mjs"], cwd=PACKAGE, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_node_client_drives_the_real_server(tmp_path: Path) -> None:
    done = node_test("client", tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout


def test_the_node_clients_types_are_the_schemas_and_pass_tsc_strict(tmp_path: Path) -> None:
    assert (PACKAGE / "node_modules" / "typescript").is_dir(), \
        "typescript is missing: scripts/_setup.sh installs clients/node's devDependencies"
    done = node_test("types", tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_packed_node_client_installs_and_runs_a_boxed_command(tmp_path: Path) -> None:
    assert shutil.which("npm"), "npm is missing: scripts/_setup.sh installs it"
    done = node_test("pack", tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
