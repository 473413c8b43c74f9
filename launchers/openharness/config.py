"""openHarness ``.oh/config.yaml``: its ``hooks:`` loaded and checked.

The file is read with PyYAML's safe loader (a repeated key is an error); each event lists
hooks that are a shell command (env mode, or JSON on stdin/stdout with ``jsonIO: true``)
or an ``http`` URL. ``match`` is for tool events only (:data:`TOOL_EVENTS`); on any other
event it is a load error, so a filter never silently matches nothing.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from launchers import bounded
from launchers.errors import OhConfigError as OhConfigError
from launchers.openharness.words import guard_words, split_words

if TYPE_CHECKING:
    pass

# The events, in the order openHarness documents them.
EVENTS: tuple[str, ...] = (
    "sessionStart",
    "sessionEnd",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "userPromptSubmit",
    "permissionRequest",
    "fileChanged",
    "cwdChanged",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "postCompact",
    "configChange",
    "notification",
    "turnStart",
    "turnStop",
)

# Events that carry a tool (OH_TOOL_* variables, toolName/toolInput, and ``match``).
TOOL_EVENTS: tuple[str, ...] = (
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "permissionRequest",
    "fileChanged",
)

# Events whose hooks can change what happens; on every other event hooks only observe.
GATING_EVENTS: tuple[str, ...] = ("preToolUse", "userPromptSubmit", "permissionRequest")

# Events whose hooks may add context (prepended to the prompt): openHarness gives
# ``additionalContext`` a meaning for userPromptSubmit only, so elsewhere it is ignored.
CONTEXT_EVENTS: tuple[str, ...] = ("userPromptSubmit",)

KEYS: tuple[str, ...] = ("command", "http", "jsonIO", "match", "timeout", "sandbox")

DEFAULT_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class OhHook:
    """One entry of ``hooks.<event>``. Exactly one of ``command`` and ``http`` is set."""

    event: str
    index: int
    command: str | None = None
    http: str | None = None
    json_io: bool = False
    match: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    sandbox: bool = False

    @property
    def label(self) -> str:
        return f"{self.event}[{self.index}]"

    @property
    def words(self) -> tuple[str, ...]:
        """The words the path guard checks (see :func:`guard_words`); the run itself
        hands the string to ``/bin/sh -c``."""
        return guard_words(self.command) if self.command is not None else ()

    def matches(self, tool_name: str) -> bool:
        """Whether this hook fires for ``tool_name``. A hook without ``match`` always
        does."""
        return self.match is None or match_tool(self.match, tool_name)


@dataclass(frozen=True)
class OhConfig:
    """The ``hooks:`` of one file, by event, each list in file order."""

    path: str
    hooks: Mapping[str, tuple[OhHook, ...]] = field(default_factory=dict)

    def for_event(self, event: str) -> tuple[OhHook, ...]:
        return self.hooks.get(event, ())

    def all_hooks(self) -> Iterator[OhHook]:
        """Every hook, in file order."""
        for hooks in self.hooks.values():
            yield from hooks


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing a repeated mapping key.

    PyYAML keeps the last of two equal keys without a word; a second ``preToolUse:`` would
    silently drop every hook of the first.
    """


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str | int | float | bool) or key is None:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'duplicate key "{key}"', key_node.start_mark
                )
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _yaml_problem(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        what = err.problem or err.context or "not valid YAML"
        mark = err.problem_mark or err.context_mark
        if mark is not None:
            return f"not valid YAML: {what} (line {mark.line + 1}, column {mark.column + 1})"
        return f"not valid YAML: {what}"
    return f"not valid YAML: {err}"


def parse(text: str, path: str) -> OhConfig:
    """The ``hooks:`` of a config text; ``path`` names it in errors."""
    try:
        # A SafeLoader subclass: plain data only; bounded in size, depth and aliases.
        doc = bounded.loads_yaml(text, _StrictLoader)
    except yaml.YAMLError as err:
        raise OhConfigError(path, _yaml_problem(err)) from err
    except bounded.BoundsError as err:
        raise OhConfigError(path, f"not loaded: the file {err}") from err
    if doc is None:
        return OhConfig(path)
    if not isinstance(doc, dict):
        raise OhConfigError(path, "must be a YAML mapping (with a hooks: key)")
    raw = doc.get("hooks")
    if raw is None:
        # Everything else in the file is openHarness's own settings.
        return OhConfig(path)
    return OhConfig(path, _hooks(path, raw))


def _hooks(path: str, raw: object) -> dict[str, tuple[OhHook, ...]]:
    """The ``hooks:`` mapping, event by event."""
    if not isinstance(raw, dict):
        raise OhConfigError(path, "hooks must be a mapping of event names to lists of hooks")
    out: dict[str, tuple[OhHook, ...]] = {}
    for event, entries in raw.items():
        if not isinstance(event, str) or event not in EVENTS:
            raise OhConfigError(path, unknown_event(event), event=str(event))
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise OhConfigError(path, "must be a list of hooks", event=event)
        out[event] = tuple(_hook(path, event, i, e) for i, e in enumerate(entries))
    return out


def unknown_event(event: object) -> str:
    name = str(event)
    close = difflib.get_close_matches(name, EVENTS, n=1, cutoff=0.7)
    if close:
        return f'unknown event "{name}" (did you mean {close[0]}?)'
    return f'unknown event "{name}"; the events are {", ".join(EVENTS)}'


def _hook(path: str, event: str, index: int, entry: object) -> OhHook:
    def fail(message: str) -> OhConfigError:
        return OhConfigError(path, message, event=event, index=index)

    if not isinstance(entry, dict):
        raise fail("must be a mapping with command or http")
    for key in entry:
        if key not in KEYS:
            raise fail(f'unknown key "{key}"')
    command, http = _command_or_http(entry, fail)
    json_io = entry.get("jsonIO", False)
    if not isinstance(json_io, bool):
        raise fail("jsonIO must be true or false")
    sandbox = entry.get("sandbox", False)
    if not isinstance(sandbox, bool):
        raise fail("sandbox must be true or false")
    if sandbox and http is not None:
        raise fail("sandbox applies to command hooks only")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise fail("timeout must be a whole number of milliseconds greater than 0")
    return OhHook(event=event, index=index, command=command, http=http, json_io=json_io,
                  match=_match(entry, event, fail), timeout_ms=timeout, sandbox=sandbox)


def _command_or_http(entry: dict[str, Any], fail: Callable[[str], OhConfigError]
                     ) -> tuple[str | None, str | None]:
    command = entry.get("command")
    http = entry.get("http")
    if command is not None and http is not None:
        raise fail("has both command and http; give exactly one")
    if command is None and http is None:
        raise fail("needs command or http")
    if command is not None:
        if not isinstance(command, str):
            raise fail("command must be a string (a shell command)")
        if not command.strip():
            raise fail("command is empty")
        try:
            split_words(command)
        except ValueError as err:
            # The path guard needs the words; a string shlex cannot split is one a shell
            # would reject too.
            raise fail(f"command cannot be split into words: {err}") from err
    if http is not None:
        if not isinstance(http, str):
            raise fail("http must be a URL string")
        url = urllib.parse.urlsplit(http)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise fail(f'http must be an http:// or https:// URL, not "{http}"')
    return command, http


def _match(entry: dict[str, Any], event: str, fail: Callable[[str], OhConfigError]
           ) -> str | None:
    match = entry.get("match")
    if match is None:
        return None
    if not isinstance(match, str):
        raise fail("match must be a string")
    if not match:
        raise fail("match is empty")
    if event not in TOOL_EVENTS:
        raise fail(f"match applies only to tool events ({', '.join(TOOL_EVENTS)})")
    if _is_regex(match):
        try:
            re.compile(match[1:-1])
        except re.error as err:
            raise fail(f'match "{match}" is not a valid regular expression: {err}') from err
    return match


# -- match -----------------------------------------------------------------------------


def _is_regex(pattern: str) -> bool:
    return len(pattern) >= 2 and pattern.startswith("/") and pattern.endswith("/")


def match_tool(pattern: str, tool_name: str) -> bool:
    """``/re/`` searches the name; a pattern with ``*``, ``?`` or ``[`` is a glob over
    the whole name; anything else is a substring. All case-sensitive."""
    if _is_regex(pattern):
        return re.search(pattern[1:-1], tool_name) is not None
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(tool_name, pattern)
    return pattern in tool_name
