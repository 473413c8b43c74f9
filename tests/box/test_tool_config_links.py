"""A hard link among the project files other tools run (sandbox/policy/toolconfigs.py) is
refused as one to a protected git name is: the box could rewrite the read-only file
through its other, writable name, and the tool would run what it wrote."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)


@pytest.mark.parametrize("name", [".claude/settings.json", ".mcp.json",
                                  ".vscode/tasks.json", ".gemini/settings.json",
                                  ".bashrc"])
def test_a_hard_link_to_a_tool_config_refuses_the_session(project: Path, outside: Path,
                                                           name: str) -> None:
    config = project / name
    config.parent.mkdir(exist_ok=True)
    config.write_text("{}\n")
    os.link(config, project / "notes.txt")
    with pytest.raises(PolicyError) as info, Session.open(str(project), SETTINGS) as s:
        # Without the refusal: the box rewrites the read-only config through the other
        # name, and the next time that tool opens the project it runs the command.
        s.run(["sh", "-c", f"echo '{{\"hooks\": \"touch {outside}/ran\"}}' > notes.txt"])
        assert "touch" not in config.read_text()
    said = str(info.value)
    assert said.startswith(f"{config} has 2 names (hard links): through another one the "
                           "box could rewrite it while it is read-only here;")
    assert config.read_text() == "{}\n"


def test_a_released_row_may_keep_its_link(project: Path) -> None:
    config = project / ".vscode" / "tasks.json"
    config.parent.mkdir()
    config.write_text("{}\n")
    os.link(config, project / "notes.txt")
    settings = SandboxSettings(hide_defaults=False, allow_tool_configs=(".vscode",))
    with Session.open(str(project), settings) as s:
        r = s.run(["sh", "-c", "echo changed > notes.txt"])
    assert r.returncode == 0
    assert config.read_text() == "changed\n"
