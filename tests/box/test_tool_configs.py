"""Project files that other tools run are read-only in the box; ``[sandbox]
allow_tool_configs`` releases a row; a tool config put back as a link. What the box
makes where a row was missing: test_tool_configs_moved.py."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.policy.toolconfigs import TOOL_CONFIGS
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)
FOLDERS = {row.name for row in TOOL_CONFIGS if row.folder}


def lay(project: Path) -> dict[str, Path]:
    """Each row as a tool leaves it: a folder with a settings file, or a file."""
    out = {}
    for row in TOOL_CONFIGS:
        if row.name in FOLDERS:
            (project / row.name).mkdir(parents=True)
            out[row.name] = project / row.name / "settings.json"
        else:
            out[row.name] = project / row.name
            out[row.name].parent.mkdir(parents=True, exist_ok=True)
        out[row.name].write_text("reviewed\n")
    return out


def test_every_existing_tool_config_is_read_only_in_the_box(project: Path) -> None:
    files = lay(project)
    script = "; ".join(
        f"echo evil > {f}; echo evil > {f.parent / 'new.json'}" if name in FOLDERS
        else f"echo evil > {f}" for name, f in files.items())
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", script + "; mv .claude .claude-old; mv .kiro .kiro-old; "
                   "mv .continue .continue-old; true"])
        assert r.returncode == 0, r
    # The host side: the next tool to open the project reads what the user reviewed.
    for name, f in files.items():
        assert f.read_text() == "reviewed\n", name
        if name in FOLDERS:
            assert not (f.parent / "new.json").exists(), name


REPLACE_LINK = ("rm .claude && mkdir .claude && echo '{\"hooks\": 1}' > .claude/settings.json "
                "&& echo REPLACED")


def _linked_claude(project: Path, outside: Path) -> Path:
    """A .claude that is a link to a folder outside the project (a user's shared
    settings): never bound, so the box may replace the name."""
    shared = outside / "shared-claude"
    shared.mkdir()
    (shared / "settings.json").write_text("{}\n")
    (project / ".claude").symlink_to(shared)
    return shared


def test_a_tool_config_link_the_box_replaced_is_put_back(project: Path,
                                                         outside: Path) -> None:
    shared = _linked_claude(project, outside)
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", REPLACE_LINK])
    assert r.stdout == b"REPLACED\n", r
    assert os.readlink(project / ".claude") == str(shared)
    (aside,) = project.glob(".claude.from-the-box-*")
    assert (aside / "settings.json").read_text() == '{"hooks": 1}\n'
    assert (shared / "settings.json").read_text() == "{}\n"
    assert [w for w in s.warnings if ".claude" in w] == [
        f"{project}/.claude was a link to {shared} at the start and was changed during the "
        f"session: the link is back; what the box put there is now {aside}"]


def test_without_the_put_back_the_box_s_folder_stays_where_claude_code_reads(
        project: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.session import watched

    monkeypatch.setattr(watched, "restore_link", lambda path, text: None)
    shared = _linked_claude(project, outside)
    with Session.open(str(project), SETTINGS) as s:
        s.run(["sh", "-c", REPLACE_LINK])
    assert (project / ".claude" / "settings.json").read_text() == '{"hooks": 1}\n'
    assert [w for w in s.warnings if ".claude" in w] == [
        f"{project}/.claude was a link to {shared} at the start and was changed during the "
        "session; check it before a tool reads it"]
