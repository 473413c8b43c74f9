"""The hook protocol: envelopes in, answers out, and every text the protocol shows.

Pure: nothing here starts a process or touches a file. :mod:`launchers.harness.hooks` runs the
hooks and calls :func:`parse` on each result.

An envelope is one line of JSON (Claude Code's field names, without
``transcript_path`` and never a ``turn_id``) followed by end of file. An answer is
read from the exit status, stderr and stdout:

* exit 2 blocks; stderr is the reason;
* exit 0 with nothing on stdout is no objection;
* exit 0 with a JSON object on stdout is read as Claude Code's hook JSON (a
  ``permissionDecision`` of "deny" blocks on either event: a hook only ever blocks, and
  reading its refusal as no objection would let a prompt through that it meant to stop);
* anything else is a failure, named by its kind ("exited with code 1", ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from launchers import bounded
from launchers.config import Event
from pathguard.records import NamedTuple
from sandbox.plan import RunResult

REASON_LIMIT = 2_000
CONTEXT_LIMIT = 10_000

NO_REASON = "(no reason given)"
NOT_HOOK_JSON = "printed output that is not hook JSON"
KILLED = "was killed by a signal"
SIGNAL_MAX = 64  # the highest signal number Linux delivers (SIGRTMAX)

# -- envelopes ---------------------------------------------------------------------


class EnvelopeError(ValueError):
    """An event cannot be made into an envelope: its input is over a limit of
    :mod:`launchers.bounded` or holds what JSON cannot. ``str()`` is a phrase such as
    "nest deeper than 100 levels" (the subject, "its arguments" or "the prompt", is the
    caller's)."""


def _relative_text(value: str, roots: Sequence[str]) -> str:
    """A whole-string absolute path inside a root, made relative to it.

    Only a string that *is* a path is rewritten: one that merely contains a path (a
    shell command) is left alone, so a hook matching on text sees what the model wrote.
    """
    if not value.startswith("/"):
        return value
    for root in roots:
        if value == root or value.rstrip("/") == root:
            return "."
        if value.startswith(root + "/"):
            return value[len(root) + 1 :] or "."
    return value


def relative_input(tool_input: Mapping[str, Any], project: str | Sequence[str]) -> dict[str, Any]:
    """``tool_input`` with in-project absolute paths made relative to the project.

    ``project`` may name the project both as written and where it leads; the longest
    root is tried first so a nested spelling never leaves a stray prefix. The copy is
    made without recursion; arguments past the limits of :mod:`launchers.bounded`, or
    holding a value JSON cannot, raise :class:`EnvelopeError`.
    """
    roots = [project] if isinstance(project, str) else list(project)
    cleaned = sorted({r.rstrip("/") or "/" for r in roots if r}, key=len, reverse=True)
    # "/" as the project would make every absolute path relative; nobody runs an agent
    # on the whole machine on purpose, and a wrong rewrite would hide paths from hooks.
    cleaned = [r for r in cleaned if r != "/"]
    if not isinstance(tool_input, Mapping):
        raise EnvelopeError(f"are not a JSON object ({type(tool_input).__name__})")
    try:
        out = bounded.copy_json(dict(tool_input), lambda s: _relative_text(s, cleaned))
    except bounded.BoundsError as err:
        raise EnvelopeError(plural(str(err))) from err
    assert isinstance(out, dict)
    return out


def plural(phrase: str) -> str:
    """A phrase of :mod:`launchers.bounded` (singular: "nests ...") said of the
    arguments (plural: "nest ...")."""
    verb, _, rest = phrase.partition(" ")
    verb = {"nests": "nest", "holds": "hold", "is": "are"}.get(verb, verb)
    return f"{verb} {rest}"


def _line(obj: Mapping[str, Any], *, plural: bool = True) -> bytes:
    """``plural``: the error's phrase is about the arguments ("are ..."), else about a
    prompt ("is ...")."""
    try:
        try:
            data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        except UnicodeEncodeError:
            # A string that is not valid Unicode (a lone surrogate) cannot be written as
            # UTF-8; \u escapes keep the line valid JSON.
            data = json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError) as err:
        # An integer of more digits than Python writes, and the like.
        holds = "hold" if plural else "holds"
        raise EnvelopeError(f"{holds} a value that cannot be written as JSON") from err
    if len(data) >= bounded.ENVELOPE_BYTES:
        size = bounded.size_text(bounded.ENVELOPE_BYTES)
        raise EnvelopeError(f"{'are' if plural else 'is'} larger than {size} as JSON")
    return data + b"\n"


def pre_tool_use(
    session_id: str,
    cwd: str,
    permission_mode: str,
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    tool_use_id: str,
    project: str | Sequence[str],
) -> bytes:
    """The PreToolUse envelope: one line of JSON and a newline. Raises
    :class:`EnvelopeError` when the arguments cannot be made into one."""
    return _line({
        "session_id": session_id,
        "hook_event_name": "PreToolUse",
        "cwd": cwd,
        "permission_mode": permission_mode,
        "tool_name": tool_name,
        "tool_input": relative_input(tool_input, project),
        "tool_use_id": tool_use_id,
    })


def user_prompt_submit(session_id: str, cwd: str, permission_mode: str, prompt: str) -> bytes:
    """The UserPromptSubmit envelope: one line of JSON and a newline. Raises
    :class:`EnvelopeError` for a prompt larger than the envelope's limit."""
    return _line({
        "session_id": session_id,
        "hook_event_name": "UserPromptSubmit",
        "cwd": cwd,
        "permission_mode": permission_mode,
        "prompt": prompt,
    }, plural=False)


def mcp_input(server: str, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tool_input`` of an ``mcp`` call: the server, its tool and the arguments."""
    return {"server": server, "tool": tool, "arguments": dict(arguments)}


# -- answers -----------------------------------------------------------------------

AnswerKind = Literal["none", "block", "failure", "interrupted"]


class Answer(NamedTuple):
    """What one hook run said.

    ``none``: no objection (``context`` may hold text for a prompt). ``block``:
    ``reason`` is trimmed and cut, or None when no reason was given. ``failure``:
    ``failure`` is the kind ("timed out after 10 s"). ``interrupted``: the run was
    cancelled (Esc) before it answered.
    """

    kind: AnswerKind
    reason: str | None = None
    failure: str | None = None
    context: str | None = None


def clean_reason(text: Any) -> str | None:
    """Trim and cut a reason; empty or not a string is no reason given."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    return text[:REASON_LIMIT] if text else None


def failure_kind(result: RunResult, timeout: float) -> str | None:
    """The failure kind of a run that did not exit 0 or 2, or None."""
    if result.outcome == "timed_out":
        return f"timed out after {_seconds(timeout)} s"
    if result.outcome == "failed_to_start":
        return f"could not start: {result.error or 'unknown error'}"
    if result.outcome == "signaled":
        return KILLED
    if result.outcome == "exited" and result.returncode not in (0, 2):
        return f"exited with code {result.returncode}"
    return None


def _seconds(timeout: float) -> str:
    return str(int(timeout)) if float(timeout).is_integer() else f"{timeout:g}"


class _NotHookJson(Exception):
    pass


def _field(obj: Mapping[str, Any], key: str, kind: type) -> Any:
    """A known field: absent or null is None; the wrong type makes the answer unusable."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _NotHookJson(key)
    return value


def _read_json(obj: Mapping[str, Any], event: Event) -> Answer:
    # continue: false stops everything in Claude Code; here it is a block.
    cont = _field(obj, "continue", bool)
    stop_reason = _field(obj, "stopReason", str)
    decision = _field(obj, "decision", str)
    reason = _field(obj, "reason", str)
    specific = _field(obj, "hookSpecificOutput", dict) or {}
    permission = _field(specific, "permissionDecision", str)
    permission_reason = _field(specific, "permissionDecisionReason", str)
    context = _field(specific, "additionalContext", str)

    if cont is False:
        return Answer("block", reason=clean_reason(stop_reason))
    if decision == "block":
        return Answer("block", reason=clean_reason(reason))
    if permission == "deny":
        return Answer("block", reason=clean_reason(permission_reason))
    if event == "UserPromptSubmit" and context is not None and context.strip():
        return Answer("none", context=context.strip())
    # allow, ask, approve and every other field: no objection. A hook only ever blocks.
    return Answer("none")


def parse(result: RunResult, event: Event, *, timeout: float, boxed: bool = False) -> Answer:
    """Read one run's answer. ``timeout`` is the hook's, for the failure text.

    ``boxed``: the run was in the box, whose init reports a command killed by signal N
    as exit status 128+N (as a shell does); such a status reads as killed by a signal.
    """
    if boxed and result.outcome == "exited" and result.returncode is not None \
            and 128 < result.returncode <= 128 + SIGNAL_MAX:
        return Answer("failure", failure=KILLED)
    if result.outcome == "cancelled":
        return Answer("interrupted")
    kind = failure_kind(result, timeout)
    if kind is not None:
        return Answer("failure", failure=kind)
    if result.returncode == 2:
        return Answer("block", reason=clean_reason(_decode(result.stderr)))
    out = _decode(result.stdout).strip()
    if not out:
        return Answer("none")
    if result.stdout_capped:
        return Answer("failure", failure=NOT_HOOK_JSON)
    return _read_stdout(out, event)


def _read_stdout(out: str, event: Event) -> Answer:
    """A hook's stdout (exit 0, not empty): hook JSON, or "not hook JSON"."""
    try:
        # Bounded: an answer too large or too deep is not hook JSON either.
        obj = bounded.loads_json(out, max_bytes=bounded.ANSWER_BYTES)
        if not isinstance(obj, dict):
            raise _NotHookJson
        return _read_json(obj, event)
    except (ValueError, _NotHookJson):
        return Answer("failure", failure=NOT_HOOK_JSON)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# -- texts -------------------------------------------------------------------------
# Every text a person or the model reads about a hook, in one place.


def _with_reason(head: str, reason: str | None) -> str:
    return f"{head}: {reason}" if reason else f"{head} {NO_REASON}"


def call_blocked(hook: str, reason: str | None) -> str:
    """The model's text for a call a hook blocked."""
    return _with_reason(f'blocked by the user\'s hook "{hook}"', reason)


def call_failed(hook: str, kind: str) -> str:
    """The model's fixed text for a call blocked because its hook failed."""
    return (
        f'the user\'s hook "{hook}" failed ({kind}), so this call was blocked. '
        "This is not a policy decision: retrying or rephrasing the call will not help. "
        "Tell the user their hook is failing."
    )


def prompt_blocked(hook: str, reason: str | None) -> str:
    """The panel line for a prompt a hook blocked."""
    return _with_reason(f'✗ prompt blocked by hook "{hook}"', reason)


def call_unreadable(problem: str) -> str:
    """The model's text for a call whose arguments cannot be given to the hooks
    (:class:`EnvelopeError`): blocked, since no hook could check it."""
    return (f"this call was blocked before the user's hooks ran: its arguments {problem}, "
            "so no hook could check them.")


def prompt_unreadable(problem: str) -> str:
    """The panel line for a prompt that cannot be given to the hooks."""
    return f"✗ prompt blocked before the user's hooks ran: it {problem}, so no hook could check it"


def prompt_failed(hook: str, kind: str) -> str:
    """The panel line for a prompt blocked because its hook failed."""
    return f'✗ prompt blocked: hook "{hook}" failed ({kind})'


def failing_warning(hook: str, kind: str, event: Event) -> str:
    """The once-per-turn warning for a failing hook with on_failure = "block"."""
    what = "the calls it covers are" if event == "PreToolUse" else "your prompts are"
    return (
        f"⚠ hook {hook} is failing ({kind}), so {what} blocked. "
        'Fix it, set on_failure = "continue", or restart with --no-hooks.'
    )


def continued_warning(hook: str, kind: str, event: Event) -> str:
    """The once-per-turn warning for a failing hook with on_failure = "continue"."""
    what = "call" if event == "PreToolUse" else "prompt"
    return f'⚠ hook {hook} failed ({kind}); on_failure = "continue" let the {what} through.'


def frame_context(hook: str, text: str) -> str:
    """Context as the model reads it, after the prompt."""
    return f'Context from the user\'s hook "{hook}":\n{text}'


def cut_context(hook: str, text: str) -> tuple[str, str | None]:
    """Cut context to its first 10,000 characters; the warning when it was longer."""
    if len(text) <= CONTEXT_LIMIT:
        return text, None
    return text[:CONTEXT_LIMIT], (
        f"⚠ hook {hook} added {len(text):,} characters of context; "
        f"only the first {CONTEXT_LIMIT:,} are kept."
    )


def resume_skipped_warning(hook: str) -> str:
    """A crash resume skips a recorded hook whose definition changed."""
    return (
        f"⚠ hook {hook} is not run in this session: it is changed in your config since "
        "the session was recorded. Resume cleanly to use today's hooks."
    )


def context_row(hook: str, characters: int) -> str:
    """The transcript row for a hook's context."""
    return f"· hook {hook} added context ({characters:,} characters)"


def went_ahead_row(hook: str, kind: str, event: Event) -> str:
    """The transcript row for a failure that on_failure = "continue" let through."""
    what = "call" if event == "PreToolUse" else "prompt"
    return f"· hook {hook} failed ({kind}); the {what} went ahead"


NO_HOOKS_BANNER = "hooks: off (--no-hooks)"


def killed_while_running(event: Event, tool: str | None) -> str:
    """What a resume says about a session killed while a hook ran."""
    if event == "PreToolUse":
        return f"This session was killed before {tool} ran. It never ran."
    return "This session was killed while a prompt hook ran. The prompt was not sent."
