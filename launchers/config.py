"""The user config: discovery, ``[[hooks]]`` and ``[sandbox]`` loading, warnings, banner.

(Types are fixed here; loading is implemented below them.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Event = Literal["PreToolUse", "UserPromptSubmit"]
OnFailure = Literal["block", "continue"]

# harness's own tools, the names a hook's ``tools`` may list.
TOOLS: tuple[str, ...] = (
    "bash", "exec", "read_file", "write_file", "edit_file", "glob", "search",
    "skill", "agent", "script", "mcp", "mcp_schema",
)


@dataclass(frozen=True)
class HookSpec:
    """One ``[[hooks]]`` entry as loaded. ``tools`` is None when omitted (every tool)."""

    name: str
    event: Event
    command: tuple[str, ...]
    tools: tuple[str, ...] | None = None
    timeout: int = 30
    sandbox: bool = True
    on_failure: OnFailure = "block"

    def definition(self) -> dict[str, Any]:
        """The definition as records carry it (and as a resume compares it)."""
        return {
            "name": self.name,
            "event": self.event,
            "command": list(self.command),
            "tools": None if self.tools is None else list(self.tools),
            "timeout": self.timeout,
            "sandbox": self.sandbox,
            "on_failure": self.on_failure,
        }


@dataclass(frozen=True)
class SandboxSettings:
    """The ``[sandbox]`` table."""

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    hide_defaults: bool = True
    protect: bool = True
    network: bool = False
    enabled: bool = True


@dataclass(frozen=True)
class Config:
    """A loaded config. ``path`` is None when no config file exists (no hooks)."""

    path: str | None
    hooks: tuple[HookSpec, ...] = ()
    sandbox: SandboxSettings = SandboxSettings()
    warnings: tuple[str, ...] = ()


class ConfigError(Exception):
    """The config could not be loaded. The message names the file, and the hook and key
    where there is one."""

    def __init__(self, file: str, message: str, *, hook: str | None = None,
                 key: str | None = None) -> None:
        self.file = file
        self.hook = hook
        self.key = key
        self.message = message
        super().__init__(message)
