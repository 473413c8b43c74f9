"""The user config: discovery, ``[[hooks]]`` and ``[sandbox]`` loading, warnings, banner.

(Types are fixed here; loading is implemented below them.)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, cast

# Re-exported: the [sandbox] table is loaded here, and its type lives in the sandbox.
from launchers.errors import ConfigError as ConfigError
from sandbox.settings import SandboxSettings as SandboxSettings

Event = Literal["PreToolUse", "UserPromptSubmit"]
OnFailure = Literal["block", "continue"]

# harness's own tools, the names a hook's ``tools`` may list.
TOOLS: tuple[str, ...] = (
    "bash", "exec", "read_file", "write_file", "edit_file", "glob", "search",
    "skill", "agent", "script", "mcp", "mcp_schema",
)


class HookSpec(NamedTuple):
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


class Config(NamedTuple):
    """A loaded config. ``path`` is None when no config file exists (no hooks)."""

    path: str | None
    hooks: tuple[HookSpec, ...] = ()
    sandbox: SandboxSettings = SandboxSettings()
    warnings: tuple[str, ...] = ()


# -- discovery ------------------------------------------------------------------------

Source = Literal["HARNESS_HOME", "XDG_CONFIG_HOME", "HOME", "--config"]


class Located(NamedTuple):
    """Where the user config is looked for, and the rule that chose it."""

    path: str
    source: Source


def locate(env: Mapping[str, str], home: str | None = None, *,
           explicit: str | None = None) -> Located | None:
    """The config the rules pick, whether or not the file exists.

    ``--config FILE`` (``explicit``) wins, then ``$HARNESS_HOME/config.toml``, then
    ``$XDG_CONFIG_HOME/harness/config.toml``, then ``~/.config/harness/config.toml``.
    None when no rule applies (no home folder at all).
    """
    if explicit is not None:
        return Located(os.path.abspath(explicit), "--config")
    harness_home = env.get("HARNESS_HOME")
    if harness_home:
        return Located(os.path.abspath(os.path.join(harness_home, "config.toml")),
                       "HARNESS_HOME")
    xdg = env.get("XDG_CONFIG_HOME")
    # The XDG rules ignore a relative value.
    if xdg and os.path.isabs(xdg):
        return Located(os.path.join(xdg, "harness", "config.toml"), "XDG_CONFIG_HOME")
    home = home or env.get("HOME")
    if not home:
        return None
    return Located(os.path.join(home, ".config", "harness", "config.toml"), "HOME")


def discover(env: Mapping[str, str], home: str | None = None) -> str | None:
    """The path of the user config the rules pick (see :func:`locate`)."""
    found = locate(env, home)
    return None if found is None else found.path


# -- loading --------------------------------------------------------------------------

HOOK_KEYS: tuple[str, ...] = (
    "name", "event", "tools", "command", "timeout", "sandbox", "on_failure",
)
SANDBOX_KEYS: tuple[str, ...] = (
    "writable", "hidden", "hide_defaults", "protect", "network", "enabled", "scrub",
    "allow_unix_sockets",
)
EVENTS: tuple[str, ...] = ("PreToolUse", "UserPromptSubmit")
_NAME = re.compile(r"[a-z0-9_-]{1,32}")
_NAME_RULE = '1–32 of a-z, 0-9, "-", "_"'
TIMEOUT_MIN, TIMEOUT_MAX = 1, 600

# Claude Code's tool names, for a warning that points at the tool meant here.
_CLAUDE_TOOLS: dict[str, str] = {
    "bash": "bash", "read": "read_file", "write": "write_file", "edit": "edit_file",
    "multiedit": "edit_file", "glob": "glob", "grep": "search", "task": "agent",
    "skill": "skill",
}

_SUFFIX: dict[str, str] = {
    "HARNESS_HOME": " (it was found through HARNESS_HOME).",
    "XDG_CONFIG_HOME": " (it was found through XDG_CONFIG_HOME).",
    "HOME": " (it was found under your home folder; set HARNESS_HOME to a folder "
            "outside the project).",
    "--config": " (--config names it).",
}


def _a(value: object) -> str:
    """A TOML value's type, as a message names it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def _q(value: object) -> str:
    """A value as it would be written in TOML (strings quoted)."""
    if isinstance(value, str):
        import json

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it, compared by components."""
    p, f = _parts(path), _parts(folder)
    return p[: len(f)] == f


def _parts(path: str) -> list[str]:
    return [c for c in os.path.normpath(path).split("/") if c]


def _inside_project(file: str, project: str) -> bool:
    """The config's folder, as written or where it leads (and the file where it leads),
    is inside the project as written or where it leads."""
    folder = os.path.dirname(file)
    places = {folder, os.path.realpath(folder), os.path.realpath(file)}
    projects = {os.path.abspath(project), os.path.realpath(project)}
    return any(_within(p, q) for p in places for q in projects)


def load(path: str | None, *, project: str, source: Source | None = None) -> Config:
    """Load ``[[hooks]]`` and ``[sandbox]`` from the user config at ``path``.

    A missing file (or ``path`` None) is a config with no hooks. Other top-level tables
    belong to the harness and are not looked at. ``source`` (see :class:`Located`) lets
    the refusal of a config inside the project say how it was found.
    Raises :class:`ConfigError`, one line naming the file, hook and key.
    """
    if path is None:
        return Config(path=None)
    file = os.path.abspath(path)
    if not os.path.lexists(file):
        return Config(path=None)
    if _inside_project(file, project):
        raise ConfigError(
            file,
            f"this config is inside the project ({os.path.abspath(project)}), so the "
            "agent could change it; its hooks and sandbox settings are refused. Keep "
            "the user config outside the project" + _SUFFIX.get(source or "", "."),
        )
    if not os.path.exists(file):
        raise ConfigError(file, f"is a link to {os.path.realpath(file)}, which does not "
                                "exist.")
    # Imported here: a session with no config file (and `run`) need no TOML parser.
    import tomllib

    try:
        with open(file, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(file, f"not valid TOML: {err}.") from err
    except UnicodeDecodeError as err:
        raise ConfigError(file, "not valid TOML: the file is not UTF-8 text.") from err
    except OSError as err:
        raise ConfigError(file, f"cannot be read: {err.strerror or err}.") from err

    warnings: list[str] = []
    hooks = _hooks(file, data.get("hooks"), warnings)
    settings = _sandbox(file, data.get("sandbox"))
    return Config(path=file, hooks=hooks, sandbox=settings, warnings=tuple(warnings))


def _hooks(file: str, raw: object, warnings: list[str]) -> tuple[HookSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(file, f'key "hooks": must be an array of tables ([[hooks]]), '
                                f"not {_a(raw)}.", key="hooks")
    out: list[HookSpec] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(raw, 1):
        if not isinstance(entry, dict):
            raise ConfigError(file, f"must be a table, not {_a(entry)}; write each hook "
                                    "as a [[hooks]] table.", index=index)
        spec = _hook(file, index, entry, first, warnings)
        first[spec.name] = index
        out.append(spec)
    return tuple(out)


_Error = Callable[[str, str], ConfigError]


def _hook(file: str, index: int, entry: dict[str, Any], first: dict[str, int],
          warnings: list[str]) -> HookSpec:
    # The name first, so every later error can name the hook.
    name = _hook_name(file, index, entry, first)

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(file, f'key "{key}": {message}', hook=name, key=key)

    _known_keys(file, name, entry)
    event = _event(entry, error)
    # Checked in this order, so the first problem in the file's terms is the one told.
    tools = _tools(entry, event, name, error, warnings)
    return HookSpec(
        name=name,
        event=event,
        command=_command(entry, error),
        tools=tools,
        timeout=_timeout(entry, error),
        sandbox=_sandbox_key(entry, error),
        on_failure=_on_failure(entry, error),
    )


def _hook_name(file: str, index: int, entry: dict[str, Any], first: dict[str, int]) -> str:
    if "name" not in entry:
        raise ConfigError(file, f'key "name": missing; every hook needs a name of '
                                f"{_NAME_RULE}.", index=index, key="name")
    name = entry["name"]
    if not isinstance(name, str):
        raise ConfigError(file, f'key "name": must be a string, not {_a(name)}.',
                          index=index, key="name")
    if not _NAME.fullmatch(name):
        raise ConfigError(file, f"key \"name\": {_q(name)} is not a valid name; use "
                                f"{_NAME_RULE}.", index=index, key="name")
    if name in first:
        raise ConfigError(file, f'key "name": {_q(name)} is also the name of hook '
                                f"#{first[name]}; each hook needs its own name.",
                          index=index, key="name")
    return name


def _known_keys(file: str, name: str, entry: dict[str, Any]) -> None:
    for key in entry:
        if key in HOOK_KEYS:
            continue
        if key == "matcher":
            hint = 'harness hooks choose tools with tools = ["bash", ...], not matcher.'
        else:
            hint = "a hook's keys are " + ", ".join(HOOK_KEYS) + "."
        raise ConfigError(file, f'unknown key "{key}"; {hint}', hook=name, key=key)


def _event(entry: dict[str, Any], error: _Error) -> Event:
    event = entry.get("event")
    if event is None:
        raise error("event", 'missing; use "PreToolUse" or "UserPromptSubmit".')
    if not isinstance(event, str):
        raise error("event", f'must be "PreToolUse" or "UserPromptSubmit", not {_a(event)}.')
    if event not in EVENTS:
        raise error("event", f'{_q(event)} is not an event here; use "PreToolUse" or '
                             '"UserPromptSubmit".')
    return cast(Event, event)


def _tools(entry: dict[str, Any], event: Event, name: str, error: _Error,
           warnings: list[str]) -> tuple[str, ...] | None:
    if "tools" not in entry:
        return None
    if event != "PreToolUse":
        raise error("tools", "only a PreToolUse hook lists tools; a UserPromptSubmit "
                             "hook runs for every prompt.")
    tools = _strings(entry["tools"], lambda m: error("tools", m))
    if not tools:
        raise error("tools", "the list is empty; leave tools out to cover every tool.")
    warnings.extend(tool_warning(name, tool) for tool in tools if tool not in TOOLS)
    return tools


def _command(entry: dict[str, Any], error: _Error) -> tuple[str, ...]:
    if "command" not in entry:
        raise error("command", "missing; give the program and its arguments as a list, "
                               'such as ["/path/to/hook.sh"].')
    raw_command = entry["command"]
    if isinstance(raw_command, str):
        raise error("command", "must be a list of strings (an argv, run with no shell), "
                               'not a string; write ["/path/to/hook.sh"] or '
                               '["sh", "-c", "..."].')
    command = _strings(raw_command, lambda m: error("command", m))
    if not command:
        raise error("command", "the list is empty; give the program and its arguments, "
                               'such as ["/path/to/hook.sh"].')
    if not command[0]:
        raise error("command", "the program (the first element) is empty.")
    return command


def _timeout(entry: dict[str, Any], error: _Error) -> int:
    timeout = entry.get("timeout", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise error("timeout", f"must be whole seconds from {TIMEOUT_MIN} to "
                               f"{TIMEOUT_MAX}, not {_a(timeout)}.")
    if not TIMEOUT_MIN <= timeout <= TIMEOUT_MAX:
        raise error("timeout", f"{timeout} is out of range; use whole seconds from "
                               f"{TIMEOUT_MIN} to {TIMEOUT_MAX}.")
    return timeout


def _sandbox_key(entry: dict[str, Any], error: _Error) -> bool:
    sandbox = entry.get("sandbox", True)
    if not isinstance(sandbox, bool):
        raise error("sandbox", f"must be true or false, not {_a(sandbox)}.")
    return sandbox


def _on_failure(entry: dict[str, Any], error: _Error) -> OnFailure:
    on_failure = entry.get("on_failure", "block")
    if not isinstance(on_failure, str):
        raise error("on_failure", f'must be "block" or "continue", not {_a(on_failure)}.')
    if on_failure not in ("block", "continue"):
        raise error("on_failure", f'{_q(on_failure)} is not allowed; use "block" or '
                                  '"continue".')
    return cast(OnFailure, on_failure)


def _strings(value: object, error: Callable[[str], ConfigError]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise error(f"must be a list of strings, not {_a(value)}.")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise error(f"element {i} must be a string, not {_a(item)}.")
    return tuple(value)


def tool_warning(hook: str, tool: str) -> str:
    """The start-up warning for a ``tools`` entry that names no tool here."""
    head = f'⚠ hook {hook} lists {_q(tool)}, which is not a tool here; '
    lower = tool.lower()
    if lower in TOOLS:
        return head + f"tool names are lower case, such as {lower}."
    if lower in _CLAUDE_TOOLS:
        return head + f"tool names are lower case, such as {_CLAUDE_TOOLS[lower]}."
    if lower.startswith("mcp__"):
        return head + "an MCP server's tools are called through the mcp tool, so list mcp."
    return head + "the tools are " + ", ".join(TOOLS) + "."


def _sandbox(file: str, raw: object) -> SandboxSettings:
    if raw is None:
        return SandboxSettings()
    if not isinstance(raw, dict):
        raise ConfigError(file, f'key "sandbox": must be a table ([sandbox]), not {_a(raw)}.',
                          key="sandbox")

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(file, f'[sandbox]: key "{key}": {message}', key=key)

    for key in raw:
        if key not in SANDBOX_KEYS:
            raise ConfigError(file, f'[sandbox]: unknown key "{key}"; the keys are '
                                    + ", ".join(SANDBOX_KEYS) + ".", key=key)
    paths = {key: _sandbox_paths(raw, key, error)
             for key in ("writable", "hidden", "allow_unix_sockets")}
    flags: dict[str, bool] = {}
    for key, default in (("hide_defaults", True), ("protect", True), ("network", False),
                         ("enabled", True)):
        value = raw.get(key, default)
        if not isinstance(value, bool):
            raise error(key, f"must be true or false, not {_a(value)}.")
        flags[key] = value
    return SandboxSettings(writable=paths["writable"], hidden=paths["hidden"],
                           scrub=_scrub_names(raw, error),
                           allow_unix_sockets=paths["allow_unix_sockets"], **flags)


def _sandbox_paths(raw: dict[str, Any], key: str, error: _Error) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise error(key, f"must be a list of paths, not {_a(value)}.")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise error(key, f"element {i} must be a string, not {_a(item)}.")
        # A relative path would mean whatever the current folder is at start.
        if not (os.path.isabs(item) or item == "~" or item.startswith("~/")):
            raise error(key, f"{_q(item)} is not an absolute path; write it from / or ~/.")
    return tuple(value)


def _scrub_names(raw: dict[str, Any], error: _Error) -> tuple[str, ...]:
    names = raw.get("scrub", [])
    if not isinstance(names, list):
        raise error("scrub", f"must be a list of environment names, not {_a(names)}.")
    for i, item in enumerate(names, 1):
        if not isinstance(item, str):
            raise error("scrub", f"element {i} must be a string, not {_a(item)}.")
        if not _ENV_PATTERN.fullmatch(item):
            raise error("scrub", f"{_q(item)} is not an environment name; use letters, "
                                 "digits and _, with * or ? for any characters.")
    return tuple(names)


_ENV_PATTERN = re.compile(r"[A-Za-z0-9_*?]+")


# -- the banner -----------------------------------------------------------------------

def banner(config: Config, *, no_hooks: bool = False, boxed: bool = True) -> str:
    """The ``hooks:`` line a session starts with.

    A hook runs on the host when it sets ``sandbox = false`` or the session has no
    sandbox (``boxed`` False, or ``[sandbox] enabled = false``).
    """
    if no_hooks:
        return "hooks: off (--no-hooks)"
    if not config.hooks:
        return "hooks: none"
    boxed_session = boxed and config.sandbox.enabled
    parts: list[str] = []
    for spec in config.hooks:
        if spec.event == "UserPromptSubmit":
            what = "prompts"
        elif spec.tools is None:
            what = "every tool"
        else:
            what = ", ".join(spec.tools)
        if not (spec.sandbox and boxed_session):
            what += ", on the host"
        parts.append(f"{spec.name} ({what})")
    return "hooks: " + " · ".join(parts)
