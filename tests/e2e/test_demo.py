"""./scripts/demo, the README's main job, end to end on the bundled example."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.paths import REPO

# Hooks run in the real box.
pytestmark = pytest.mark.isolation


@pytest.fixture
def home() -> Iterator[Path]:
    # Outside /tmp: the demo installs its hooks under the home's data folder, and a
    # boxed hook under /tmp would be refused (the box's /tmp is the agent's).
    path = Path(tempfile.mkdtemp(prefix="hs-demo-home-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                    reason="needs bubblewrap on Linux")
def test_the_demo_shows_the_banner_the_audit_and_the_hooks_at_work(home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "HARNESS_"))}
    env.update(HOME=str(home), HS_USE_VENV=str(Path(sys.executable).parent.parent))
    done = subprocess.run(["bash", str(REPO / "scripts" / "demo")], env=env,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for line in [
        "hooks: no-force-push (bash, exec) · keywords (prompts) · "
        "notify (every tool, on the host)",
        "audit: 3 hooks may run",
        "blocked by the user's hook \"no-force-push\": force-push is not allowed here",
        '"outcome": "allowed"',
        "Context from the user's hook \"keywords\":",
        "Read-only file system",
        "audit: 1 of 1 hook refused",
        ".oh/config.yaml: not trusted: it is new (never trusted at this path), so none "
        "of its hooks run. Review them, then trust the file: harness-sandbox trust "
        "--openharness ",
        ".oh/config.yaml defines 2 hooks:",
        '  preToolUse[0]: command (env mode) in the box, match "Bash": case ',
        "cannot create .oh/config.yaml: Read-only file system",
        "preToolUse: denied by preToolUse[0]: rm -rf is not allowed here",
        ".oh/config.yaml: not trusted: it changed since it was trusted, so none of its "
        "hooks run. Review them, then trust the file again: harness-sandbox trust "
        "--openharness ",
        "revoked: ",
        "the box works: bubblewrap",
        "import: 3 hooks appended to ",
        "blocked by the user's hook \"block-rm\": Blocked: recursive delete of / or ~",
        "Context from the user's hook \"add-context\":",
    ]:
        assert line in out, f"{line!r} missing from the demo's output:\n{out}"
    # The demo forgets what it trusted: the store it used holds nothing.
    store = home / ".local/share/harness/trusted.json"
    assert '"files": {}' in store.read_text()
    # The host hook's notification log was shown; then everything the demo made went.
    assert "harness: bash in" in out
    assert not (home / ".local/share/harness-sandbox-demo").exists()
    # Its story is on stdout, each refusal said as the point it is.
    assert done.stderr == ""
    assert "(exit 1: the call is blocked)\n" in done.stdout
    assert "not what the demo expected" not in done.stdout
