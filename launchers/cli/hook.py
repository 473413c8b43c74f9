"""``harness-sandbox hook EVENT``: fire one event through the configured hooks.

It does what a session does for one call or one prompt: load the user config, guard
every hook, open the session's box, run the hooks that cover the event, and print the
outcome. The model's text for a blocked call, the panel line for a blocked prompt and
every warning go to stderr; the framed contexts go to stdout (or, with ``--json``, one
document). Exit 0 not blocked, 1 blocked or interrupted, 2 the config, the options, the
box or the guard stopped it before any hook ran.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from typing import Any

from launchers.cli.common import JSON_VERSION, load_user_config, policy_error_line, say
from launchers.cli.interrupt import run_interruptible
from launchers.config import ConfigError, Event
from launchers.errors import UsageError
from launchers.hooks import Decision, HookRefused, HookRunner, new_session_id
from launchers.protocol import NO_HOOKS_BANNER

EVENTS: tuple[Event, ...] = ("PreToolUse", "UserPromptSubmit")





def _event(args: argparse.Namespace) -> tuple[Event, dict[str, Any]]:
    """The event and its fields from the options. Raises UsageError."""
    event = args.event
    if event not in EVENTS:
        raise UsageError(f"unknown event {event!r}: the events are PreToolUse and "
                         "UserPromptSubmit")
    if event == "PreToolUse":
        if not args.tool:
            raise UsageError("PreToolUse needs --tool NAME")
        if args.prompt is not None:
            raise UsageError("--prompt is for UserPromptSubmit; PreToolUse takes --input")
        tool_input: Any = {}
        if args.input is not None:
            try:
                tool_input = json.loads(args.input)
            except ValueError as err:
                raise UsageError(f"--input is not valid JSON: {err}") from err
            if not isinstance(tool_input, dict):
                raise UsageError("--input must be a JSON object (the tool's arguments)")
        return "PreToolUse", {"tool": args.tool, "input": tool_input}
    if args.tool is not None or args.input is not None:
        raise UsageError("--tool and --input are for PreToolUse; UserPromptSubmit takes "
                         "--prompt")
    if args.prompt is None:
        raise UsageError("UserPromptSubmit needs --prompt TEXT")
    return "UserPromptSubmit", {"prompt": args.prompt}


def _fire(runner: HookRunner, event: Event, fields: dict[str, Any], mode: str) -> Decision:
    """Run the event so that Ctrl-C cancels the running hook (the seed's Esc) and still
    waits for its whole tree to be ended."""

    def work(cancel: threading.Event) -> Decision:
        if event == "PreToolUse":
            return runner.pre_tool_use(fields["tool"], fields["input"],
                                       tool_use_id=new_session_id(), permission_mode=mode,
                                       cancel=cancel)
        return runner.user_prompt_submit(fields["prompt"], permission_mode=mode, cancel=cancel)

    decision, _ = run_interruptible(work, "hook-event")
    return decision


def cmd_hook(args: argparse.Namespace) -> int:
    if getattr(args, "openharness", None):
        from launchers.cli.hook_openharness import cmd_hook_openharness

        return cmd_hook_openharness(args)

    from sandbox.errors import PolicyError, SandboxError
    from sandbox.session import Session

    project = os.path.abspath(args.project or ".")
    try:
        event, fields = _event(args)
        config, _ = load_user_config(args.config, project)
    except (UsageError, ConfigError) as err:
        say(str(err))
        return 2
    for warning in config.warnings:
        say(warning)
    no_hooks = bool(args.no_hooks)
    if no_hooks:
        say(NO_HOOKS_BANNER)

    try:
        with Session.open(project, config.sandbox, boxed=not args.no_sandbox) as session:
            runner = HookRunner(config, session, no_hooks=no_hooks,
                                session_id=args.session_id or new_session_id())
            decision = _fire(runner, event, fields, args.permission_mode)
    except HookRefused as err:
        for message in err.messages:
            say(message)
        return 2
    except PolicyError as err:
        say(policy_error_line(err, config))
        return 2
    except SandboxError as err:
        say(str(err))
        return 2

    return _tell(decision, event, as_json=bool(args.json))


def _tell(decision: Decision, event: Event, *, as_json: bool) -> int:
    """The outcome: the texts for people on stderr, the contexts (or one JSON document)
    on stdout; the exit status."""
    for warning in decision.warnings:
        say(warning)
    if decision.outcome == "interrupted":
        say(f"interrupted while hook {decision.hook} ran; nothing was sent")
    elif decision.message is not None:
        say(decision.message)
    if as_json:
        print(json.dumps({
            "version": JSON_VERSION,
            "event": event,
            "outcome": decision.outcome,
            "message": decision.message,
            "contexts": decision.contexts,
            "warnings": decision.warnings,
            "hook": decision.hook,
        }, ensure_ascii=False))
    else:
        for context in decision.contexts:
            print(context)
    return 0 if decision.outcome == "allowed" else 1
