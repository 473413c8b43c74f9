"""The porting lint: a hook script written for Claude Code that tests for its tool or
field names.

Here ``tool_name`` is ``bash``, not ``Bash``, and the tools send no ``file_path``, so
such a test never matches: the hook finds nothing and objects to nothing, silently.
The lint reads each file a hook's command names (and a ``sh -c`` string) as text, at
most :data:`READ_LIMIT` bytes, and warns once per line and name. It never runs
anything. Binary files (a NUL in the first block) and comment lines are skipped.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence

from launchers.claude.tools import CLAUDE_FIELDS, CLAUDE_TOOLS, MCP_PREFIX, TOOL_MAP
from pathguard.records import NamedTuple

READ_LIMIT = 256 * 1024
FINDINGS_LIMIT = 5  # per file: past it, one line says how many more
_TOOLS = frozenset(CLAUDE_TOOLS)
_QUOTED = re.compile(r"""(["'`])([^"'`\n]{1,200}?)\1""")
# A case label (``Bash)``, ``Edit|Write)``) or a bash regex (``=~ ^(Edit|Write)$``).
_LABEL = re.compile(r"^\s*\(?\s*([A-Za-z|]+)\s*\)")
_REGEX = re.compile(r"=~\s*\^?\(?([A-Za-z|]+)")
_FIELD = re.compile(r"\b(" + "|".join(CLAUDE_FIELDS) + r")\b")
_MCP = re.compile(r"\b" + MCP_PREFIX)
_COMMENT = ("#", "//", "--", ";")


class Finding(NamedTuple):
    """One line that tests for a Claude Code name: the line number (1-based) and the
    name as written."""

    line: int
    name: str


def _tools_in(text: str) -> list[str]:
    """The Claude Code tool names a pattern such as ``^(Edit|Write)$`` consists of."""
    parts = [p for p in re.sub(r"[\^$()\s]", "", text).split("|") if p]
    if parts and all(p in _TOOLS or p == "*" for p in parts):
        return [p for p in parts if p in _TOOLS]
    return []


# Any name the lint looks for, for one quick pass over a file that has none.
_ANY = re.compile("|".join([*CLAUDE_TOOLS, *CLAUDE_FIELDS, MCP_PREFIX]))


def scan_text(text: str) -> list[Finding]:
    """Every (line, name) in ``text`` that tests for a Claude Code tool or field."""
    out: list[Finding] = []
    if not _ANY.search(text):
        return out
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if not stripped or stripped.startswith(_COMMENT):
            continue
        names: list[str] = []
        for m in _QUOTED.finditer(line):
            names += _tools_in(m.group(2))
        for pattern in (_LABEL, _REGEX):
            m2 = pattern.search(line)
            if m2:
                names += _tools_in(m2.group(1))
        names += [m.group(1) for m in _FIELD.finditer(line)]
        if _MCP.search(line):
            names.append(MCP_PREFIX)
        for name in dict.fromkeys(names):
            out.append(Finding(n, name))
    return out


def read_text(path: str) -> str | None:
    """A regular file's text (its first READ_LIMIT bytes), or None: not a regular file,
    unreadable, or binary. Opened without blocking, so a FIFO cannot stall the lint."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, READ_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def explain(name: str) -> str:
    """What is wrong with a Claude Code name here."""
    if name == MCP_PREFIX:
        return ('tests for a Claude Code MCP tool name ("mcp__…"; here MCP tools are called '
                "through the mcp tool, named in tool_input.server and tool_input.tool)")
    if name in TOOL_MAP:
        return f'tests for the Claude Code tool name "{name}" (the tool here is {TOOL_MAP[name]})'
    if name in _TOOLS:
        return f'tests for the Claude Code tool name "{name}" (no tool here has that name)'
    return f"reads {name}, a Claude Code field that the tools here do not send"


def warning(hook: str, where: str, finding: Finding) -> str:
    """The lint's warning for one finding. ``where`` names the file (or the command)."""
    return (f"⚠ hook {hook}: {where} line {finding.line} {explain(finding.name)}, "
            "so as written it will object to nothing.")


def more_warning(hook: str, where: str, count: int) -> str:
    return f"⚠ hook {hook}: {where} has {count} more such lines."


def _warnings(hook: str, where: str, findings: Sequence[Finding]) -> Iterator[str]:
    for f in findings[:FINDINGS_LIMIT]:
        yield warning(hook, where, f)
    if len(findings) > FINDINGS_LIMIT:
        yield more_warning(hook, where, len(findings) - FINDINGS_LIMIT)


def _display(path: str) -> str:
    # A file name comes from the config, which the agent may have suggested: escaped.
    return path.encode("unicode_escape").decode("ascii") if not path.isprintable() else path


def lint_command(hook: str, argv: Sequence[str], *, project: str,
                 cache: dict[str, list[Finding]] | None = None) -> list[str]:
    """Warnings for one hook's command: each element that is a text file (relative ones
    from the project), and the string of an ``sh -c``."""
    out: list[str] = []
    seen: set[str] = set()
    for i, element in enumerate(argv):
        if i > 0 and argv[i - 1] == "-c" and os.path.basename(argv[0]) in (
                "sh", "bash", "dash", "zsh"):
            out += _warnings(hook, "the -c string", scan_text(element))
            continue
        if not element or element.startswith("-"):
            continue
        path = os.path.join(project, element)
        if path in seen:
            continue
        seen.add(path)
        findings = None if cache is None else cache.get(path)
        if findings is None:
            text = read_text(path)
            findings = [] if text is None else scan_text(text)
            if cache is not None:
                cache[path] = findings
        out += _warnings(hook, _display(path), findings)
    return out


def lint_hooks(hooks: Iterable[tuple[str, Sequence[str]]], *, project: str) -> list[str]:
    """Warnings for (name, argv) pairs; each file is read once."""
    cache: dict[str, list[Finding]] = {}
    out: list[str] = []
    for name, argv in hooks:
        out += lint_command(name, argv, project=project, cache=cache)
    return out


# -- answers Claude Code reads one way and harness another ------------------------------

# Turns a prompt hook's plain text into hook JSON: the hook's argv follows the string
# ($0 "$@"), so the guard still checks its files; its exit status passes through.
TEXT_TO_CONTEXT = ('out=$("$0" "$@") || exit; [ -z "$out" ] || jq -cn --arg c "$out" '
                   "'{hookSpecificOutput: {hookEventName: \"UserPromptSubmit\", "
                   "additionalContext: $c}}'")
_ASK = re.compile(r"""(["'])ask\1""")
_DECISION = re.compile(r"decision", re.I)
_PRINTS = re.compile(r"^\s*(?:echo|printf|cat\s*<<)\b|\bprint\s*\(|console\.log\s*\(|"
                     r"^\s*puts\b|\bsys\.stdout\.write\s*\(|process\.stdout\.write\s*\(")
_TO_STDERR = re.compile(r">&\s*2|file\s*=\s*sys\.stderr|/dev/stderr|>\s*/dev/null")
_ANSWERS = re.compile(r"additionalContext|hookSpecificOutput|[\"']?decision[\"']?\s*[:=]|"
                      r"[\"']continue[\"']")


def _texts(argv: Sequence[str], project: str) -> list[tuple[str, str]]:
    """(where, text) for each text file the command names and a ``-c`` string."""
    out: list[tuple[str, str]] = []
    for i, element in enumerate(argv):
        if i > 0 and argv[i - 1] == "-c":
            out.append(("the -c string", element))
        elif element and not element.startswith("-"):
            path = os.path.join(project, element)
            text = read_text(path) if i > 0 or os.path.basename(path) not in (
                "sh", "bash", "dash", "zsh") else None
            if text is not None and not path.startswith(("/usr/", "/bin/", "/lib")):
                out.append((_display(path), text))
    return out


def ask_line(text: str) -> int | None:
    """The first line that answers ``"ask"`` as a permission decision, or None."""
    if not _DECISION.search(text):
        return None
    for n, line in enumerate(text.splitlines(), 1):
        if _ASK.search(line) and not line.lstrip().startswith(_COMMENT):
            return n
    return None


def plain_text_line(text: str) -> int | None:
    """The first line that prints plain text on stdout, in a script that never prints
    a hook JSON answer; None otherwise."""
    if _ANSWERS.search(text):
        return None
    for n, line in enumerate(text.splitlines(), 1):
        if (_PRINTS.search(line) and not _TO_STDERR.search(line)
                and not line.lstrip().startswith(_COMMENT)):
            return n
    return None


def wrapped(argv: Sequence[str]) -> list[str]:
    """The command with its plain text turned into additionalContext."""
    return ["/bin/sh", "-c", TEXT_TO_CONTEXT, *argv]


def answer_warnings(hook: str, event: str, argv: Sequence[str], *, project: str,
                    command: Sequence[str] | None = None) -> list[str]:
    """Warnings for answers Claude Code reads and harness does not: ``"ask"`` on a
    PreToolUse hook, plain text on a UserPromptSubmit hook. ``argv`` names the files
    to read; ``command`` (default ``argv``) is the entry's command, for the fix."""
    import json

    out: list[str] = []
    if list(argv[:3]) == wrapped([]):
        return out
    for where, text in _texts(argv, project):
        if event == "PreToolUse" and (n := ask_line(text)) is not None:
            out.append(f'⚠ hook {hook}: {where} line {n} answers "ask". Here ask is no '
                       "objection (a hook only ever blocks), so the call goes on with no "
                       'question; to stop such calls answer "deny" (or exit 2) instead.')
        if event == "UserPromptSubmit" and (n := plain_text_line(text)) is not None:
            out.append(f"⚠ hook {hook}: {where} line {n} prints plain text. Claude Code adds "
                       "plain stdout to the prompt; here a prompt hook's stdout must be hook "
                       'JSON, so it fails ("printed output that is not hook JSON") and with '
                       'on_failure = "block" blocks every prompt. Wrap it: command = '
                       f"{json.dumps(wrapped(command or argv), ensure_ascii=False)}, or set "
                       'on_failure = "continue" (its text is then dropped).')
    return out


def lint_answers(hooks: Iterable[tuple[str, str, Sequence[str], Sequence[str]]], *,
                 project: str) -> list[str]:
    """:func:`answer_warnings` for (name, event, argv, command)."""
    return [w for name, event, argv, command in hooks
            for w in answer_warnings(name, event, argv, project=project, command=command)]
