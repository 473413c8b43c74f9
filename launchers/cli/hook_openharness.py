"""``harness-sandbox hook --openharness FILE EVENT``: one event through ``.oh/config.yaml``
hooks, as a session fires it."""

from __future__ import annotations

import argparse
import json
import os
import uuid
from typing import Any

from launchers import bounded
from launchers.cli.common import JSON_VERSION, load_user_config, policy_error_line, say
from launchers.cli.helptext import EXIT_USAGE
from launchers.config import Config
from launchers.errors import ConfigError, UsageError
from launchers.openharness.config import (
    EVENTS,
    TOOL_EVENTS,
    OhConfig,
    OhConfigError,
    unknown_event,
)
from launchers.openharness.envelope import Context
from launchers.openharness.fire import (
    CommandRunner,
    Result,
    UnreadableInput,
    admit,
    fire,
    session_runner,
)
from launchers.openharness.trust import load


def _say(text: str) -> None:
    say(text, named=True)


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


def cmd_hook_openharness(args: argparse.Namespace) -> int:
    """Fire one event through ``.oh/config.yaml`` hooks.

    Exit 0 allowed, no objection or ask; 1 denied; 2 the file could not be loaded, a
    hook is refused by the path guard, or the box cannot be built; 125 the options are
    wrong; 130 interrupted.
    """
    event: str = args.event
    project = os.path.abspath(getattr(args, "project", None) or ".")
    try:
        user, config, ctx = _prepare(args, project)
    except UsageError as err:
        _say(str(err))
        return EXIT_USAGE
    except (ConfigError, OhConfigError) as err:
        _say(str(err))
        return 2
    if getattr(args, "no_hooks", False):
        return _tell(Result(event), as_json=bool(getattr(args, "json", False)))
    fired = _fire_in_session(args, project, user, config, ctx)
    if isinstance(fired, int):
        return fired
    return _tell(fired, as_json=bool(getattr(args, "json", False)))


def _prepare(args: argparse.Namespace, project: str) -> tuple[Config, OhConfig, Context]:
    """The user config (for its [sandbox] table, which applies to these hooks as to
    [[hooks]]), the openHarness file and the event's context. Raises ConfigError,
    OhConfigError or UsageError."""
    user, _ = load_user_config(getattr(args, "config", None), project,
                               named_must_exist=True)
    config = load(args.openharness)
    event: str = args.event
    if event not in EVENTS:
        raise UsageError(unknown_event(event))
    if event in TOOL_EVENTS and not getattr(args, "tool", None):
        raise UsageError(f"{event} needs --tool NAME")
    try:
        return user, config, context_from_args(args, project)
    except ValueError as err:
        raise UsageError(str(err)) from err


def _fire_in_session(args: argparse.Namespace, project: str, user: Config, config: OhConfig,
                     ctx: Context) -> Result | int:
    """The event fired in the session, or the exit status when it could not be."""
    from launchers.openharness.trust import refuse_store_in_box
    from launchers.placement import check_config
    from sandbox.errors import PolicyError, SandboxError
    from sandbox.session import Session

    event: str = args.event
    try:
        # One event: a box per hook costs less than starting a warm box for it.
        with Session.open(
            project, user.sandbox, boxed=not getattr(args, "no_sandbox", False), warm=False
        ) as session:
            refuse_store_in_box(session.policy)  # the file was checked by load()
            check_config(user, session.policy)
            admitted = admit(config, policy=session.policy)
            for msg in admitted.refusals:
                _say(msg)
            if admitted.refusals:
                return 2
            result, interrupted = _fire_interruptible(
                config, event, ctx, session_runner(session, admitted.hooks))
    except PolicyError as err:
        _say(policy_error_line(err, user))
        return 2
    except (SandboxError, OhConfigError, ConfigError) as err:
        _say(str(err))
        return 2
    if interrupted:
        _say(f"{event}: interrupted; the running hook was ended")
        return 130
    return result


def _tell(result: Result, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"version": JSON_VERSION, **result.to_json()}, ensure_ascii=False))
    else:
        for line in describe(result):
            say(line)  # the one output point: the agent's control characters written out
    return 1 if result.denied else 0
