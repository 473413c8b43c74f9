"""What an openHarness hook is told: the ``OH_*`` variables and the camelCase envelope."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launchers.openharness.config import TOOL_EVENTS

# OH_PROMPT is cut to this many bytes of UTF-8 (never inside a character).
PROMPT_ENV_CAP = 8192
# Linux refuses to start a program with any one environment string over 128 KiB
# (MAX_ARG_STRLEN), so the other variables are cut well below it.
ENV_VALUE_CAP = 65536
# A reason is trimmed and cut to its first 2,000 characters, as [[hooks]] reasons are.
REASON_CAP = 2000
# An HTTP hook's reply is read up to this many bytes; past it the reply is malformed.
HTTP_BODY_CAP = 1 << 20


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
