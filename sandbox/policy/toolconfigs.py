"""Project files that other tools run: read-only in the box when they exist, moved out
of the project when the box makes them.

A developer who boxes one harness usually has other agent tools and an editor open on
the same project. Each reads files of the project to decide what to start -- hooks, MCP
servers, tasks run when a folder opens -- so a boxed command that wrote one would run
on the host the next time that tool opens the project. One table, each row the exact
path its tool reads, with the tool; ``[sandbox] allow_tool_configs`` releases rows by
name. A leaf: the standard library only, and the records' base
(:mod:`pathguard.records`).

An entry that exists at the session's open is bound read-only (a folder with all it
holds). One that does not is not covered (a bind needs a name that exists, and a name
made for it would show in the user's project): on Linux, what the box makes there is
moved out of the project after each run and at the session's end
(:mod:`sandbox.session.moveout`); on macOS the profile denies every row's name, there or not.
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
    ToolConfig("opencode.json", "opencode", "MCP servers and commands it starts"),
    ToolConfig("opencode.jsonc", "opencode", "MCP servers and commands it starts"),
    ToolConfig(".opencode", "opencode", "plugins it loads, commands and agents",
               folder=True),
    ToolConfig("crush.json", "Crush", "MCP servers and language servers it starts"),
    ToolConfig(".crush.json", "Crush", "MCP servers and language servers it starts"),
    ToolConfig(".kiro/settings/mcp.json", "Kiro", "MCP servers started from the project"),
    ToolConfig(".roo/mcp.json", "Roo Code", "MCP servers started from the project"),
    ToolConfig(".amazonq/mcp.json", "Amazon Q Developer",
               "MCP servers started from the project"),
    ToolConfig(".continue/mcpServers", "Continue",
               "MCP servers started from the project, one YAML or JSON file each",
               folder=True),
    ToolConfig(".devcontainer.json", "Dev Containers",
               "commands run when a container is made"),
    ToolConfig(".aider.conf.yml", "aider", "lint and test commands it runs"),
)

NAMES: tuple[str, ...] = tuple(t.name for t in TOOL_CONFIGS)


def guarded(allowed: tuple[str, ...] = ()) -> tuple[ToolConfig, ...]:
    """The rows in force: all but those ``[sandbox] allow_tool_configs`` released."""
    return tuple(t for t in TOOL_CONFIGS if t.name not in allowed)


def on_the_way(name: str) -> tuple[str, ...]:
    """The folders a row's path goes through, top first (``.kiro``, ``.kiro/settings``
    for ``.kiro/settings/mcp.json``)."""
    parts = name.split("/")
    return tuple("/".join(parts[:i]) for i in range(1, len(parts)))


def present(project: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The rows' paths that exist in ``project`` as files or real folders. A link is
    left alone here, as is a row reached through one: the box never binds what a link
    points at."""
    out = []
    for t in guarded(allowed):
        p = os.path.join(project, t.name)
        if os.path.lexists(p) and not any(os.path.islink(os.path.join(project, q))
                                          for q in (*on_the_way(t.name), t.name)):
            out.append(p)
    return tuple(out)
