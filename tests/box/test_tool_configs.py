"""Project files that other tools run are read-only in the box; one the box makes is
said at the session's end; ``[sandbox] allow_tool_configs`` releases a row."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def test_a_tool_config_file_the_box_makes_is_said_at_the_end(
        project: Path) -> None:
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", "echo '{}' > .mcp.json"])
        assert r.returncode == 0, r
    assert f"the box made {project}/.mcp.json, read by MCP clients (Claude Code and " \
           "others) (MCP servers started from the project); check it before that tool " \
           "opens the project" in s.warnings


# What the box tries for each folder row: make it (or, once made, a file in it).
MAKE_ALL = "; ".join(
    f"if mkdir -p {name} 2>/dev/null && echo '{{\"hooks\": 1}}' > {name}/settings.json "
    f"2>/dev/null; then echo made {name}; fi" for name in sorted(FOLDERS))


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("git", [False, True], ids=["folder", "repository"])
def test_a_missing_tool_folder_cannot_be_made_by_the_box(project: Path, warm: bool,
                                                          git: bool) -> None:
    """A folder row missing at the open is made empty and bound read-only: the box
    cannot make it and fill it (a .claude/settings.json with hooks runs on the host the
    next time Claude Code opens the project). The session's end removes what it made."""
    if git:
        subprocess.run(["git", "init", "-q", str(project)], check=True)
    with Session.open(str(project), SETTINGS, warm=warm) as s:
        r = s.run(["sh", "-c", MAKE_ALL])
        inside = s.run(["sh", "-c", "ls -A"])
    assert r.stdout == b"", r
    assert set(inside.stdout.decode().split()) >= FOLDERS
    for name in FOLDERS:
        assert not (project / name).exists(), name
    assert [w for w in s.warnings if w.startswith("the box made")] == []


def test_without_the_covers_the_box_makes_one_and_the_host_tool_would_run_it(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The covers off: the box's .claude/settings.json is on the host after the
    session, where only the end's warning says so."""
    from sandbox import toolconfigs

    monkeypatch.setattr(toolconfigs, "covers", lambda *a, **k: ())
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", MAKE_ALL])
    assert r.stdout.decode().split("\n")[:1] == ["made .claude"], r
    assert (project / ".claude" / "settings.json").read_text() == '{"hooks": 1}\n'
    assert any(w.startswith(f"the box made {project}/.claude,") for w in s.warnings)


def test_a_cover_the_user_filled_meanwhile_stays(project: Path) -> None:
    with Session.open(str(project), SETTINGS):
        (project / ".vscode" / "settings.json").write_text("{}\n")  # the user's editor
    assert (project / ".vscode" / "settings.json").read_text() == "{}\n"
    assert not (project / ".claude").exists()


def test_a_cover_two_sessions_share_stays_until_the_last_ends(project: Path) -> None:
    """The second session finds the first's cover and binds it; the first's end leaves
    it (a folder removed on the host would take the second box's mount with it, and
    the name would be free to make there)."""
    first, second = Session.open(str(project), SETTINGS), Session.open(str(project), SETTINGS)
    first.start()
    try:
        box = second.start()
    finally:
        first.end()
    try:
        assert (project / ".claude").is_dir()
        r = box.run(["sh", "-c", MAKE_ALL])
        assert r.stdout == b"", r
    finally:
        second.end()
    assert not (project / ".claude").exists()


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
    from sandbox import watched

    monkeypatch.setattr(watched, "restore_link", lambda path, text: None)
    shared = _linked_claude(project, outside)
    with Session.open(str(project), SETTINGS) as s:
        s.run(["sh", "-c", REPLACE_LINK])
    assert (project / ".claude" / "settings.json").read_text() == '{"hooks": 1}\n'
    assert [w for w in s.warnings if ".claude" in w] == [
        f"{project}/.claude was a link to {shared} at the start and was changed during the "
        "session; check it before a tool reads it"]
