"""What an openHarness hook's answer means: its exit status, its JSON, its HTTP reply.

- A JSON-I/O hook's exit status gates as in env mode: a nonzero exit on a gating event
  is a deny whatever it printed; with exit 0 its stdout is the answer.
- On a gating event a hook that times out, is killed, cannot start or is cancelled is a
  deny (fail closed). On the other events nothing a hook does changes anything.
- An env-mode exit 0 is a plain "allow": it does not end the run, so every hook of the
  event gets its say. Only ``hookSpecificOutput.decision: "allow"`` short-circuits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from launchers.openharness.config import GATING_EVENTS, OhHook
from sandbox.plan import RunResult

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


@dataclass(frozen=True)
class OhAnswer:
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


def parse_answer(data: bytes | str) -> OhAnswer | None:
    """A JSON answer, or None when it is not a JSON object (malformed)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
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
        return OhAnswer("deny", reason or s_reason, context)
    if s_decision == "deny":
        return OhAnswer("deny", s_reason or reason, context)
    if s_decision == "allow":
        return OhAnswer("allow!", s_reason or reason, context)
    if s_decision == "ask":
        return OhAnswer("ask", s_reason or reason, context)
    if decision == "allow" or doc.get("allowed") is True:
        return OhAnswer("allow", reason, context)
    return OhAnswer("none", None, context)


def _gate(event: str, label: str, code: int, stderr: bytes) -> OhAnswer:
    """The env-mode exit-status gate."""
    if event == "preToolUse":
        if code == 0:
            return OhAnswer("allow")
        said = _reason(stderr.decode("utf-8", "replace"))
        return OhAnswer("deny", said or f"hook {label} exited with code {code}")
    if event == "userPromptSubmit":
        if code == 0:
            return OhAnswer("allow")
        return OhAnswer("deny", PROMPT_BLOCKED.format(label=label))
    if event == "permissionRequest":
        if code == 0:
            return OhAnswer("ask")
        said = _reason(stderr.decode("utf-8", "replace"))
        return OhAnswer("deny", said or f"hook {label} exited with code {code}")
    return OhAnswer("none")


def _failed(label: str, why: str) -> OhAnswer:
    return OhAnswer("deny", f"hook {label} failed ({why})", failure=why)


def _ms(timeout_ms: int) -> str:
    return f"{timeout_ms} ms"


def answer_of_run(hook: OhHook, result: RunResult) -> OhAnswer:
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
            return OhAnswer(gate.kind, gate.reason, failure=f"exited with code {code}")
        return gate
    # Malformed (or absent) output is an empty answer: no objection.
    return parse_answer(result.stdout) or OhAnswer("none")


def answer_of_http(hook: OhHook, data: bytes | None, error: str | None) -> OhAnswer:
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
