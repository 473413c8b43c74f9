"""Which elements of a hook's command are checked, and the PATH lookup made at start.

- ``command[0]`` with no ``/`` is looked up on PATH once, at start (empty and relative
  entries skipped: in the box they would mean the project); the absolute path found is
  what runs, and what is checked. One with a ``/`` must be absolute.
- A later element that names an existing file or folder (relative ones from the project
  root) is checked against W and H. One that does not exist but is shaped like a path
  (a ``/`` and no whitespace) is checked against W: the agent could create it.
- For an option, ``--name=value``, the value after the first ``=`` is checked the same
  way; an empty value names nothing. An element starting with ``-`` is otherwise a path
  only when it exists.

This is best effort by design: a path inside an ``sh -c`` string is not seen.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .guard import Guard, Verdict

RefusalKind = Literal["project", "writable", "hidden", "not-found", "not-absolute",
                      "undecidable", "untrusted"]


@dataclass(frozen=True)
class Refusal:
    """One refused element of a command: the path as checked, the full message, why
    (``kind``), and the folder it fell in (None for the kinds that name no folder)."""

    path: str
    message: str
    kind: RefusalKind
    folder: str | None = None


@dataclass(frozen=True)
class CommandVerdict:
    """The checked command: ``argv`` with ``argv[0]`` replaced by the absolute path found
    on PATH; ``details`` each refusal; ``verdicts`` every check made."""

    argv: tuple[str, ...]
    details: tuple[Refusal, ...]
    verdicts: tuple[Verdict, ...]

    @property
    def refusals(self) -> tuple[str, ...]:
        """The refusal messages, in the order the elements were checked."""
        return tuple(r.message for r in self.details)

    @property
    def ok(self) -> bool:
        return not self.details


def find_program(name: str, path_env: str | None) -> str | None:
    """``name`` looked up on ``path_env``: the first absolute entry holding a regular
    executable file of that name, as ``entry/name`` (not resolved)."""
    if path_env is None:
        return None
    for entry in path_env.split(":"):
        if not entry.startswith("/"):
            continue
        candidate = posixpath.join(entry, name)
        try:
            st = os.stat(candidate)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def check_command(hook: str, command: Sequence[str], *, project: str, guard: Guard,
                  path_env: str | None) -> CommandVerdict:
    """Check every element of hook ``hook``'s command that names a path."""
    if not command:
        raise ValueError(f"hook {hook} has an empty command")
    refusals: list[Refusal] = []
    verdicts: list[Verdict] = []

    def record(verdict: Verdict) -> None:
        verdicts.append(verdict)
        if verdict.ok:
            return
        zone = verdict.zone
        if zone is None:
            refusals.append(Refusal(verdict.path, verdict.refusal(hook), "undecidable"))
        else:
            refusals.append(Refusal(verdict.path, verdict.refusal(hook), zone.kind, zone.path))

    def not_found(path: str) -> None:
        refusals.append(Refusal(path, f"hook {hook}: {path} was not found.", "not-found"))

    program = command[0]
    argv0 = program
    if "/" not in program:
        found = find_program(program, path_env) if program else None
        if found is None:
            not_found(program)
        else:
            argv0 = found
            record(guard.check(found, project))
    elif not program.startswith("/"):
        refusals.append(Refusal(
            program,
            f"hook {hook}: {program} must be an absolute path "
            "(a command with a / is not looked up on PATH).",
            "not-absolute",
        ))
    else:
        verdict = guard.check(program, project)
        if not verdict.ok:
            record(verdict)
        elif verdict.status != "ok":
            verdicts.append(verdict)
            not_found(program)
        else:
            verdicts.append(verdict)

    for element in command[1:]:
        for text in _path_candidates(element, project):
            checked = _check_element(text, project, guard)
            if checked is not None:
                record(checked)

    return CommandVerdict((argv0, *command[1:]), tuple(refusals), tuple(verdicts))


def prune_path(path_env: str | None, guard: Guard) -> str | None:
    """PATH for a host hook in a sandboxed session: only entries that are absolute, can
    be traced to where they lead, and lie outside W. None when nothing is left (the hook
    then runs with no PATH at all)."""
    if path_env is None:
        return None
    kept: list[str] = []
    for entry in path_env.split(":"):
        if not entry.startswith("/"):
            continue
        verdict = guard.check(entry, "/", check_hidden=False)
        if verdict.ok and verdict.status == "ok":
            kept.append(entry)
    return ":".join(kept) or None


def _exists(text: str, project: str) -> bool:
    # lexists: a dangling link is there to be checked (it may lead into W).
    try:
        return os.path.lexists(os.path.join(project, text))
    except ValueError:
        return False


def _path_shaped(text: str) -> bool:
    return "/" in text and not any(c.isspace() for c in text)


def _path_candidates(element: str, project: str) -> list[str]:
    """The texts in one element that may name paths."""
    if not element.startswith("-"):
        return [element]
    out: list[str] = []
    if _exists(element, project):
        out.append(element)
    if "=" in element:
        value = element.split("=", 1)[1]
        if value:
            out.append(value)
    return out


def _check_element(text: str, project: str, guard: Guard) -> Verdict | None:
    if not text:
        return None
    if _exists(text, project):
        return guard.check(text, project)
    if _path_shaped(text):
        # Nothing is there yet, so no sandbox hides it; but the agent could create it.
        return guard.check(text, project, check_hidden=False)
    return None
