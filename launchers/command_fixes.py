"""The fix, shown with a refusal, for two ways a command is written as for a shell.

* A whole command line in one element (``["python3 /x/check.py"]``, or a TOML string):
  the argv it should be, one word per element.
* ``$VAR``, ``${VAR}`` or a leading ``~`` in an element: nothing expands them, since no
  shell runs the command; the path written out, when every variable in it is set.

The refusal's own text (the seed's) comes first and is unchanged; the fix follows it on
the same line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from launchers.claude.command import SHELL, convert
from pathguard.argv import CommandVerdict, Refusal

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def suggest_argv(text: str, rest: Sequence[str], *, env: Mapping[str, str]) -> str:
    """``text`` (a command line) and the elements after it, as a TOML argv."""
    home = env.get("HOME", "~")
    command = convert(text, project=env.get("CLAUDE_PROJECT_DIR"), home=home)
    argv = [SHELL, "-c", text.strip()] if command.shell else list(command.argv)
    return json.dumps([*argv, *rest], ensure_ascii=False)


def expand(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with its variables and a leading ``~`` expanded as a shell would, and
    the names of the variables that are not set."""
    unset: list[str] = []

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in env:
            unset.append(name)
            return m.group(0)
        return env[name]

    out = _VAR.sub(one, text)
    if out == "~" or out.startswith("~/"):
        if "HOME" in env:
            out = env["HOME"] + out[1:]
        else:
            unset.append("HOME")
    return out, unset


def _shell_words(text: str) -> bool:
    return bool(_VAR.search(text)) or text == "~" or text.startswith("~/")


def fix_for(refusal: Refusal, command: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The fix to add to one refusal, or None."""
    if refusal.path == command[0] and any(c.isspace() for c in command[0].strip()):
        return ("The command is an argv, one word per element: "
                f"{suggest_argv(command[0], command[1:], env=env)}.")
    if _shell_words(refusal.path):
        out, unset = expand(refusal.path, env)
        head = "Variables and ~ are not expanded (no shell runs the command)"
        if unset:
            names = ", ".join(f"${n}" for n in dict.fromkeys(unset))
            return (f"{head}, and {names} {'is' if len(unset) == 1 else 'are'} not set here; "
                    "write the path out.")
        return f"{head}; write the path out: {out}."
    return None


def with_fixes(verdict: CommandVerdict, command: Sequence[str],
               env: Mapping[str, str]) -> CommandVerdict:
    """The verdict with a fix added to each refusal that has one."""
    if not verdict.details:
        return verdict
    details = []
    for r in verdict.details:
        fix = fix_for(r, command, env)
        details.append(r if fix is None else r._replace(message=f"{r.message} {fix}"))
    return verdict._replace(details=tuple(details))
