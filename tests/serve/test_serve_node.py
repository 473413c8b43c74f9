"""The example Node.js harness (examples/node-harness) driving ``harness-sandbox serve``
for real: the box, the hooks, a cancel. Every line the server wrote to it is checked
against the protocol's schema afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.schema_check import check
from helpers.serve_client import CLI

HARNESS = REPO / "examples" / "node-harness" / "harness.mjs"
pytestmark = pytest.mark.isolation


def node() -> str:
    found = shutil.which("node") or "/usr/bin/node"
    assert os.access(found, os.X_OK), "node is missing: scripts/_setup.sh installs nodejs"
    return found


def test_the_node_harness_runs_the_box_the_hooks_and_a_cancel(tmp_path: Path,
                                                               outside: Path) -> None:
    (outside / ".ssh").mkdir(mode=0o700)
    (outside / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    tap = tmp_path / "messages.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env |= {"HOME": str(outside), "HS_SERVE_TAP": str(tap), "TMPDIR": str(tmp_path)}
    r = subprocess.run([node(), str(HARNESS), *CLI], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "ready: protocol 1"
    assert lines[1] == ("open: hooks: no-force-push (bash, exec) · keywords (prompts) · "
                        "notify (every tool, on the host); audit ok: true")
    assert lines[2] == "run write: exit 0: hello from the box"
    assert lines[3] == "run ssh: exit 1, key printed: false"
    assert lines[5] == "run network: exit 1, connected: false"
    assert lines[7] == "note.txt on the host: hello from the box"
    assert lines[8] == ('hook PreToolUse: blocked: blocked by the user\'s hook '
                        '"no-force-push": force-push is not allowed here')
    assert lines[9] == ('hook UserPromptSubmit: allowed, 1 context: Context from the '
                        'user\'s hook "keywords":')
    assert lines[10] == "cancel: true; the long command: cancelled (exit 130)"
    assert lines[11] == "close: exit 0, 0 warnings"
    messages = [json.loads(line) for line in tap.read_text().splitlines()]
    assert len(messages) == 10  # ready, open, 3 runs, 2 hooks, run, cancel, close
    for message in messages:
        check(message, "server_message")
    assert [p for p in tmp_path.iterdir() if p.name.startswith("node-harness-")] == []
