"""The user config: discovery, ``[[hooks]]`` and ``[sandbox]`` loading, warnings, banner.

Each ``[[hooks]]`` key is checked by its own function below; the ``[sandbox]`` table by
:mod:`launchers.sandbox_table`; how values are named in messages, :mod:`launchers.values`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal, cast

from launchers.claude.tools import lower_map

# Re-exported: the config's error and the [sandbox] table's type are part of its interface.
from launchers.errors import ConfigError as ConfigError
from launchers.sandbox_table import sandbox_table
from launchers.values import Error as _Error
from launchers.values import a_type as _a
from launchers.values import as_toml as _q
from launchers.values import strings as _strings
from pathguard.records import NamedTuple
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
EVENTS: tuple[str, ...] = ("PreToolUse", "UserPromptSubmit")
_NAME = r"[a-z0-9_-]{1,32}"  # compiled at its first use (re caches it)
_NAME_RULE = '1–32 of a-z, 0-9, "-", "_"'
TIMEOUT_MIN, TIMEOUT_MAX = 1, 600

# Claude Code's tool names, for a warning that points at the tool meant here.
_CLAUDE_TOOLS: dict[str, str] = lower_map()

_SUFFIX: dict[str, str] = {
    "HARNESS_HOME": " (it was found through HARNESS_HOME).",
    "XDG_CONFIG_HOME": " (it was found through XDG_CONFIG_HOME).",
    "HOME": " (it was found under your home folder; set HARNESS_HOME to a folder "
            "outside the project).",
    "--config": " (--config names it).",
}


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
    # Imported here: a session with no config file needs no TOML parser, and one whose
    # config was parsed before reads the parse that was kept (launchers/configcache.py).
    from launchers import bounded, configcache

    try:
        data = configcache.loads(bounded.read_capped(file, bounded.CONFIG_BYTES))
    except bounded.BoundsError as err:
        raise ConfigError(file, f"not loaded: the file {err}.") from err
    except UnicodeDecodeError as err:
        raise ConfigError(file, "not valid TOML: the file is not UTF-8 text.") from err
    except OSError as err:
        raise ConfigError(file, f"cannot be read: {err.strerror or err}.") from err
    except ValueError as err:
        import tomllib  # loaded already: the parse raised this

        if not isinstance(err, tomllib.TOMLDecodeError):
            raise
        raise ConfigError(file, f"not valid TOML: {err}.") from err

    warnings: list[str] = [near_table_warning(key) for key in data
                           if _one_edit(key, "sandbox") or _one_edit(key, "hooks")]
    hooks = _hooks(file, data.get("hooks"), warnings)
    settings = sandbox_table(file, data.get("sandbox"))
    return Config(path=file, hooks=hooks, sandbox=settings, warnings=tuple(warnings))


def near_table_warning(key: str) -> str:
    """The load warning for a top-level table one edit from ours (``[sandbx]``): the
    harness's own tables are not looked at, but one so near was meant for us."""
    ours = "[sandbox]" if _one_edit(key, "sandbox") else "[[hooks]]"
    return (f"⚠ the config's table {_q(key)} is not read: did you mean {ours}? (tables "
            "other than [[hooks]] and [sandbox] belong to the harness)")


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` is ``b`` but for one letter added, dropped, changed or two
    neighbours swapped (not ``b`` itself)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    return short[i:] == long[i + 1:]


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
    if not re.fullmatch(_NAME, name):
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
        from launchers.command_fixes import suggest_argv  # only on this error

        argv = suggest_argv(raw_command, (), env=os.environ)
        raise error("command", "must be a list of strings (an argv, run with no shell), "
                               f"not a string; write it as an argv: {argv}.")
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
    from launchers.admission import runs_boxed

    boxed_session = boxed and config.sandbox.enabled
    parts: list[str] = []
    for spec in config.hooks:
        if spec.event == "UserPromptSubmit":
            what = "prompts"
        elif spec.tools is None:
            what = "every tool"
        else:
            what = ", ".join(spec.tools)
        if not runs_boxed(spec.sandbox, boxed_session):
            what += ", on the host"
        parts.append(f"{spec.name} ({what})")
    return "hooks: " + " · ".join(parts)
