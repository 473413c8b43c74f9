"""Claude Code's names and harness's: one table, used by the import, the porting lint and
the warning for a ``tools`` entry written in Claude Code's spelling.

A leaf module: it imports nothing, so the config loader can use it at no cost.
"""

from __future__ import annotations

# Claude Code's tool -> harness's tool. Its other tools have no counterpart here.
TOOL_MAP: dict[str, str] = {
    "Bash": "bash",
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Glob": "glob",
    "Grep": "search",
    "Task": "agent",
    "Skill": "skill",
}

# Claude Code's tools that map to nothing here.
UNMAPPED: tuple[str, ...] = (
    "WebFetch", "WebSearch", "NotebookEdit", "NotebookRead", "TodoWrite", "LS",
    "BashOutput", "KillShell", "ExitPlanMode", "SlashCommand",
)

CLAUDE_TOOLS: tuple[str, ...] = (*TOOL_MAP, *UNMAPPED)

# An MCP tool's name in Claude Code: mcp__<server>__<tool>. Here they are all called
# through the one mcp tool.
MCP_PREFIX = "mcp__"
MCP_SAMPLE = "mcp__server__tool"

# tool_input fields that Claude Code's tools send and harness's do not.
CLAUDE_FIELDS: tuple[str, ...] = (
    "file_path", "old_string", "new_string", "notebook_path", "subagent_type",
)


def lower_map() -> dict[str, str]:
    """The table keyed by lower-case name, for a name a user wrote in any case."""
    return {k.lower(): v for k, v in TOOL_MAP.items()}
