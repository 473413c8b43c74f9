"""``harness-sandbox import claude [FILE...] [--write]``: Claude Code hooks as ``[[hooks]]``.

The entries go to stdout as TOML; every warning, the porting lint and the ``mkdir``/``cp``
that moves a hook file out of the agent's reach go to stderr. ``--write`` appends the
entries to the user config, only after the checks ``audit`` makes pass for each of
them (the config still loads; no file lies where the agent could change it or the box
hides it); it never rewrites what is there. Nothing is run.

Exit 0 converted (and, with ``--write``, appended); 1 ``--write`` refused, nothing
written; 2 a file cannot be read, or there is nothing to import.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from launchers.admission import Admission
from launchers.claude.importer import (
    Converted,
    Imported,
    ImportFailed,
    convert_files,
    default_files,
    move_commands,
    render_all,
)
from launchers.claude.lint import lint_answers, lint_hooks
from launchers.config import Config, ConfigError, SandboxSettings, load, locate
from launchers.startable import start_problem
from sandbox.errors import PolicyError
from sandbox.policy import Policy


def _say(text: str) -> None:
    # Settings files and the file names in them may come from the project (the agent's):
    # control characters are shown escaped, never sent to the terminal.
    print("".join(c if c.isprintable() else repr(c)[1:-1] for c in text), file=sys.stderr)


def session_policy(project: str, settings: SandboxSettings) -> Policy:
    """The policy audit builds for this project and ``[sandbox]`` table."""
    return Policy.from_settings(project, settings)


def move_reason(hook: Imported) -> list[str]:
    """Why each of a hook's files must move, and where the entry expects it."""
    out = []
    for m in hook.moves:
        could = ("the agent could change it" if m.why == "in the project"
                 else "the hook could not read it")
        out.append(f"⚠ hook {hook.name}: {m.source} is {m.why}, so {could}. "
                   f"The entry names {m.target}; copy it there (below).")
    return out


def _agents(files: list[str], project: str) -> list[str]:
    """A warning for each settings file inside the project: the agent could have written
    it, and an entry needs no file of its own (a ``sh -c`` string) to pass the checks."""
    roots = {project, os.path.realpath(project)}
    return [f"⚠ {f} is in the project, so the agent could have written it: read each entry "
            "it gives before you add it to your config."
            for f in files
            if any(p == r or p.startswith(r.rstrip("/") + "/")
                   for r in roots for p in (f, os.path.realpath(f)))]


def report(converted: Converted, project: str) -> None:
    """Every warning on stderr, then the lint, then the copy commands."""
    for w in converted.warnings:
        _say(w)
    for w in lint_hooks(((h.name, h.lint_argv()) for h in converted.hooks), project=project):
        _say(w)
    for w in lint_answers(((h.name, h.event, h.lint_argv(), h.command) for h in converted.hooks),
                          project=project):
        _say(w)
    moves = [m for h in converted.hooks for m in h.moves]
    for h in converted.hooks:
        for line in move_reason(h):
            _say(line)
    if moves:
        _say("Copy the hook files to their new place before a session (read them first: a file in "
             "the project is the agent's to change):")
        for line in move_commands(dict.fromkeys(moves)):
            _say(f"  {line}")


def _check(config_path: str, text: str, hooks: list[Imported], project: str,
           source: str) -> list[str]:
    """Load the config as it would be with ``text`` appended, and check the new hooks
    as audit does: the refusals (empty: it may be written). Raises ConfigError."""
    folder = os.path.dirname(config_path)
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".toml", encoding="utf-8",
                                     prefix=".import-") as tmp:
        tmp.write(text)
        tmp.flush()
        config = load(tmp.name, project=project, source=source)  # type: ignore[arg-type]
    new = {h.name: h for h in hooks}
    admission = Admission(session_policy(project, config.sandbox))
    refusals: list[str] = []
    for spec in config.hooks:
        hook = new.get(spec.name)
        if hook is None:
            continue
        verdict = admission.check(spec.name, spec.command, sandbox=spec.sandbox)[1]
        said = list(verdict.refusals)
        problem = None if said or not verdict.argv else start_problem(spec.name, verdict.argv[0])
        if problem is not None:
            said.append(problem.message)
        # A file the import moved must be in its new place, even where the guard lets a
        # missing argument pass (the agent cannot create it there, but nothing would run).
        for m in hook.moves:
            line = f"hook {spec.name}: {m.target} was not found."
            if not os.path.exists(m.target) and line not in said:
                said.append(line)
        refusals += said
    return refusals


def _write(config_path: str, *, source: str, text: str, hooks: list[Imported],
           project: str) -> int:
    try:
        with open(config_path, encoding="utf-8") as f:
            existing = f.read()
    except FileNotFoundError:
        existing = ""
    except OSError as err:
        _say(f"{config_path}: cannot be read: {err.strerror or err}.")
        return 2
    gap = "" if not existing else ("\n" if existing.endswith("\n") else "\n\n")
    addition = gap + text
    try:
        refusals = _check(config_path, existing + addition, hooks, project, source)
    except (ConfigError, PolicyError) as err:
        _say(str(err))
        _say(f"import: nothing written to {config_path}")
        return 2
    if refusals:
        for line in refusals:
            _say(line)
        _say(f"import: nothing written to {config_path}: {len(refusals)} "
             f"refusal{'' if len(refusals) == 1 else 's'}; fix them and run it again")
        return 1
    with open(config_path, "a", encoding="utf-8") as f:
        f.write(addition)
    _say(f"import: {len(hooks)} hook{'' if len(hooks) == 1 else 's'} appended to {config_path}")
    return 0


def _new_only(converted: Converted, config: Config) -> tuple[Converted, int]:
    """The hooks the config does not have yet (the same event and command), and how many
    it has: a second import adds nothing twice."""
    have: dict[tuple[str, tuple[str, ...]], str] = {
        (h.event, h.command): h.name for h in config.hooks}
    new: list[Imported] = []
    warnings = list(converted.warnings)
    for h in converted.hooks:
        name = have.get((h.event, h.command))
        if name is None:
            new.append(h)
        else:
            warnings.append(f"⚠ {h.where}: already in {config.path} as hook {name}; "
                            "not added again.")
    return Converted(new, warnings), len(converted.hooks) - len(new)


def cmd_import(args: argparse.Namespace) -> int:
    project = os.path.abspath(args.project or ".")
    home = os.environ.get("HOME") or os.path.expanduser("~")
    files = [os.path.abspath(f) for f in args.files] or [
        f for f in default_files(home, project) if os.path.isfile(f)]
    # The project may be the home folder: each file once.
    files = list({os.path.realpath(f): f for f in files}.values())
    if not files:
        _say("import: no Claude Code settings found (looked at "
             + ", ".join(default_files(home, project)) + ")")
        return 2
    found = locate(os.environ, explicit=args.config)
    try:
        config = (Config(path=None) if found is None
                  else load(found.path, project=project, source=found.source))
        policy = session_policy(project, config.sandbox)
        converted = convert_files(files, project=project, home=home, hidden=policy.hidden,
                                  taken=[h.name for h in config.hooks])
    except (ConfigError, PolicyError, ImportFailed) as err:
        _say(str(err))
        return 2
    for line in _agents(files, project):
        _say(line)
    converted, already = _new_only(converted, config)
    report(converted, project)
    if not converted.hooks and already:
        _say(f"import: every hook is already in {config.path}; nothing to add")
        return 0
    if not converted.hooks:
        _say("import: no PreToolUse or UserPromptSubmit command hooks to import")
        return 2
    text = render_all(converted.hooks)
    print(text, end="")
    n = len(converted.hooks)
    if not args.write:
        _say(f"import: {n} hook{'' if n == 1 else 's'} from {len(files)} "
             f"file{'' if len(files) == 1 else 's'}")
        return 0
    if found is None:
        _say("import: no user config to write to (set HOME or HARNESS_HOME, or give --config)")
        return 2
    return _write(found.path, source=found.source, text=text, hooks=converted.hooks,
                  project=project)
