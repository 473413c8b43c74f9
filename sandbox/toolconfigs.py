"""Project files that other tools run: read-only in the box.

A developer who boxes one harness usually has other agent tools and an editor open on
the same project. Each reads files of the project to decide what to start -- hooks, MCP
servers, tasks run when a folder opens -- so a boxed command that rewrote one would run
on the host the next time that tool opens the project. One table, each row with its tool;
``[sandbox] allow_tool_configs`` releases rows by name. A leaf: the standard library only, and the
records' base (:mod:`pathguard.records`).

An entry that exists is bound read-only (a folder with all it holds). A folder row that
does not exist is made empty by the session on Linux (listed in its manifest, removed
at its end if still empty, as a missing git ``hooks`` folder is) and bound read-only
like the others, so the box cannot create it and fill it; on macOS the profile denies
every row's name, there or not. A file row that does not exist is not made (an empty
``.mcp.json`` or ``.envrc`` is not nothing to its tool): the session's end says which
the box created, so the user checks them before that tool runs.
"""

from __future__ import annotations

import os

from pathguard.records import NamedTuple


class ToolConfig(NamedTuple):
    """A path relative to the project, the tool that runs what it names, and how;
    ``folder`` when the entry is a folder of the tool's files."""

    name: str
    tool: str
    why: str
    folder: bool = False


TOOL_CONFIGS: tuple[ToolConfig, ...] = (
    ToolConfig(".oh", "openHarness", "hooks run from .oh/config.yaml", folder=True),
    ToolConfig(".claude", "Claude Code", "project hooks, commands, agents and settings",
               folder=True),
    ToolConfig(".mcp.json", "MCP clients (Claude Code and others)",
               "MCP servers started from the project"),
    ToolConfig(".vscode", "VS Code and its forks",
               "tasks run on folder open, launch configurations, settings naming programs",
               folder=True),
    ToolConfig(".idea", "JetBrains IDEs", "run configurations and startup tasks",
               folder=True),
    ToolConfig(".cursor", "Cursor", "hooks, rules and MCP servers", folder=True),
    ToolConfig(".gemini", "Gemini CLI", "settings with hooks and MCP servers", folder=True),
    ToolConfig(".codex", "Codex CLI", "project config with MCP servers", folder=True),
    ToolConfig(".zed", "Zed", "tasks and language-server settings", folder=True),
    ToolConfig(".devcontainer", "Dev Containers", "commands run when a container is made",
               folder=True),
    ToolConfig(".envrc", "direnv", "a shell script run on entering the folder (if allowed)"),
    ToolConfig(".bashrc", "bash", "run at start-up where the project is a home"),
    ToolConfig(".bash_profile", "bash", "run by a login shell where the project is a home"),
    ToolConfig(".profile", "sh and bash", "run by a login shell where the project is a home"),
    ToolConfig(".zshrc", "zsh", "run at start-up where the project is a home"),
    ToolConfig(".zprofile", "zsh", "run by a login shell where the project is a home"),
    ToolConfig(".zshenv", "zsh", "run by every zsh where the project is a home"),
    ToolConfig(".gitconfig", "git", "a user config where the project is a home"),
    ToolConfig(".gitmodules", "git", "submodule URLs and update commands"),
    ToolConfig(".ripgreprc", "ripgrep", "options, including a preprocessor program"),
)

NAMES: tuple[str, ...] = tuple(t.name for t in TOOL_CONFIGS)


def guarded(allowed: tuple[str, ...] = ()) -> tuple[ToolConfig, ...]:
    """The rows in force: all but those ``[sandbox] allow_tool_configs`` released."""
    return tuple(t for t in TOOL_CONFIGS if t.name not in allowed)


def present(project: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The rows' paths that exist in ``project`` as files or real folders. A link is
    left alone here: the box never binds what a link points at."""
    out = []
    for t in guarded(allowed):
        p = os.path.join(project, t.name)
        if os.path.lexists(p) and not os.path.islink(p):
            out.append(p)
    return tuple(out)


def covers(project: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The folder rows' paths in ``project`` where nothing is (not even a link): what a
    session whose box binds names that exist (bwrap's) makes empty before the box, so
    that the box cannot make and fill one (it binds each read-only, as one that was
    there)."""
    return tuple(os.path.join(project, t.name) for t in guarded(allowed)
                 if t.folder and not os.path.lexists(os.path.join(project, t.name)))


def folders(project: str) -> tuple[str, ...]:
    """Every folder row's path in ``project``: one that another live session made is
    this one's too, so the last session to end removes it
    (:func:`sandbox.leftovers.make`)."""
    return tuple(os.path.join(project, t.name) for t in TOOL_CONFIGS if t.folder)


def made_during(project: str, before: tuple[str, ...],
                allowed: tuple[str, ...] = ()) -> list[tuple[str, ToolConfig]]:
    """(path, row) for each row that was absent at the session's start and exists now."""
    out = []
    for t in guarded(allowed):
        p = os.path.join(project, t.name)
        if p not in before and os.path.lexists(p):
            out.append((p, t))
    return out
