"""``harness-sandbox audit`` and ``harness-sandbox banner``: the checks a session makes
before it starts, without starting one.

``audit`` loads the user config, builds the session's policy and asks the path guard
about every hook's command: is any file it names somewhere the agent could change, or
(for a boxed hook) somewhere the box hides? Exit 0 when every hook may run, 1 when one
or more is refused, 2 when the config (or the policy it describes) cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pathguard.argv import Refusal
from sandbox.errors import PolicyError
from sandbox.policy import Policy

from .admission import Admission
from .config import Config, ConfigError, banner, load, locate

JSON_VERSION = 1



def _say(text: str) -> None:
    print(text, file=sys.stderr)


def _load(args: argparse.Namespace) -> Config:
    """The user config the command line and the environment name. Raises ConfigError."""
    found = locate(os.environ, explicit=args.config)
    if found is None:
        return Config(path=None)
    return load(found.path, project=args.project, source=found.source)


# -- banner -----------------------------------------------------------------------------


def cmd_banner(args: argparse.Namespace) -> int:
    """Print the ``hooks:`` line on stdout (start-up warnings on stderr)."""
    try:
        config = _load(args)
    except ConfigError as err:
        _say(str(err))
        return 2
    for warning in config.warnings:
        _say(warning)
    print(banner(config, no_hooks=bool(getattr(args, "no_hooks", False)),
                 sandboxed_session=not args.no_sandbox))
    return 0


# -- audit ------------------------------------------------------------------------------


def _refusal_json(r: Refusal) -> dict[str, Any]:
    return {"path": r.path, "reason": r.message, "folder": r.folder, "kind": r.kind}


@dataclass(frozen=True)
class Checked:
    """One hook and the guard's verdict on its command."""

    name: str
    event: str
    tools: tuple[str, ...] | None
    boxed: bool
    argv: tuple[str, ...]
    refusals: tuple[Refusal, ...]
    source: Literal["harness", "openharness"] = "harness"

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "event": self.event,
            "tools": None if self.tools is None else list(self.tools),
            "sandbox": self.boxed,
            "runs": "box" if self.boxed else "host",
            "verdict": "refused" if self.refusals else "ok",
            "command": list(self.argv),
            "refusals": [_refusal_json(r) for r in self.refusals],
        }


def _verdict_line(checked: Sequence[Checked], config: Config, looked_at: str | None) -> str:
    total = len(checked)
    refused = sum(1 for c in checked if c.refusals)
    if total == 0:
        if config.path is None and looked_at is not None:
            return f"audit: no hooks to check ({looked_at} does not exist)"
        return "audit: no hooks to check"
    noun = "hook" if total == 1 else "hooks"
    if refused:
        return f"audit: {refused} of {total} {noun} refused"
    return f"audit: {total} {noun} may run"


def _lint(checked: Sequence[Checked], project: str) -> list[str]:
    """The porting lint: scripts that test for Claude Code's names object to nothing here."""
    from .porting_lint import lint_hooks

    return lint_hooks(((c.name, c.argv) for c in checked if c.source == "harness"),
                      project=project)


def cmd_audit(args: argparse.Namespace) -> int:
    """Check every configured hook before a session. See the module's doc."""
    as_json = bool(args.json)

    def fail(message: str) -> int:
        _say(message)
        if as_json:
            print(json.dumps({"version": JSON_VERSION, "ok": False, "error": message},
                             ensure_ascii=False))
        return 2

    found = locate(os.environ, explicit=args.config)
    try:
        config = (Config(path=None) if found is None
                  else load(found.path, project=args.project, source=found.source))
    except ConfigError as err:
        return fail(str(err))

    settings = config.sandbox
    sandboxed = not (args.no_sandbox or not settings.enabled)
    try:
        policy = Policy.create(
            args.project,
            writable=settings.writable,
            hidden=settings.hidden,
            hide_defaults=settings.hide_defaults,
            protect=settings.protect,
            network=settings.network,
            sandboxed=sandboxed,
        )
    except PolicyError as err:
        # Only the project is checked before [sandbox]'s paths; those name the config.
        about_project = str(err).startswith("the project ")
        where = "" if about_project or config.path is None else f"{config.path}: [sandbox]: "
        return fail(f"{where}{err}.")

    admission = Admission(policy)
    checked: list[Checked] = []
    for spec in config.hooks:
        boxed, v = admission.check(spec.name, spec.command, sandbox=spec.sandbox)
        checked.append(Checked(spec.name, spec.event, spec.tools, boxed, v.argv, v.details))

    if getattr(args, "openharness", None):
        # Imported here: only --openharness pays for the YAML front end.
        from .openharness import OhConfigError, audit_hooks

        try:
            oh_hooks = audit_hooks(os.path.abspath(args.openharness),
                                   project=policy.project, policy=policy)
        except OhConfigError as err:
            return fail(str(err))
        for label, words, sandbox in oh_hooks:
            boxed, v = admission.check(label, tuple(words), sandbox=sandbox)
            checked.append(Checked(label, label.split("[", 1)[0], None, boxed, v.argv,
                                   v.details, source="openharness"))

    ok = not any(c.refusals for c in checked)
    warnings = [*config.warnings, *_lint(checked, policy.project)]
    _say(banner(config, sandboxed_session=sandboxed))
    for warning in warnings:
        _say(warning)
    for c in checked:
        for r in c.refusals:
            _say(r.message)
    _say(_verdict_line(checked, config, found.path if found else None))

    if as_json:
        print(json.dumps({
            "version": JSON_VERSION,
            "config": config.path,
            "project": policy.project,
            "sandbox": policy.sandboxed,
            "hooks": [c.as_json() for c in checked],
            "warnings": warnings,
            "ok": ok,
        }, ensure_ascii=False))
    return 0 if ok else 1
