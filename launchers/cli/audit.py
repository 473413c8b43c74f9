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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from launchers.admission import Admission
from launchers.cli.common import JSON_VERSION, load_user_config, policy_error_line, say
from launchers.config import Config, ConfigError, HookSpec, banner
from launchers.placement import check_config
from pathguard.argv import Refusal
from sandbox.errors import PolicyError
from sandbox.policy import Policy
from sandbox.session.selfguard import SelfGuardError
from sandbox.session.selfguard import check as check_self

# -- banner -----------------------------------------------------------------------------


def cmd_banner(args: argparse.Namespace) -> int:
    """Print the ``hooks:`` line on stdout (start-up warnings on stderr)."""
    try:
        config, _ = load_user_config(args.config, args.project)
    except ConfigError as err:
        say(str(err))
        return 2
    for warning in config.warnings:
        say(warning)
    print(banner(config, no_hooks=bool(getattr(args, "no_hooks", False)),
                 boxed=not args.no_sandbox))
    if not args.no_sandbox and config.sandbox.enabled:
        from sandbox.dispatch import weaker_line

        line = weaker_line(config.sandbox.box)
        if line is not None:  # a box that gives something up here is never silent
            print(line)
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
            "event": self.event or None,
            "tools": None if self.tools is None else list(self.tools),
            "sandbox": self.boxed,
            "runs": "nothing" if not self.event else "box" if self.boxed else "host",
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
    from launchers.claude.lint import lint_answers, lint_hooks

    ours = [c for c in checked if c.source == "harness"]
    return [*lint_hooks(((c.name, c.argv) for c in ours), project=project),
            *lint_answers(((c.name, c.event, c.argv, c.argv) for c in ours), project=project)]


def cmd_audit(args: argparse.Namespace) -> int:
    """Check every configured hook before a session. See the module's doc."""
    as_json = bool(args.json)

    def fail(message: str) -> int:
        say(message)
        if as_json:
            print(json.dumps({"version": JSON_VERSION, "ok": False, "error": message},
                             ensure_ascii=False))
        return 2

    try:
        config, found = load_user_config(args.config, args.project)
    except ConfigError as err:
        return fail(str(err))
    try:
        policy = Policy.from_settings(args.project, config.sandbox, boxed=not args.no_sandbox)
        check_self(policy)
        check_config(config, policy, found.source if found else None)
    except (SelfGuardError, ConfigError) as err:
        return fail(str(err))
    except PolicyError as err:
        return fail(policy_error_line(err, config))
    openharness = getattr(args, "openharness", None)
    if openharness:
        # Imported here: only --openharness pays for the YAML front end.
        from launchers.openharness.config import OhConfigError

        try:
            checked = check_hooks(config, policy, openharness)
        except OhConfigError as err:
            return fail(str(err))
    else:
        checked = check_hooks(config, policy)
    return _tell(checked, config, policy, found.path if found else None, as_json=as_json)


def check_hooks(config: Config, policy: Policy, openharness: str | None = None
                ) -> list[Checked]:
    """The guard's verdict on every hook of ``config`` (and of the openHarness file
    ``openharness``) under ``policy``, and whether each could start. Raises
    OhConfigError."""
    admission = Admission(policy)
    no_box = _no_box(policy) if any(admission.boxed(s.sandbox) for s in config.hooks) else None
    checked = [_check_harness(admission, spec, no_box) for spec in config.hooks]
    if openharness:
        checked += _check_openharness(admission, os.path.abspath(openharness))
    return checked


def _no_box(policy: Policy) -> str | None:
    """Why the session's box cannot be built here, or None."""
    from sandbox.dispatch import choose
    from sandbox.errors import SandboxUnavailable

    try:
        choose(policy).check()
    except SandboxUnavailable as err:
        return str(err)
    return None


def _check_harness(admission: Admission, spec: HookSpec, no_box: str | None) -> Checked:
    """The guard's verdict, and whether the hook could start: its program executable
    (see launchers/startable.py) and, for a boxed hook, the box buildable."""
    from launchers.startable import start_problem

    boxed, v = admission.check(spec.name, spec.command, sandbox=spec.sandbox)
    details = v.details
    if not details and v.argv:
        problem = start_problem(spec.name, v.argv[0])
        details = () if problem is None else (problem,)
    if boxed and no_box is not None:
        details += (Refusal("", f"hook {spec.name}: runs in the box, which cannot be built "
                            f"here: {no_box}. Fix that, or set sandbox = false for this "
                            "hook.", "no-box"),)
    return Checked(spec.name, spec.event, spec.tools, boxed, v.argv, details)


def _check_openharness(admission: Admission, path: str) -> list[Checked]:
    """Every command hook of an openHarness file (an HTTP hook runs nothing here).
    A file whose content is not trusted is one refused entry (``kind: "untrusted"``):
    nothing of it is checked, since nothing of it may run. Raises OhConfigError."""
    from launchers.openharness.trust import Untrusted, untrusted_refusal
    from launchers.openharness.trust import load as load_openharness

    try:
        config = load_openharness(path, policy=admission.policy)
    except Untrusted as err:
        return [Checked(path, "", None, False, (), (untrusted_refusal(err),),
                        source="openharness")]
    out: list[Checked] = []
    for hook in config.all_hooks():
        if hook.command is None:
            continue
        boxed, v = admission.check(hook.label, hook.words, sandbox=hook.sandbox)
        out.append(Checked(hook.label, hook.event, None, boxed, v.argv, v.details,
                           source="openharness"))
    return out


def document(checked: Sequence[Checked], config: Config, policy: Policy,
             warnings: Sequence[str]) -> dict[str, Any]:
    """The ``audit --json`` document."""
    return {
        "version": JSON_VERSION,
        "config": config.path,
        "project": policy.project,
        "sandbox": policy.boxed,
        "network": network_mode(policy),
        "box": box_kind(policy),
        "hooks": [c.as_json() for c in checked],
        "warnings": list(warnings),
        "ok": not any(c.refusals for c in checked),
    }


def box_kind(policy: Policy) -> dict[str, object] | None:
    """The box the session's boxed hooks run in, and what it gives up here."""
    from sandbox.dispatch import here

    kind = here(policy)
    return None if kind is None else kind.as_dict()


def network_mode(policy: Policy) -> dict[str, object]:
    """The network mode the session's boxed hooks run with."""
    from sandbox.network.session import mode

    network = policy.network_allow if policy.network_allow is not None else policy.network
    return mode(network, boxed=policy.boxed)


def warnings_of(checked: Sequence[Checked], config: Config, policy: Policy) -> list[str]:
    """The config's warnings and the porting lint's."""
    return [*config.warnings, *_lint(checked, policy.project)]


def _tell(checked: list[Checked], config: Config, policy: Policy, looked_at: str | None, *,
          as_json: bool) -> int:
    ok = not any(c.refusals for c in checked)
    warnings = warnings_of(checked, config, policy)
    say(banner(config, boxed=policy.boxed))
    for warning in warnings:
        say(warning)
    for c in checked:
        for r in c.refusals:
            say(r.message)
    say(_verdict_line(checked, config, looked_at))
    if as_json:
        print(json.dumps(document(checked, config, policy, warnings), ensure_ascii=False))
    return 0 if ok else 1
