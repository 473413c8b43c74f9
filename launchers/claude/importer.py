"""Claude Code settings -> harness ``[[hooks]]`` entries. Nothing here runs a hook.

A settings file (``~/.claude/settings.json``, ``.claude/settings.json``,
``.claude/settings.local.json``) holds ``hooks: {Event: [{matcher, hooks: [{type,
command, timeout}]}]}``. Each ``PreToolUse`` and ``UserPromptSubmit`` command hook
becomes one entry:

* ``matcher`` -> ``tools`` through :data:`launchers.claude.tools.TOOL_MAP` (a plain name
  or ``|``-list matched exactly, anything else as a regular expression searched in each
  tool name, as Claude Code does; ``*``, empty or absent covers every tool);
* the command string -> an argv (:mod:`launchers.claude.command`);
* a file the argv names that lies in the project or in a folder the box hides gets a
  new place under ``~/.local/share/harness/hooks/`` and the ``mkdir``/``cp`` to put it
  there (:class:`Move`); the entry names the new place;
* ``timeout`` (seconds) is kept within 1–600.

Other events, and hooks that are not commands, are listed as not imported.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from launchers.claude.command import convert
from launchers.claude.files import HOOKS_HOME as HOOKS_HOME
from launchers.claude.files import Move as Move
from launchers.claude.files import Mover
from launchers.claude.files import move_commands as move_commands
from launchers.claude.tools import CLAUDE_TOOLS, MCP_PREFIX, MCP_SAMPLE, TOOL_MAP
from launchers.config import EVENTS, TIMEOUT_MAX, TIMEOUT_MIN
from pathguard.records import NamedTuple

SETTINGS_LIMIT = 4 * 1024 * 1024
_PLAIN = re.compile(r"[A-Za-z0-9_|]*")
_HOOK_KEYS = ("type", "command", "timeout")


class ImportFailed(Exception):
    """A settings file cannot be read; the message names it."""


class Imported(NamedTuple):
    """One converted hook. ``where`` is its place in the settings file
    (``file: hooks.PreToolUse[0].hooks[1]``); ``command`` names moved files at their
    new place; ``original`` is Claude Code's command string."""

    name: str
    event: str
    tools: tuple[str, ...] | None
    command: tuple[str, ...]
    timeout: int | None
    where: str
    matcher: str | None
    original: str
    shell: bool
    moves: tuple[Move, ...] = ()
    words: tuple[str, ...] = ()

    def lint_argv(self) -> tuple[str, ...]:
        """The command as the porting lint reads it: files at their present place, and a
        shell string's absolute words beside the string."""
        back = {m.target: m.source for m in self.moves}
        if self.shell:
            return (*self.command, *(w for w in self.words if w.startswith("/")))
        return tuple(back.get(w, w) for w in self.command)


class Converted(NamedTuple):
    hooks: list[Imported]
    warnings: list[str]


def default_files(home: str, project: str) -> list[str]:
    """Claude Code's settings files, in the order it reads them: the user's, the
    project's, the project's local one."""
    return [os.path.join(home, ".claude", "settings.json"),
            os.path.join(project, ".claude", "settings.json"),
            os.path.join(project, ".claude", "settings.local.json")]


def read_settings(path: str) -> dict[str, Any]:
    """A settings file as JSON. Raises ImportFailed."""
    try:
        with open(path, "rb") as f:
            data = f.read(SETTINGS_LIMIT + 1)
    except OSError as err:
        raise ImportFailed(f"{path}: cannot be read: {err.strerror or err}.") from err
    if len(data) > SETTINGS_LIMIT:
        raise ImportFailed(f"{path}: is larger than {SETTINGS_LIMIT // 1024 // 1024} MiB; "
                           "not a settings file.")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise ImportFailed(f"{path}: not valid JSON: {err}.") from err
    if not isinstance(doc, dict):
        raise ImportFailed(f"{path}: not a settings file (a JSON object).")
    return doc


# -- matcher -> tools ---------------------------------------------------------------


def map_matcher(matcher: str | None) -> tuple[tuple[str, ...] | None, list[str], bool]:
    """(tools, Claude Code names that map to nothing, whether mcp came from a named
    server). tools None: every tool; () nothing here matches."""
    if matcher is None or matcher in ("", "*"):
        return None, [], False
    names = list(TOOL_MAP)
    if _PLAIN.fullmatch(matcher):
        wanted = [p for p in matcher.split("|") if p]
        found = [p for p in wanted if p in TOOL_MAP]
        mcp = [p for p in wanted if p.startswith(MCP_PREFIX)]
        unmapped = [p for p in wanted if p not in TOOL_MAP and p not in mcp]
        tools = [TOOL_MAP[p] for p in found] + (["mcp"] if mcp else [])
        return tuple(dict.fromkeys(tools)), unmapped, bool(mcp)
    try:
        regex = re.compile(matcher)
    except re.error:
        return (), [matcher], False
    found = [n for n in names if regex.search(n)]
    mcp_all = bool(regex.search(MCP_SAMPLE))
    mcp_named = not mcp_all and MCP_PREFIX in matcher
    if len(found) == len(names) and mcp_all:
        return None, [], False
    tools = [TOOL_MAP[n] for n in found] + (["mcp"] if mcp_all or mcp_named else [])
    return tuple(dict.fromkeys(tools)), [], mcp_named


# -- names --------------------------------------------------------------------------


# Programs that run a script named later on the line: a hook is named after the script.
_RUNNERS = re.compile(r"(env|sh|bash|dash|zsh|node|nodejs|bun|deno|npx|uv|uvx|ruby|perl|"
                      r"php|python[0-9.]*|pypy[0-9.]*)")


def _script(words: Sequence[str]) -> str:
    """The word a hook is named after: the first file that is not a runner, else the
    first path-like word, else what a runner runs (``npx prettier`` -> ``npx-prettier``),
    else the program."""
    for w in words:
        if os.path.isfile(w) and not _RUNNERS.fullmatch(os.path.basename(w)):
            return w
    for w in words:
        if "/" in w and not w.startswith(("-", "/dev/")) and not set(w) & set("<>|&;$"):
            return w
    if not words:
        return ""
    program = os.path.basename(words[0])
    if _RUNNERS.fullmatch(program):
        plain = [w for w in words[1:] if re.fullmatch(r"[A-Za-z][\w.@-]*", w)]
        if plain and plain[0] in ("run", "exec", "x", "tool") and len(plain) > 1:
            plain = plain[1:]
        if plain:
            return f"{program}-{plain[0]}"
    return program


def hook_name(words: Sequence[str], taken: set[str]) -> str:
    """A valid, unused name from what the hook runs."""
    base = os.path.splitext(os.path.basename(_script(words)))[0].lower()
    base = re.sub(r"[^a-z0-9_-]+", "-", base).strip("-")[:32] or "claude-hook"
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"-{n}"
        name = base[: 32 - len(suffix)] + suffix
    taken.add(name)
    return name


def settings_project(path: str, home: str, project: str) -> str:
    """The project a settings file belongs to, which its ``$CLAUDE_PROJECT_DIR`` names:
    the folder holding its ``.claude`` folder, unless that is the home folder (the
    user's settings), whose variable means the project being imported for."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder) == ".claude":
        owner = os.path.dirname(folder)
        if owner and os.path.realpath(owner) != os.path.realpath(home):
            return owner
    return project


# -- one settings file ----------------------------------------------------------------


class _Context(NamedTuple):
    file: str
    project: str
    home: str
    mover: Mover
    taken: set[str]


def _timeout(raw: object, where: str, warnings: list[str]) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != raw:
        warnings.append(f"⚠ {where}: timeout {json.dumps(raw)} is not a number of seconds; "
                        "harness's default (30 s) applies.")
        return None
    seconds = max(TIMEOUT_MIN, min(TIMEOUT_MAX, math.ceil(raw) if raw < 1e9 else TIMEOUT_MAX))
    if seconds != raw:
        warnings.append(f"⚠ {where}: timeout {raw:g} s is kept as {seconds} s (harness takes "
                        f"whole seconds from {TIMEOUT_MIN} to {TIMEOUT_MAX}).")
    return seconds


def _one(ctx: _Context, hook: object, *, event: str, matcher: str | None,
         tools: tuple[str, ...] | None, where: str, warnings: list[str]) -> Imported | None:
    if not isinstance(hook, dict):
        warnings.append(f"⚠ {where}: not a hook (a JSON object); not imported.")
        return None
    kind = hook.get("type", "command")
    if kind != "command":
        warnings.append(f"⚠ {where}: a {json.dumps(kind)} hook is not imported; only "
                        "command hooks run here.")
        return None
    text = hook.get("command")
    if not isinstance(text, str) or not text.strip():
        warnings.append(f"⚠ {where}: has no command; not imported.")
        return None
    for key in hook:
        if key == "if":
            warnings.append(f"⚠ {where}: its \"if\" condition is not imported; the hook "
                            "runs for every call of the tools it lists.")
        elif key not in _HOOK_KEYS:
            warnings.append(f"⚠ {where}: key {json.dumps(key)} is not imported.")
    command = convert(text, project=ctx.project, home=ctx.home)
    moves, rewrite = _moves(ctx, command.words, where, warnings)
    named = command.words
    if moves:
        command = convert(text, project=ctx.project, home=ctx.home, rewrite=rewrite)
    return Imported(
        name=hook_name(named, ctx.taken), event=event, tools=tools,
        command=command.argv, timeout=_timeout(hook.get("timeout"), where, warnings),
        where=where, matcher=matcher, original=text, shell=command.shell,
        moves=tuple(dict.fromkeys(moves)), words=tuple(named))


def _moves(ctx: _Context, words: Sequence[str], where: str, warnings: list[str]
           ) -> tuple[list[Move], dict[str, str]]:
    """The moves for the files a command names (a relative one from the project, as
    Claude Code runs hooks there), and the words to write instead."""
    moves: list[Move] = []
    rewrite: dict[str, str] = {}
    for w in words:
        if not w or w.startswith("-") or (not w.startswith("/") and "/" not in w):
            continue
        path = w if w.startswith("/") else os.path.join(ctx.project, w)
        got = ctx.mover.move(path, (ctx.project,))
        if got:
            moves += got
            rewrite[w] = got[0].target
            for u in ctx.mover.unfollowed.pop(path, ()):
                warnings.append(f"⚠ {where}: {path} names {u}, which the import could not "
                                "follow (not in its own folder, or missing); copy what it "
                                "needs by hand.")
        elif not w.startswith("/") and not set(w) & set("<>|&;$'\"\\=") and words[0] == w:
            warnings.append(f"⚠ {where}: {w} is relative and was not found in "
                            f"{ctx.project}; write the path out.")
    return moves, rewrite


def _tools_for(matcher: object, where: str, event: str,
               warnings: list[str]) -> tuple[bool, tuple[str, ...] | None]:
    """(import it?, tools) for a group's matcher, with its warnings."""
    if event == "UserPromptSubmit" or matcher is None:
        return True, None
    if not isinstance(matcher, str):
        warnings.append(f"⚠ {where}: matcher {json.dumps(matcher)} is not a string; "
                        "not imported.")
        return False, None
    tools, unmapped, mcp_named = map_matcher(matcher)
    q = json.dumps(matcher)
    if tools == ():
        warnings.append(f"⚠ {where}: matcher {q} matches no tool here; not imported.")
        return False, None
    if unmapped:
        covers = "every tool" if tools is None else ", ".join(tools)
        warnings.append(f"⚠ {where}: matcher {q}: {', '.join(unmapped)} "
                        f"{'is' if len(unmapped) == 1 else 'are'} not a tool here; the hook "
                        f"covers {covers}.")
    if tools is not None and "bash" in tools and "exec" not in tools:
        warnings.append(f"⚠ {where}: matcher {q} becomes bash; harness also runs commands "
                        "through exec (an argv, no shell), which Claude Code does not have "
                        "and this hook would not see. To cover it too, write tools = "
                        f"{_array(tuple(dict.fromkeys((*tools, 'exec'))))} (the entry "
                        "shows the line).")
    if mcp_named:
        warnings.append(f"⚠ {where}: matcher {q} becomes mcp, which covers every MCP "
                        "server's tools; the hook can tell them apart by tool_input.server "
                        "and tool_input.tool.")
    return True, tools


def _by_tool(path: str, hooks: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The older shape, hooks by tool name (``{"Bash": [...]}``, at the top or under an
    event), read as PreToolUse groups with that name as matcher."""
    out: dict[str, Any] = {}
    for key, value in hooks.items():
        if key in EVENTS and isinstance(value, dict):
            for tool, items in value.items():
                groups = _groups_for(tool, items)
                warnings.append(f"⚠ {path}: hooks.{key}.{tool} is the older settings shape "
                                f"(hooks by tool name); read as {key} with matcher "
                                f"{json.dumps(tool)}.")
                out.setdefault(key, []).extend(groups)
        elif key not in EVENTS and _is_tool(key) and isinstance(value, list):
            warnings.append(f"⚠ {path}: hooks.{key} is the older settings shape (hooks by "
                            f"tool name); read as PreToolUse with matcher {json.dumps(key)}.")
            out.setdefault("PreToolUse", []).extend(_groups_for(key, value))
        else:
            prev = out.get(key)
            both = isinstance(prev, list) and isinstance(value, list)
            out[key] = prev + value if both else value
    return out


def _is_tool(name: str) -> bool:
    """Whether a key of ``hooks`` is a Claude Code tool name (or a ``|``-list of them)."""
    parts = [p for p in name.split("|") if p]
    return name.startswith(MCP_PREFIX) or (bool(parts) and all(p in CLAUDE_TOOLS
                                                                for p in parts))


def _groups_for(matcher: str, items: object) -> list[Any]:
    """Groups for one tool's list: a group stays one; a hook or a command string becomes
    a group of its own with the tool's name as matcher."""
    if not isinstance(items, list):
        items = [items]
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            item = {"type": "command", "command": item}
        if isinstance(item, dict) and isinstance(item.get("hooks"), list):
            out.append({"matcher": item.get("matcher", matcher), **item})
        else:
            out.append({"matcher": matcher, "hooks": [item]})
    return out


def convert_file(path: str, doc: dict[str, Any], ctx: _Context) -> Converted:
    """Every hook of one settings file."""
    out: list[Imported] = []
    warnings: list[str] = []
    hooks = doc.get("hooks")
    if hooks is None:
        return Converted(out, warnings)
    if not isinstance(hooks, dict):
        return Converted(out, [f"⚠ {path}: \"hooks\" is not a JSON object; nothing imported."])
    hooks = _by_tool(path, hooks, warnings)
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            warnings.append(f"⚠ {path}: hooks.{event} is not a list; not imported.")
            continue
        if event not in EVENTS:
            count = sum(len(g.get("hooks") or []) if isinstance(g, dict) else 1
                        for g in groups)
            warnings.append(f"⚠ {path}: {event} is not imported ({count} "
                            f"hook{'' if count == 1 else 's'}): harness has only PreToolUse "
                            "and UserPromptSubmit.")
            continue
        for gi, group in enumerate(groups):
            out += _convert_group(ctx, f"{path}: hooks.{event}[{gi}]", event, group, warnings)
    return Converted(out, warnings)


def _convert_group(ctx: _Context, where: str, event: str, group: Any,
                   warnings: list[str]) -> list[Imported]:
    """Every hook of one matcher group (``where`` names it in a warning)."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        warnings.append(f"⚠ {where}: has no \"hooks\" list; not imported.")
        return []
    matcher = group.get("matcher")
    ok, tools = _tools_for(matcher, where, event, warnings)
    if not ok:
        return []
    out: list[Imported] = []
    for hi, hook in enumerate(group["hooks"]):
        one = _one(ctx, hook, event=event, tools=tools, warnings=warnings,
                   matcher=matcher if isinstance(matcher, str) else None,
                   where=f"{where}.hooks[{hi}]")
        if one is not None:
            out.append(one)
    return out


def convert_files(paths: Sequence[str], *, project: str, home: str,
                  hidden: Sequence[str], taken: Iterable[str] = ()) -> Converted:
    """Every hook of every file, named apart from each other and from ``taken``.
    Raises ImportFailed for a file that cannot be read."""
    ctx = _Context("", project, home, Mover(home, project, hidden), set(taken))
    hooks: list[Imported] = []
    warnings: list[str] = []
    for path in paths:
        got = convert_file(path, read_settings(path), ctx._replace(
            file=path, project=settings_project(path, home, project)))
        hooks += got.hooks
        warnings += got.warnings
    return Converted(hooks, warnings)


# -- TOML -----------------------------------------------------------------------------

SHELL_NOTE = ("# run through /bin/sh: a path inside the -c string is not seen by the check "
              "(best effort),\n# so keep every file it names outside the project.")


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes, and DEL escaped as TOML requires)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _array(values: Iterable[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


def _comment(text: str) -> str:
    # A comment ends at a line break; a control character would end or break it.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def render(hook: Imported) -> str:
    """One ``[[hooks]]`` table, with comments saying where it came from."""
    lines = [f"# {_comment(hook.where)}"
             + (f": matcher {_comment(json.dumps(hook.matcher))}" if hook.matcher else ""),
             f"# {_comment(hook.original)}"]
    if hook.shell:
        lines.append(SHELL_NOTE)
    lines += ["[[hooks]]", f"name = {toml_string(hook.name)}",
              f"event = {toml_string(hook.event)}"]
    if hook.tools is not None:
        lines.append(f"tools = {_array(hook.tools)}")
        if "bash" in hook.tools and "exec" not in hook.tools:
            lines.append(f"# tools = {_array((*hook.tools, 'exec'))}   "
                         "# covers exec (an argv, no shell) as well")
    lines.append(f"command = {_array(hook.command)}")
    if hook.timeout is not None:
        lines.append(f"timeout = {hook.timeout}")
    return "\n".join(lines) + "\n"


def render_all(hooks: Sequence[Imported]) -> str:
    return "\n".join(render(h) for h in hooks)
