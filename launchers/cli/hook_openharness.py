"""``harness-sandbox hook --openharness FILE EVENT``: one event through ``.oh/config.yaml``
hooks, as a session fires it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any

from launchers.cli.common import JSON_VERSION, load_user_config, policy_error_line, say
from launchers.errors import ConfigError
from launchers.openharness.config import (
    EVENTS,
    TOOL_EVENTS,
    OhConfig,
    OhConfigError,
    load,
    unknown_event,
)
from launchers.openharness.envelope import Context
from launchers.openharness.fire import CommandRunner, Result, check, fire, session_runner


def _say(text: str) -> None:
    say(text, named=True)


def context_from_args(args: argparse.Namespace, project: str) -> Context:
    """The event's context from the ``hook`` command's options. Raises ValueError."""
    tool_input: dict[str, Any] = {}
    raw = getattr(args, "input", None)
    if raw is not None:
        try:
            parsed = json.loads(raw)
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


def cmd_hook_openharness(args: argparse.Namespace) -> int:
    """Fire one event through ``.oh/config.yaml`` hooks.

    Exit 0 allowed, no objection or ask; 1 denied; 2 the file could not be loaded, the
    options are wrong, a hook is refused by the path guard, or the box cannot be built.
    """
    from sandbox.errors import PolicyError, SandboxError
    from sandbox.session import Session

    path: str = args.openharness
    event: str = args.event
    project = os.path.abspath(getattr(args, "project", None) or ".")
    try:
        # The user config's [sandbox] table applies to these hooks as to [[hooks]].
        user, _ = load_user_config(getattr(args, "config", None), project)
        config = load(path)
    except (ConfigError, OhConfigError) as err:
        _say(str(err))
        return 2
    if event not in EVENTS:
        _say(unknown_event(event))
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
                project, user.sandbox, boxed=not getattr(args, "no_sandbox", False)
            ) as session:
                refusals = [
                    msg
                    for _, verdict in check(config, policy=session.policy)
                    for msg in verdict.refusals
                ]
                if refusals:
                    for msg in refusals:
                        _say(msg)
                    return 2
                result, interrupted = _fire_interruptible(
                    config, event, ctx, session_runner(session))
        except PolicyError as err:
            _say(policy_error_line(err, user))
            return 2
        except SandboxError as err:
            _say(str(err))
            return 2
        if interrupted:
            _say(f"{event}: interrupted; the running hook was ended")
            return 130

    if getattr(args, "json", False):
        print(json.dumps({"version": JSON_VERSION, **result.to_json()}, ensure_ascii=False))
    else:
        for line in describe(result):
            print(line, file=sys.stderr)
    return 1 if result.denied else 0
