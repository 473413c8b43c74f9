"""What the box makes where a row of other tools' project configs was missing at the
open is moved out of the project after the run, into the user's data folder, and the
session says the one command that puts it back (sandbox/session/moveout.py). Nothing is made in
the project for a missing row: no folder shows there that the user did not make."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.procs import box_driver, eventually

from launchers.config import SandboxSettings
from sandbox.policy.toolconfigs import TOOL_CONFIGS, ToolConfig
from sandbox.process import made
from sandbox.session import Session, moveout

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)
PAYLOAD = '{"mcpServers": {"x": {"command": "touch", "args": ["/tmp/ran"]}}}'


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's data folder, where what the box made goes."""
    d = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(d))
    return d


def _make(row: ToolConfig) -> tuple[str, str]:
    """The shell that makes ``row`` with the payload, and the file it is in (relative)."""
    inner = f"{row.name}/servers.yaml" if row.folder else row.name
    return (f"mkdir -p ./{os.path.dirname(inner)} && printf '%s\\n' '{PAYLOAD}' > {inner} "
            "&& echo MADE"), inner


def _put_back(warning: str) -> str:
    command = warning.split("put it back once you have checked it: ", 1)[1]
    assert command.startswith("mv -nT -- "), warning
    return command


@pytest.mark.parametrize("row", TOOL_CONFIGS, ids=[r.name for r in TOOL_CONFIGS])
def test_a_missing_tool_config_the_box_makes_is_moved_out_and_can_be_put_back(
        project: Path, data: Path, row: ToolConfig) -> None:
    script, inner = _make(row)
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", script])
        assert r.stdout == b"MADE\n", r
        # After the run, not only at the session's end: the window is the run's.
        assert not (project / row.name).exists()
        assert not (project / row.name).is_symlink()
        said = [w for w in s.warnings if w.startswith(f"the box made {project}/")]
    assert len(said) == 1, s.warnings
    (kept,) = (data / "harness" / "moved").glob(f"*/{inner}")
    assert kept.read_text() == PAYLOAD + "\n"
    where = kept.parents[len(Path(row.name).parts) - (0 if row.folder else 1)]
    assert said[0] == (
        f"the box made {project}/{row.name}, read by {row.tool} ({row.why}); it was "
        f"moved out of the project to {where}/{row.name}; to put it back once you have "
        f"checked it: mv -nT -- {where}/{row.name} {project}/{row.name}")
    assert not (project / row.name).exists()  # nor at the end
    subprocess.run(["sh", "-c", _put_back(said[0])], check=True)
    assert (project / inner).read_text() == PAYLOAD + "\n"
    assert not kept.exists()


def _listing(project: Path) -> list[str]:
    return sorted(os.listdir(project))


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("git", [False, True], ids=["folder", "repository"])
def test_a_session_makes_no_folder_in_the_project(project: Path, data: Path, warm: bool,
                                                  git: bool) -> None:
    """Seen from the host while the session is open and from inside the box, the
    project holds what it held before; git clean -fdx and chmod -R work in the box
    (each failed on a folder made over a missing row: "Device or resource busy")."""
    (project / "README").write_text("hi\n")
    if git:
        subprocess.run(["git", "init", "-q", str(project)], check=True)
    before = _listing(project)
    with Session.open(str(project), SETTINGS, warm=warm) as s:
        during = _listing(project)
        inside = s.run(["sh", "-c", "ls -A1"])
        modes = s.run(["sh", "-c", "chmod -R go-rwx . && echo CHMOD"])
        clean = s.run(["sh", "-c", "git init -q . 2>/dev/null; git clean -fdxq && echo CLEAN"])
    assert during == before
    assert sorted(inside.stdout.decode().split()) == before, inside
    if not git:  # a repository's .git/config is read-only in the box (git's own)
        assert modes.stdout == b"CHMOD\n", modes
    assert clean.stdout == b"CLEAN\n", clean
    assert [w for w in s.warnings if "the box made" in w] == []


def test_a_link_the_box_plants_is_moved_as_a_link(project: Path, data: Path,
                                                  outside: Path) -> None:
    """A row that is a link goes as the link (its target stays as it was), and so does
    a link the box put on the way to a nested row."""
    target = outside / "target.json"
    target.write_text("the user's\n")
    script = (f"ln -s {target} .mcp.json && mkdir real && printf '%s\\n' '{PAYLOAD}' > "
              "real/mcp.json && ln -s real .roo && echo MADE")
    with Session.open(str(project), SETTINGS) as s:
        r = s.run(["sh", "-c", script])
        assert r.stdout == b"MADE\n", r
        assert not os.path.lexists(project / ".mcp.json")
        assert not os.path.lexists(project / ".roo")
    (folder,) = (data / "harness" / "moved").iterdir()
    assert os.readlink(folder / ".mcp.json") == str(target)
    assert target.read_text() == "the user's\n"
    assert os.readlink(folder / ".roo") == "real"
    assert (project / "real" / "mcp.json").read_text() == PAYLOAD + "\n"
    assert f"the box made {project}/.mcp.json (a link to {target}), read by MCP clients" \
        in "\n".join(s.warnings)
    assert f"the box made {project}/.roo (a link to real) on the way to .roo/mcp.json, " \
           "read by Roo Code" in "\n".join(s.warnings)
    for w in s.warnings:
        subprocess.run(["sh", "-c", _put_back(w)], check=True)
    assert os.readlink(project / ".mcp.json") == str(target)
    assert (project / ".roo" / "mcp.json").read_text() == PAYLOAD + "\n"


def test_on_another_file_system_a_copy_is_kept(project: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The data folder on another file system (/dev/shm): the row is copied, links as
    links, then removed from the project."""
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(project).st_dev:
        pytest.skip("needs /dev/shm on a file system of its own")
    data = Path(__import__("tempfile").mkdtemp(prefix="hs-moved-", dir="/dev/shm"))
    try:
        monkeypatch.setenv("XDG_DATA_HOME", str(data))
        script = ("mkdir -p .vscode/deep && echo '{}' > .vscode/tasks.json && "
                  "ln -s /etc/hostname .vscode/deep/link && echo MADE")
        with Session.open(str(project), SETTINGS) as s:
            assert s.run(["sh", "-c", script]).stdout == b"MADE\n"
        assert not os.path.lexists(project / ".vscode")
        (folder,) = (data / "harness" / "moved").iterdir()
        assert (folder / ".vscode" / "tasks.json").read_text() == "{}\n"
        assert os.readlink(folder / ".vscode" / "deep" / "link") == "/etc/hostname"
        (said,) = [w for w in s.warnings if "the box made" in w]
        subprocess.run(["sh", "-c", _put_back(said)], check=True)
        assert (project / ".vscode" / "tasks.json").read_text() == "{}\n"
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_a_row_made_twice_goes_to_a_fresh_folder(project: Path, data: Path) -> None:
    with Session.open(str(project), SETTINGS) as s:
        for n in (1, 2):
            s.run(["sh", "-c", f"echo {n} > .envrc"])
    said = [w for w in s.warnings if "the box made" in w]
    assert len(said) == 2
    kept = [re.search(r"moved out of the project to (\S+);", w)[1] for w in said]  # type: ignore[index]
    assert [Path(k).read_text() for k in kept] == ["1\n", "2\n"]
    assert kept[1] == kept[0].replace("/.envrc", "-2/.envrc")


def test_a_released_row_is_left_in_the_project(project: Path, data: Path) -> None:
    settings = SandboxSettings(hide_defaults=False, allow_tool_configs=(".vscode",))
    with Session.open(str(project), settings) as s:
        s.run(["sh", "-c", "mkdir .vscode && echo '{}' > .vscode/tasks.json"])
    assert (project / ".vscode" / "tasks.json").read_text() == "{}\n"
    assert [w for w in s.warnings if "the box made" in w] == []
    assert not (data / "harness" / "moved").exists()


def test_without_the_move_the_box_s_config_stays_where_its_tool_reads(
        project: Path, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The move off: the box's .mcp.json is in the project after the session, where
    the next MCP client to open it starts what it names."""
    monkeypatch.setattr(moveout.MoveOut, "_sweep", lambda self: [])
    monkeypatch.setattr(made, "_move_out", lambda moves: None)
    with Session.open(str(project), SETTINGS) as s:
        s.run(["sh", "-c", f"printf '%s\\n' '{PAYLOAD}' > .mcp.json"])
    assert (project / ".mcp.json").read_text() == PAYLOAD + "\n"


def test_a_killed_harness_s_box_config_is_moved_out_by_the_watchdog(
        project: Path, data: Path) -> None:
    """The harness killed while the run that made .mcp.json goes on: its watchdog
    moves it out (the session's manifest names the rows that were missing)."""
    driver = box_driver(project, "sh", "-c", "echo '{}' > .mcp.json; sleep 60")
    try:
        def made() -> None:
            assert (project / ".mcp.json").read_text() == "{}\n"

        eventually(made, 20)
        driver.kill()
        driver.wait()

        def moved() -> None:
            assert not os.path.lexists(project / ".mcp.json")
            (kept,) = (data / "harness" / "moved").glob("*/.mcp.json")
            assert kept.read_text() == "{}\n"

        eventually(moved, 20)
    finally:
        driver.kill()
        driver.wait()


def test_a_row_behind_a_link_of_the_user_s_is_said_once_not_moved(
        project: Path, data: Path) -> None:
    """.kiro a link of the user's at the open: what the box makes behind it is not
    reached by following the link (it could lead anywhere), only said, once."""
    (project / "kiro-real").mkdir()
    (project / ".kiro").symlink_to("kiro-real")
    with Session.open(str(project), SETTINGS) as s:
        for _ in range(2):
            s.run(["sh", "-c", "mkdir -p kiro-real/settings && echo '{}' > "
                   "kiro-real/settings/mcp.json"])
    assert [w for w in s.warnings if "the box made" in w] == [
        f"the box made {project}/.kiro/settings/mcp.json, read by Kiro (MCP servers "
        f"started from the project), through {project}/.kiro, a link that was there at "
        "the start: it is not moved (a link is not followed); check it before that tool "
        "opens the project"]
    assert os.readlink(project / ".kiro") == "kiro-real"
    assert not (data / "harness" / "moved").exists()
