"""``harness-sandbox hook EVENT``: fire one event through the configured hooks.

It does what a session does for one call or one prompt: load the user config, guard
every hook, open the session's box, run the hooks that cover the event, and print the
outcome. The model's text for a blocked call, the panel line for a blocked prompt and
every warning go to stderr; the framed contexts go to stdout (or, with ``--json``, one
document). Exit 0 not blocked, 1 blocked or interrupted, 2 the config, the options, the
box or the guard stopped it before any hook ran.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

from launchers import bounded
from launchers.cli.common import JSON_VERSION, load_user_config, policy_error_line, say
from launchers.cli.helptext import EXIT_USAGE
from launchers.cli.interrupt import run_interruptible
from launchers.config import ConfigError, Event
from launchers.errors import UsageError
from launchers.harness import protocol
from launchers.harness.hooks import Decision, HookRefused, HookRunner, new_session_id
from launchers.harness.protocol import NO_HOOKS_BANNER

if TYPE_CHECKING:
    import argparse

EVENTS: tuple[Event, ...] = ("PreToolUse", "UserPromptSubmit")


# How the event's fields are named where they are given: the CLI's options, or serve's
# params (docs/serve.md), so that each error names what its user can type.
OPTION_WORDS = {"tool": "--tool NAME", "prompt": "--prompt TEXT", "tool_": "--tool",
                "input": "--input", "prompt_": "--prompt"}
PARAM_WORDS = {"tool": '"tool"', "prompt": '"prompt"', "tool_": '"tool"',
               "input": '"input"', "prompt_": '"prompt"'}


def event_fields(args: argparse.Namespace,
                 words: dict[str, str] = OPTION_WORDS) -> tuple[Event, dict[str, Any]]:
    """The event and its fields from the options. Raises UsageError, naming the fields
    in ``words`` (:data:`OPTION_WORDS` or :data:`PARAM_WORDS`)."""
    event = args.event
    if event not in EVENTS:
        raise UsageError(f"unknown event {event!r}: the events are PreToolUse and "
                         "UserPromptSubmit")
    if event == "PreToolUse":
        if not args.tool:
            raise UsageError(f"PreToolUse needs {words['tool']}")
        if args.prompt is not None:
            raise UsageError(f"{words['prompt_']} is for UserPromptSubmit; PreToolUse "
                             f"takes {words['input']}")
        return "PreToolUse", _tool_fields(args.tool, args.input)
    if args.tool is not None or args.input is not None:
        raise UsageError(f"{words['tool_']} and {words['input']} are for PreToolUse; "
                         f"UserPromptSubmit takes {words['prompt_']}")
    if args.prompt is None:
        raise UsageError(f"UserPromptSubmit needs {words['prompt']}")
    return "UserPromptSubmit", {"prompt": args.prompt}


def _tool_fields(tool: str, text: str | None) -> dict[str, Any]:
    """A call's fields: the tool, and its arguments from ``--input`` (none: ``{}``).
    Raises UsageError."""
    if text is None:
        return {"tool": tool, "input": {}}
    try:
        tool_input = bounded.loads_json(text)
    except bounded.BoundsError as err:
        # Arguments too deep or too large to give to a hook: the runner blocks
        # them (when a hook covers the tool), as it blocks such a call in a session.
        return {"tool": tool, "input": None, "problem": str(err)}
    except ValueError as err:
        raise UsageError(f"--input is not valid JSON: {err}") from err
    if not isinstance(tool_input, dict):
        raise UsageError("--input must be a JSON object (the tool's arguments)")
    return {"tool": tool, "input": tool_input}


def tool_option_warnings(tool: str, named: str = "--tool") -> list[str]:
    """The warning ``--tool`` (serve's ``tool``: ``named``) gets for a name that is no
    tool here, with the fix a config's ``tools`` entry gets for the same name
    (:func:`launchers.config.tool_warning`). Hooks that list tools do not cover it;
    those that list none still run."""
    from launchers.config import TOOLS, tool_warning
    from launchers.values import as_toml

    if tool in TOOLS:
        return []
    _, _, fix = tool_warning("-", tool).partition("which is not a tool here; ")
    fix = fix.replace("so list mcp.", "so name mcp.")
    return [f"⚠ {named} {as_toml(tool)} is not a tool here, so no hook that lists tools "
            f"covers it; {fix}"]


def _fire(runner: HookRunner, event: Event, fields: dict[str, Any], mode: str) -> Decision:
    """Run the event so that Ctrl-C cancels the running hook (the seed's Esc) and still
    waits for its whole tree to be ended."""

    decision, _ = run_interruptible(
        lambda cancel: fire_event(runner, event, fields, mode, cancel), "hook-event")
    return decision


def fire_event(runner: HookRunner, event: Event, fields: dict[str, Any], mode: str,
               cancel: threading.Event, *, session_id: str | None = None,
               tool_use_id: str | None = None) -> Decision:
    """The event through the runner, with the fields :func:`event_fields` gives."""
    if event == "PreToolUse" and fields.get("problem"):
        return runner.refuse_call(fields["tool"], protocol.plural(fields["problem"]))
    if event == "PreToolUse":
        return runner.pre_tool_use(fields["tool"], fields["input"],
                                   tool_use_id=tool_use_id or new_session_id(),
                                   permission_mode=mode,
                                   session_id=session_id, cancel=cancel)
    return runner.user_prompt_submit(fields["prompt"], permission_mode=mode,
                                     session_id=session_id, cancel=cancel)


def document(event: str | None, *, outcome: str, warnings: list[str],
              decision: Decision | None = None, error: str | None = None,
              refusals: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The one ``--json`` document, whatever happened. ``outcome`` is allowed, blocked,
    interrupted, refused (a hook file lies where the agent could change it) or error
    (the config, the options or the box)."""
    d = decision
    return {
        "version": JSON_VERSION,
        "event": event,
        "outcome": outcome,
        "message": d.message if d else None,
        "contexts": d.contexts if d else [],
        "warnings": warnings,
        "hook": d.hook if d else None,
        "failures": [f.as_json() for f in d.failures] if d else [],
        "refusals": refusals or [],
        "error": error,
    }


def cmd_hook(args: argparse.Namespace) -> int:
    if getattr(args, "openharness", None):
        from launchers.cli.hook_openharness import cmd_hook_openharness

        return cmd_hook_openharness(args)

    from launchers.placement import check_config
    from sandbox.errors import PolicyError, SandboxError
    from sandbox.session import Session

    def stop(event: str | None, message: str, status: int = 2, **doc: Any) -> int:
        _stop(event, message, warnings, as_json=bool(args.json), **doc)
        return status

    project = os.path.abspath(args.project or ".")
    warnings: list[str] = []
    try:
        event, fields = event_fields(args)
        config, found = load_user_config(args.config, project, named_must_exist=True)
    except (UsageError, ConfigError) as err:
        return stop(args.event if args.event in EVENTS else None, str(err),
                    status=EXIT_USAGE if isinstance(err, UsageError) else 2)
    warnings += config.warnings
    if event == "PreToolUse":
        warnings += tool_option_warnings(fields["tool"])
    for warning in warnings:
        say(warning)
    no_hooks = bool(args.no_hooks)
    if no_hooks:
        say(NO_HOOKS_BANNER)

    try:
        # One event: a box per hook costs less than starting a warm box for it.
        with Session.open(project, config.sandbox, boxed=not args.no_sandbox,
                          warm=False) as session:
            check_config(config, session.policy, found.source if found else None)
            runner = HookRunner(config, session, no_hooks=no_hooks,
                                session_id=args.session_id or new_session_id())
            decision = _fire(runner, event, fields, args.permission_mode)
    except HookRefused as err:
        return stop(event, "\n".join(err.messages), outcome="refused", refusals=[
            {"hook": hook, "path": r.path, "reason": r.message, "folder": r.folder,
             "kind": r.kind} for hook, r in err.details])
    except PolicyError as err:
        return stop(event, policy_error_line(err, config))
    except (ConfigError, SandboxError) as err:  # ConfigError: where the config lies
        return stop(event, str(err))

    return _tell(decision, event, warnings, as_json=bool(args.json))


def _stop(event: str | None, message: str, warnings: list[str], *, as_json: bool,
          **doc: Any) -> int:
    """Stop before any hook ran (exit 2; a usage error 125): the line on stderr, and
    with --json the document."""
    say(message)
    if as_json:
        doc.setdefault("outcome", "error")
        doc.setdefault("error", None if doc["outcome"] == "refused" else message)
        print(json.dumps(document(event, warnings=warnings, **doc), ensure_ascii=False))
    return 2


def _tell(decision: Decision, event: Event, warnings: list[str], *, as_json: bool) -> int:
    """The outcome: the texts for people on stderr (each failure's stderr tail and hints
    beside the seed's), the contexts (or one JSON document) on stdout; the exit status."""
    for warning in decision.warnings:
        say(warning)
    for failure in decision.failures:
        for line in failure.lines():
            say(line)
    if decision.outcome == "interrupted":
        say(f"interrupted while hook {decision.hook} ran; nothing was sent")
    elif decision.message is not None:
        say(decision.message)
    if as_json:
        print(json.dumps(document(event, outcome=decision.outcome, decision=decision,
                                   warnings=warnings + decision.warnings), ensure_ascii=False))
    else:
        for context in decision.contexts:
            print(context)
    return 0 if decision.outcome == "allowed" else 1
