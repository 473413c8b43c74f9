"""openHarness hooks: ``hooks:`` in ``.oh/config.yaml`` over the same backends.

A second front end beside ``[[hooks]]``. The file is read with PyYAML's safe loader; each
event lists hooks that are a shell command (env mode, or JSON on stdin/stdout with
``jsonIO: true``) or an ``http`` URL that receives the same JSON as a POST. Command
hooks run through the session: on the host (from ``/``, provider keys removed, PATH
pruned) by default, in the box with ``sandbox: true``. Every command hook's words are
checked by pathguard before anything runs, exactly as a ``[[hooks]]`` hook is.

Decisions the openHarness text leaves open, made here:

- ``match`` is for tool events only (:data:`TOOL_EVENTS`); on any other event it is a
  load error, so a filter never silently matches nothing.
- A JSON-I/O hook's exit status gates as in env mode: a nonzero exit on a gating event
  is a deny whatever it printed; with exit 0 its stdout is the answer.
- On a gating event a hook that times out, is killed, cannot start or is cancelled is a
  deny (fail closed). On the other events nothing a hook does changes anything.
- An env-mode exit 0 is a plain "allow": it does not end the run, so every hook of the
  event gets its say. Only ``hookSpecificOutput.decision: "allow"`` short-circuits.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import re
import shlex
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import yaml

from launchers import bounded
from launchers.bounded import one_line
from sandbox.plan import RunResult

if TYPE_CHECKING:
    from pathguard.argv import CommandVerdict
    from sandbox.policy import Policy
    from sandbox.session import Session

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

KEYS: tuple[str, ...] = ("command", "http", "jsonIO", "match", "timeout", "sandbox")

DEFAULT_TIMEOUT_MS = 10_000

# OH_PROMPT is cut to this many bytes of UTF-8 (never inside a character).
PROMPT_ENV_CAP = 8192
# Linux refuses to start a program with any one environment string over 128 KiB
# (MAX_ARG_STRLEN), so the other variables are cut well below it.
ENV_VALUE_CAP = 65536
# A reason is trimmed and cut to its first 2,000 characters, as [[hooks]] reasons are.
REASON_CAP = 2000
# An HTTP hook's reply is read up to this many bytes; past it the reply is malformed.
HTTP_BODY_CAP = 1 << 20

# What a person and the model read when an env-mode prompt hook exits nonzero. Generic on
# purpose: such a hook has no channel for a reason.
PROMPT_BLOCKED = "prompt blocked by hook {label}"

Decision = Literal["allow", "deny", "ask"]


# -- configuration ---------------------------------------------------------------------


class OhConfigError(Exception):
    """``.oh/config.yaml`` could not be loaded. The message names the file and, where
    there is one, the event and the hook's index: ``F: hooks.preToolUse[2]: ...``."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        event: str | None = None,
        index: int | None = None,
    ) -> None:
        self.file = file
        self.event = event
        self.index = index
        self.message = message
        where = file
        if event is not None:
            where += f": hooks.{event}"
            if index is not None:
                where += f"[{index}]"
        super().__init__(one_line(f"{where}: {message}"))


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


# Words sh runs without looking a file up on PATH: keywords and builtins that have no
# program of their own. A command starting with one is checked as arguments of /bin/sh.
SHELL_WORDS: frozenset[str] = frozenset((
    "!", "{", "}", "[[", "]]", "if", "then", "else", "elif", "fi", "case", "esac", "for",
    "select", "while", "until", "do", "done", "in", "function", "time", ".", ":", "break",
    "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
    "times", "trap", "unset", "cd", "alias", "unalias", "read", "wait", "umask", "ulimit",
    "jobs", "fg", "bg", "getopts", "hash", "type", "command", "local", "source",
))

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPERATOR_CHARS = frozenset("();<>|&")


def split_words(command: str) -> list[str]:
    """``command`` split as sh would split words, with ``; | & && || ( ) < > >>`` as
    words of their own. Raises ValueError (an unclosed quote)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def guard_words(command: str) -> tuple[str, ...]:
    """The words of a shell command the path guard checks, first the program.

    Best effort, like every check of a shell string: operators and a redirection's file
    descriptor number are left out (``2>/dev/null`` leaves ``/dev/null``); a leading
    ``NAME=value`` is checked as an argument; a command that starts with a shell word
    (``exit``, ``cd``, ``if`` ...) is checked as arguments of ``/bin/sh``. Only the first
    program is looked up on PATH; later words are checked as arguments are (a word
    naming an existing file, or shaped like a path).
    """
    raw = split_words(command)
    words: list[str] = []
    for i, word in enumerate(raw):
        if word and set(word) <= _OPERATOR_CHARS:
            continue
        following = raw[i + 1] if i + 1 < len(raw) else ""
        before = raw[i - 1] if i > 0 else ""
        if word.isdigit() and following[:1] in ("<", ">"):
            continue  # the 2 of 2>file
        if (word.isdigit() or word == "-") and before[-2:] in (">&", "<&"):
            continue  # the 2 of >&2
        words.append(word)
    assignments: list[str] = []
    while words and _ASSIGNMENT.match(words[0]):
        assignments.append(words.pop(0))
    if not words or words[0] in SHELL_WORDS:
        return ("/bin/sh", *words, *assignments)
    return (words[0], *words[1:], *assignments)


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
    if not isinstance(raw, dict):
        raise OhConfigError(path, "hooks must be a mapping of event names to lists of hooks")
    out: dict[str, tuple[OhHook, ...]] = {}
    for event, entries in raw.items():
        if not isinstance(event, str) or event not in EVENTS:
            raise OhConfigError(path, _unknown_event(event), event=str(event))
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise OhConfigError(path, "must be a list of hooks", event=event)
        out[event] = tuple(_hook(path, event, i, e) for i, e in enumerate(entries))
    return OhConfig(path, out)


def load(path: str) -> OhConfig:
    """Read and check ``path``. Raises :class:`OhConfigError`."""
    try:
        text = bounded.read_capped(path, bounded.CONFIG_BYTES).decode("utf-8")
    except OSError as err:
        raise OhConfigError(path, f"cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise OhConfigError(path, "is not UTF-8 text") from err
    except bounded.BoundsError as err:
        raise OhConfigError(path, f"not loaded: the file {err}") from err
    return parse(text, path)


def _unknown_event(event: object) -> str:
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

    match = entry.get("match")
    if match is not None:
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

    return OhHook(
        event=event,
        index=index,
        command=command,
        http=http,
        json_io=json_io,
        match=match,
        timeout_ms=timeout,
        sandbox=sandbox,
    )


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


# -- what a hook is told ---------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What an event carries. Fields an event does not use are left out of its
    variables and its JSON. ``extra`` adds fields to the JSON (never over the named
    ones)."""

    session_id: str = ""
    model: str = ""
    provider: str = ""
    permission_mode: str = ""
    cwd: str = ""
    tool_name: str = ""
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    tool_output: str = ""
    error_message: str = ""
    prompt: str = ""
    permission_action: str = "ask"
    turn_number: int = 0
    turn_reason: str = "completed"
    extra: Mapping[str, Any] = field(default_factory=dict)


def cut_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, never inside a character.

    NUL characters are dropped first (no environment variable can hold one), and a lone
    surrogate becomes U+FFFD (it has no UTF-8 form).
    """
    data = text.replace("\0", "").encode("utf-8", "replace")
    if len(data) <= limit:
        return data.decode("utf-8")
    # A prefix of valid UTF-8 is valid except, at most, for one cut character at its end.
    return data[:limit].decode("utf-8", "ignore")


def env_vars(event: str, ctx: Context) -> dict[str, str]:
    """The ``OH_*`` variables an env-mode (or any command) hook receives."""
    env = {
        "OH_EVENT": event,
        "OH_SESSION_ID": ctx.session_id,
        "OH_MODEL": ctx.model,
        "OH_PROVIDER": ctx.provider,
        "OH_PERMISSION_MODE": ctx.permission_mode,
    }
    if event in TOOL_EVENTS:
        args = json.dumps(dict(ctx.tool_input), ensure_ascii=False, separators=(",", ":"))
        env["OH_TOOL_NAME"] = ctx.tool_name
        env["OH_TOOL_ARGS"] = args
        env["OH_TOOL_INPUT_JSON"] = args
        env["OH_TOOL_OUTPUT"] = ctx.tool_output
    if event == "postToolUseFailure":
        env["OH_TOOL_ERROR"] = "true"
        env["OH_ERROR_MESSAGE"] = ctx.error_message
    if event == "permissionRequest":
        env["OH_PERMISSION_ACTION"] = ctx.permission_action
    if event in ("turnStart", "turnStop"):
        env["OH_TURN_NUMBER"] = str(ctx.turn_number)
    if event == "turnStop":
        env["OH_TURN_REASON"] = ctx.turn_reason
    out = {k: cut_utf8(v, ENV_VALUE_CAP) for k, v in env.items()}
    if event == "userPromptSubmit":
        out["OH_PROMPT"] = cut_utf8(ctx.prompt, PROMPT_ENV_CAP)
    return out


def envelope(event: str, ctx: Context) -> dict[str, Any]:
    """The camelCase JSON a JSON-I/O hook reads on stdin and an HTTP hook receives.

    ``cwd`` (the project) is added beside openHarness's fields: a host hook starts in
    ``/`` and may need it.
    """
    doc: dict[str, Any] = {k: v for k, v in ctx.extra.items() if isinstance(k, str)}
    doc["event"] = event
    if event == "userPromptSubmit":
        doc["prompt"] = ctx.prompt
    if event in TOOL_EVENTS:
        doc["toolName"] = ctx.tool_name
        doc["toolInput"] = dict(ctx.tool_input)
    if event in ("postToolUse", "postToolUseFailure"):
        doc["toolOutput"] = ctx.tool_output
    if event == "postToolUseFailure":
        doc["toolError"] = True
        doc["errorMessage"] = ctx.error_message
    if event == "permissionRequest":
        doc["permissionAction"] = ctx.permission_action
    if event in ("turnStart", "turnStop"):
        doc["turnNumber"] = ctx.turn_number
    if event == "turnStop":
        doc["turnReason"] = ctx.turn_reason
    doc["sessionId"] = ctx.session_id
    doc["model"] = ctx.model
    doc["provider"] = ctx.provider
    doc["permissionMode"] = ctx.permission_mode
    if ctx.cwd:
        doc["cwd"] = ctx.cwd
    return doc


# -- what a hook answers ---------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One hook's answer, parsed. ``kind`` orders the merge:

    - ``deny``: a deny in ``decision``, ``hookSpecificOutput.decision`` or a legacy
      ``allowed: false``; ends the run.
    - ``allow!``: ``hookSpecificOutput.decision: "allow"``; ends the run.
    - ``ask``: ``hookSpecificOutput.decision: "ask"``.
    - ``allow``: a top-level ``decision: "allow"`` (or an env-mode exit 0).
    - ``none``: no objection and no opinion.
    """

    kind: Literal["deny", "allow!", "ask", "allow", "none"] = "none"
    reason: str | None = None
    additional_context: str | None = None
    # Why the hook counts as failed (timed out, ...), for a warning; None when it ran.
    failure: str | None = None


def _reason(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()[:REASON_CAP]
    return text or None


def parse_answer(data: bytes | str) -> Answer | None:
    """A JSON answer, or None when it is not a JSON object (malformed)."""
    try:
        doc = bounded.loads_json(data, max_bytes=bounded.ANSWER_BYTES)
    except ValueError:  # not JSON, not UTF-8, or past a limit: malformed
        return None
    if not isinstance(doc, dict):
        return None
    decision = doc.get("decision")
    reason = _reason(doc.get("reason"))
    spec = doc.get("hookSpecificOutput")
    if not isinstance(spec, dict):
        spec = {}
    s_decision = spec.get("decision")
    s_reason = _reason(spec.get("reason"))
    context = spec.get("additionalContext")
    context = context if isinstance(context, str) and context else None
    if decision == "deny" or doc.get("allowed") is False:
        return Answer("deny", reason or s_reason, context)
    if s_decision == "deny":
        return Answer("deny", s_reason or reason, context)
    if s_decision == "allow":
        return Answer("allow!", s_reason or reason, context)
    if s_decision == "ask":
        return Answer("ask", s_reason or reason, context)
    if decision == "allow" or doc.get("allowed") is True:
        return Answer("allow", reason, context)
    return Answer("none", None, context)


def _gate(event: str, label: str, code: int, stderr: bytes) -> Answer:
    """The env-mode exit-status gate."""
    if event == "preToolUse":
        if code == 0:
            return Answer("allow")
        said = _reason(stderr.decode("utf-8", "replace"))
        return Answer("deny", said or f"hook {label} exited with code {code}")
    if event == "userPromptSubmit":
        if code == 0:
            return Answer("allow")
        return Answer("deny", PROMPT_BLOCKED.format(label=label))
    if event == "permissionRequest":
        if code == 0:
            return Answer("ask")
        said = _reason(stderr.decode("utf-8", "replace"))
        return Answer("deny", said or f"hook {label} exited with code {code}")
    return Answer("none")


def _failed(label: str, why: str) -> Answer:
    return Answer("deny", f"hook {label} failed ({why})", failure=why)


def _ms(timeout_ms: int) -> str:
    return f"{timeout_ms} ms"


def answer_of_run(hook: OhHook, result: RunResult) -> Answer:
    """What a command hook's run means."""
    label = hook.label
    if result.outcome == "timed_out":
        return _failed(label, f"timed out after {_ms(hook.timeout_ms)}")
    if result.outcome == "cancelled":
        return _failed(label, "cancelled")
    if result.outcome == "failed_to_start":
        return _failed(label, f"could not start: {result.error or 'unknown error'}")
    if result.outcome == "signaled":
        return _failed(label, "was killed by a signal")
    code = result.returncode if result.returncode is not None else -1
    if not hook.json_io or code != 0:
        gate = _gate(hook.event, label, code, result.stderr)
        if code != 0 and hook.event not in GATING_EVENTS:
            return Answer(gate.kind, gate.reason, failure=f"exited with code {code}")
        return gate
    # Malformed (or absent) output is an empty answer: no objection.
    return parse_answer(result.stdout) or Answer("none")


# -- HTTP ------------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer that is not 2xx: refuse it rather than re-send (urllib
    would turn the POST into a GET)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment: a policy server on 127.0.0.1 must be reached directly.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def post_json(
    url: str,
    body: bytes,
    timeout: float,
    cancel: threading.Event | None = None,
) -> tuple[bytes | None, str | None]:
    """POST ``body``; the reply's bytes, or None and why it failed.

    The whole exchange ends by ``timeout`` seconds: urllib's timeout bounds each socket
    wait, the thread join bounds the sum (a server can trickle bytes forever).
    """
    out: list[tuple[bytes | None, str | None]] = []

    def exchange() -> None:
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "harness-sandbox"},
        )
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                status = response.status
                data = response.read(HTTP_BODY_CAP + 1)
            if not 200 <= status < 300:
                out.append((None, f"answered HTTP {status}"))
            elif len(data) > HTTP_BODY_CAP:
                out.append((None, "answered with more than 1 MiB"))
            else:
                out.append((data, None))
        except urllib.error.HTTPError as err:
            out.append((None, f"answered HTTP {err.code}"))
        except urllib.error.URLError as err:
            reason = err.reason
            text = getattr(reason, "strerror", None) or str(reason)
            out.append((None, f"could not be reached: {text}"))
        except TimeoutError:
            out.append((None, "timed out"))
        except OSError as err:
            out.append((None, f"could not be reached: {err.strerror or err}"))
        except Exception as err:  # a malformed status line and the like
            out.append((None, f"answered something that is not HTTP: {err}"))

    worker = threading.Thread(target=exchange, name="oh-http-hook", daemon=True)
    deadline = time.monotonic() + timeout
    worker.start()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        worker.join(min(left, 0.05))
        if not worker.is_alive():
            break
        if cancel is not None and cancel.is_set():
            return None, "cancelled"
    if worker.is_alive() or not out:
        # The thread is abandoned; urllib's own timeout ends it soon after.
        return None, "timed out"
    return out[0]


def answer_of_http(hook: OhHook, data: bytes | None, error: str | None) -> Answer:
    """Every HTTP failure denies: network errors, non-2xx, malformed JSON."""
    label = hook.label
    if error == "timed out":
        return _failed(label, f"timed out after {_ms(hook.timeout_ms)}")
    if error is not None:
        return _failed(label, f"{hook.http} {error}")
    parsed = parse_answer(data or b"")
    if parsed is None:
        return _failed(label, f"{hook.http} answered with malformed JSON")
    return parsed


# -- running ---------------------------------------------------------------------------


class CommandRunner(Protocol):
    """Runs one command hook to its end: boxed (in the project) or on the host."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes,
        timeout: float,
        env_extra: Mapping[str, str],
        boxed: bool,
        cancel: threading.Event | None,
    ) -> RunResult: ...


def session_runner(session: Session) -> CommandRunner:
    """Run command hooks through ``session``: a ``sandbox: true`` hook in its box when
    the session has one, every other hook on the host."""

    def run(
        argv: Sequence[str],
        *,
        stdin: bytes,
        timeout: float,
        env_extra: Mapping[str, str],
        boxed: bool,
        cancel: threading.Event | None,
    ) -> RunResult:
        in_box = boxed and session.policy.sandboxed
        return session.run(
            argv,
            stdin=stdin,
            timeout=timeout,
            cancel=cancel,
            host=not in_box,
            env_extra=env_extra,
        )

    return run


def host_runner(policy: Policy) -> CommandRunner:
    """Run every command hook on the host (no box needed): from ``/``, provider keys
    removed, PATH pruned for a sandboxed session. A ``sandbox: true`` hook is refused:
    this runner has no box to put it in."""
    from sandbox.backends import host
    from sandbox.process import supervisor

    def run(
        argv: Sequence[str],
        *,
        stdin: bytes,
        timeout: float,
        env_extra: Mapping[str, str],
        boxed: bool,
        cancel: threading.Event | None,
    ) -> RunResult:
        if boxed and policy.sandboxed:
            return RunResult(outcome="failed_to_start", error="no box to run a sandbox: true hook")
        plan = host.plan(policy, argv, env_extra=env_extra)
        return supervisor.run(plan, stdin=stdin, timeout=timeout, cancel=cancel)

    return run


@dataclass(frozen=True)
class Result:
    """An event's outcome after its hooks ran.

    ``decision`` is None when no hook gave one, and always None on a non-gating event.
    ``ran`` names each hook that ran, in order; ``decided_by`` the hook whose answer is
    the decision (deny, a hookSpecificOutput allow, or the first ask). ``warnings`` say
    which hooks failed.
    """

    event: str
    decision: Decision | None = None
    reason: str | None = None
    additional_context: str | None = None
    ran: tuple[str, ...] = ()
    decided_by: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def denied(self) -> bool:
        return self.decision == "deny"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "event": self.event,
            "decision": self.decision,
            "reason": self.reason,
            "additionalContext": self.additional_context,
            "ran": list(self.ran),
        }


class UnreadableInput(dict[str, Any]):
    """Tool input that could not be read at all (the ``hook`` command's ``--input`` past
    a limit of :mod:`launchers.bounded`): every hook it reaches fails with ``problem``,
    which denies on a gating event, as input that cannot be given to a hook does."""

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


def _input_problem(ctx: Context) -> str | None:
    """Why the event's input cannot be given to a hook, or None. Iterative: the JSON
    writer recurses, so the limits are checked before it runs."""
    if isinstance(ctx.tool_input, UnreadableInput):
        return f"its tool input {ctx.tool_input.problem}"
    try:
        bounded.copy_json(dict(ctx.tool_input))
        bounded.copy_json(dict(ctx.extra))
    except bounded.BoundsError as err:
        return f"its input {err}"
    return None


def _given(hook: OhHook, ctx: Context) -> tuple[bytes, dict[str, str]]:
    """What a hook is given: its stdin (or HTTP body) and its variables."""
    data = b""
    if hook.http is not None or hook.json_io:
        data = json.dumps(envelope(hook.event, ctx), ensure_ascii=False).encode("utf-8",
                                                                               "replace")
    return data, env_vars(hook.event, ctx)


def run_hook(
    hook: OhHook,
    ctx: Context,
    *,
    runner: CommandRunner,
    cancel: threading.Event | None = None,
) -> Answer:
    """Run one hook and say what its answer is. Input that cannot be given to it (past
    the limits, or not JSON) is a failure: a deny on a gating event."""
    timeout = hook.timeout_ms / 1000
    problem = _input_problem(ctx)
    if problem is None:
        try:
            data, env = _given(hook, ctx)
        except (TypeError, ValueError):  # an integer of more digits than Python writes
            problem = "its input cannot be written as JSON"
    if problem is not None:
        return _failed(hook.label, f"could not be given the event: {problem}")
    if hook.http is not None:
        reply, error = post_json(hook.http, data, timeout, cancel)
        return answer_of_http(hook, reply, error)
    assert hook.command is not None
    result = runner(
        ("/bin/sh", "-c", hook.command),
        stdin=data,
        timeout=timeout,
        env_extra=env,
        boxed=hook.sandbox,
        cancel=cancel,
    )
    return answer_of_run(hook, result)


def fire(
    config: OhConfig,
    event: str,
    ctx: Context,
    *,
    runner: CommandRunner,
    cancel: threading.Event | None = None,
) -> Result:
    """Run ``event``'s hooks in list order and merge their answers.

    The first deny ends the run (later hooks do not run), as does the first
    ``hookSpecificOutput.decision: "allow"``; ``additionalContext`` values join with a
    blank line in list order; "ask" when a hook asked and none denied or allowed; else
    "allow" when a hook allowed, else None. On a non-gating event every matching hook
    runs and the decision stays None.
    """
    if event not in EVENTS:
        raise ValueError(f'unknown openHarness event "{event}"')
    gating = event in GATING_EVENTS
    ran: list[str] = []
    contexts: list[str] = []
    warnings: list[str] = []
    first_ask: tuple[str, Answer] | None = None
    allowed = False

    def result(decision: Decision | None, reason: str | None, by: str | None) -> Result:
        return Result(
            event=event,
            decision=decision,
            reason=reason,
            additional_context="\n\n".join(contexts) if contexts else None,
            ran=tuple(ran),
            decided_by=by,
            warnings=tuple(warnings),
        )

    for hook in config.for_event(event):
        if event in TOOL_EVENTS and not hook.matches(ctx.tool_name):
            continue
        if cancel is not None and cancel.is_set():
            # Nothing more starts; on a gating event an unfinished run is a deny.
            if gating:
                return result("deny", "cancelled", None)
            break
        answer = run_hook(hook, ctx, runner=runner, cancel=cancel)
        ran.append(hook.label)
        if answer.failure is not None:
            warnings.append(f"hook {hook.label} failed ({answer.failure})")
        if not gating:
            continue
        if answer.additional_context:
            contexts.append(answer.additional_context)
        if answer.kind == "deny":
            return result("deny", answer.reason or f"denied by hook {hook.label}", hook.label)
        if answer.kind == "allow!":
            return result("allow", answer.reason, hook.label)
        if answer.kind == "ask" and first_ask is None:
            first_ask = (hook.label, answer)
        if answer.kind == "allow":
            allowed = True
    if first_ask is not None:
        return result("ask", first_ask[1].reason, first_ask[0])
    if allowed:
        return result("allow", None, None)
    return result(None, None, None)


# -- the path guard --------------------------------------------------------------------


def audit_hooks(
    path: str, *, project: str, policy: Policy
) -> list[tuple[str, tuple[str, ...], bool]]:
    """Each command hook of ``path`` as the guard sees it: (label, words, sandbox).

    The words are the command split as a shell would (the run itself uses ``sh -c``);
    HTTP hooks run nothing here and are left out. Raises :class:`OhConfigError`.
    """
    config = load(path)
    return [(h.label, h.words, h.sandbox) for h in config.all_hooks() if h.command is not None]


def check(config: OhConfig, *, project: str, policy: Policy) -> list[tuple[str, CommandVerdict]]:
    """The guard's verdict on every command hook of ``config``.

    A ``sandbox: true`` hook is checked as a boxed ``[[hooks]]`` hook (the box's ``/tmp``
    and hidden folders count), any other as a host hook.
    """
    from launchers.admission import Admission

    admission = Admission(policy)
    out: list[tuple[str, CommandVerdict]] = []
    for hook in config.all_hooks():
        if hook.command is None:
            continue
        _, verdict = admission.check(hook.label, hook.words, sandbox=hook.sandbox)
        out.append((hook.label, verdict))
    return out


def audit(path: str, *, project: str, policy: Policy) -> list[tuple[str, CommandVerdict]]:
    """Load ``path`` and check each command hook. Raises :class:`OhConfigError`."""
    return check(load(path), project=project, policy=policy)


# -- harness-sandbox hook --openharness FILE EVENT --------------------------------------


def _say(text: str) -> None:
    print(f"harness-sandbox: {text}", file=sys.stderr)


def context_from_args(args: argparse.Namespace, project: str) -> Context:
    """The event's context from the ``hook`` command's options. Raises ValueError."""
    tool_input: dict[str, Any] = {}
    raw = getattr(args, "input", None)
    if raw is not None:
        try:
            parsed = bounded.loads_json(raw)
        except bounded.BoundsError as err:
            parsed = UnreadableInput(str(err))
        except ValueError as err:
            raise ValueError(f"--input is not JSON: {err}") from err
        if not isinstance(parsed, dict):
            raise ValueError("--input must be a JSON object")
        tool_input = parsed
    return Context(
        session_id=getattr(args, "session_id", None) or uuid.uuid4().hex,
        permission_mode=getattr(args, "permission_mode", None) or "",
        cwd=project,
        tool_name=getattr(args, "tool", None) or "",
        tool_input=tool_input,
        prompt=getattr(args, "prompt", None) or "",
    )


def describe(result: Result) -> list[str]:
    """The outcome for people, one line each."""
    lines = [f"warning: {w}" for w in result.warnings]
    ran = ", ".join(result.ran) if result.ran else "no hook"
    if result.decision == "deny":
        lines.append(f"{result.event}: denied by {result.decided_by}: {result.reason}")
    elif result.decision == "ask":
        why = f": {result.reason}" if result.reason else ""
        lines.append(f"{result.event}: ask (from {result.decided_by}{why})")
    elif result.decision == "allow":
        lines.append(f"{result.event}: allowed (ran {ran})")
    else:
        lines.append(f"{result.event}: no objection (ran {ran})")
    if result.additional_context:
        lines.append("added context:")
        lines.append(result.additional_context)
    return lines


def _fire_interruptible(
    config: OhConfig, event: str, ctx: Context, runner: CommandRunner
) -> tuple[Result, bool]:
    """Fire so that Ctrl-C cancels the running hook and still waits for its whole tree
    to be ended. Returns the result and whether it was interrupted."""
    from launchers.cli.interrupt import run_interruptible

    return run_interruptible(
        lambda cancel: fire(config, event, ctx, runner=runner, cancel=cancel), "oh-hook-event")


def cmd_hook(args: argparse.Namespace) -> int:
    """Fire one event through ``.oh/config.yaml`` hooks.

    Exit 0 allowed, no objection or ask; 1 denied; 2 the file could not be loaded, the
    options are wrong, a hook is refused by the path guard, or the box cannot be built.
    """
    from sandbox.errors import SandboxError
    from sandbox.session import Session

    path: str = args.openharness
    event: str = args.event
    project = os.path.abspath(getattr(args, "project", None) or ".")
    try:
        config = load(path)
    except OhConfigError as err:
        _say(str(err))
        return 2
    if event not in EVENTS:
        _say(_unknown_event(event))
        return 2
    if event in TOOL_EVENTS and not getattr(args, "tool", None):
        _say(f"{event} needs --tool NAME")
        return 2
    try:
        ctx = context_from_args(args, project)
    except ValueError as err:
        _say(str(err))
        return 2

    if getattr(args, "no_hooks", False):
        result = Result(event)
    else:
        try:
            with Session.open(
                project, settings=None, sandboxed=not getattr(args, "no_sandbox", False)
            ) as session:
                refusals = [
                    msg
                    for _, verdict in check(config, project=project, policy=session.policy)
                    for msg in verdict.refusals
                ]
                if refusals:
                    for msg in refusals:
                        _say(msg)
                    return 2
                result, interrupted = _fire_interruptible(
                    config, event, ctx, session_runner(session))
        except SandboxError as err:
            _say(str(err))
            return 2
        if interrupted:
            _say(f"{event}: interrupted; the running hook was ended")
            return 130

    if getattr(args, "json", False):
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        for line in describe(result):
            print(line, file=sys.stderr)
    return 1 if result.denied else 0
