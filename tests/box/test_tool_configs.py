"""Project files that other tools run are read-only in the box; one the box makes is
said at the session's end; ``[sandbox] allow_tool_configs`` releases a row."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.session import Session
from sandbox.toolconfigs import TOOL_CONFIGS

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)
FOLDERS = {".oh", ".claude", ".vscode", ".idea", ".cursor", ".gemini", ".codex", ".zed",
           ".devcontainer"}


def lay(project: Path) -> dict[str, Path]:
    """Each row as a tool leaves it: a folder with a settings file, or a file."""
    out = {}
    for row in TOOL_CONFIGS:
        if row.name in FOLDERS:
            (project / row.name).mkdir()
            out[row.name] = project / row.name / "settings.json"
        else:
            out[row.name] = project / row.name
        out[row.name].write_text("reviewed\n")
    return out


def test_every_existing_tool_config_is_read_only_in_the_box(project: Path) -> None:
    files = lay(project)
    script = "; ".join(
        f"echo evil > {f}; echo evil > {f.parent / 'new.json'}" if name in FOLDERS
        else f"echo evil > {f}" for name, f in files.items())
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", script + "; mv .claude .claude-old; true"])
        assert r.returncode == 0, r
    # The host side: the next tool to open the project reads what the user reviewed.
    for name, f in files.items():
        assert f.read_text() == "reviewed\n", name
        if name in FOLDERS:
            assert not (f.parent / "new.json").exists(), name


def test_a_tool_config_the_box_makes_is_said_at_the_end(
        project: Path) -> None:
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", "echo '{}' > .mcp.json; mkdir -p .claude/hooks"])
        assert r.returncode == 0, r
    assert f"the box made {project}/.mcp.json, read by MCP clients (Claude Code and " \
           "others) (MCP servers started from the project); check it before that tool " \
           "opens the project" in s.warnings
    assert any(w.startswith(f"the box made {project}/.claude,") for w in s.warnings)


def test_allow_tool_configs_releases_a_row(project: Path) -> None:
    (project / ".vscode").mkdir()
    (project / ".vscode" / "settings.json").write_text("{}\n")
    settings = SETTINGS._replace(allow_tool_configs=(".vscode",))
    with Session.open(str(project), settings) as s:
        r = s.run(["sh", "-c", "echo '{\"a\": 1}' > .vscode/settings.json; echo x > .mcp.json"])
        assert r.returncode == 0, r
    assert (project / ".vscode" / "settings.json").read_text() == '{"a": 1}\n'
    assert [w for w in s.warnings if ".vscode" in w] == []
