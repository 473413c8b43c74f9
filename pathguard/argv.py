"""Which elements of a hook's command are checked, and the PATH lookup made at start.

- ``command[0]`` with no ``/`` is looked up on PATH once, at start (empty and relative
  entries skipped: in the box they would mean the project); the absolute path found is
  what runs, and what is checked. One with a ``/`` must be absolute.
- A later element that names an existing file or folder (relative ones from the project
  root) is checked against W and H. One that does not exist but is shaped like a path
  (a ``/`` and no whitespace) is checked against W: the agent could create it.
- For an option, ``--name=value``, the value after the first ``=`` is checked the same
  way; an empty value names nothing. So is the value attached to a short option
  (``-I/path``, ``-r./x``: everything after the letter), and the value of an
  environment assignment (``NAME=value``, as ``env`` takes it): the assignment as a
  whole is then a path only when it exists. An element starting with ``-`` is
  otherwise a path only when it exists.
- Every accepted element that exists is pinned (:class:`pathguard.identity.Pins`): what
  it led to at the check is compared again before each run.

An element with a blank (a command line a wrapper such as ``env -S`` splits) has its
first word checked as well. This is best effort by design: a path later inside an
``sh -c`` string is not seen.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Sequence
from typing import Literal

from .guard import Guard, Verdict
from .identity import Identity, Pins
from .records import NamedTuple

RefusalKind = Literal["project", "writable", "hidden", "not-found", "not-absolute",
                      "undecidable", "alias", "hard-link", "untrusted", "not-executable",
                      "no-box"]

# NAME=value as env(1) and sh take it: a name of letters, digits and _, not a digit first.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class Refusal(NamedTuple):
    """One refused element of a command: the path as checked, the full message, why
    (``kind``), and the folder it fell in (None for the kinds that name no folder)."""

    path: str
    message: str
    kind: RefusalKind
    folder: str | None = None


class CommandVerdict(NamedTuple):
    """The checked command: ``argv`` with ``argv[0]`` replaced by the absolute path found
    on PATH; ``details`` each refusal; ``verdicts`` every check made; ``pins`` what each
    accepted, existing path led to, to compare again before each run."""

    argv: tuple[str, ...]
    details: tuple[Refusal, ...]
    verdicts: tuple[Verdict, ...]
    pins: Pins = Pins()

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


class _Checks:
    """What checking one command found: refusals, verdicts, and the pins of the paths
    accepted."""

    def __init__(self, hook: str, project: str) -> None:
        self.hook = hook
        self.project = project
        self.refusals: list[Refusal] = []
        self.verdicts: list[Verdict] = []
        self.pinned: dict[str, Identity] = {}

    def record(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        if verdict.ok:
            if verdict.identity is not None:
                where = posixpath.join(self.project, verdict.path)
                self.pinned.setdefault(where, verdict.identity)
            return
        zone, message = verdict.zone, verdict.refusal(self.hook)
        if zone is None:
            self.refusals.append(Refusal(verdict.path, message, "undecidable"))
        else:
            kind: RefusalKind = verdict.problem or zone.kind
            self.refusals.append(Refusal(verdict.path, message, kind, zone.path))

    def not_found(self, path: str) -> None:
        self.refusals.append(
            Refusal(path, f"hook {self.hook}: {path} was not found.", "not-found"))

    def verdict(self, argv: tuple[str, ...]) -> CommandVerdict:
        pins = Pins() if self.refusals else Pins(tuple(self.pinned),
                                                 tuple(self.pinned.values()))
        return CommandVerdict(argv, tuple(self.refusals), tuple(self.verdicts), pins)


def _check_program(program: str, checks: _Checks, guard: Guard,
                   path_env: str | None) -> str:
    """Check ``command[0]``; the path that will run (found on PATH for a bare name)."""
    if "/" not in program:
        found = find_program(program, path_env) if program else None
        if found is None:
            checks.not_found(program)
            return program
        checks.record(guard.check(found, checks.project))
        return found
    if not program.startswith("/"):
        checks.refusals.append(Refusal(
            program,
            f"hook {checks.hook}: {program} must be an absolute path "
            "(a command with a / is not looked up on PATH).",
            "not-absolute",
        ))
        return program
    verdict = guard.check(program, checks.project)
    if verdict.ok and verdict.status != "ok":
        checks.verdicts.append(verdict)
        checks.not_found(program)
    else:
        checks.record(verdict)
    return program


def check_command(hook: str, command: Sequence[str], *, project: str, guard: Guard,
                  path_env: str | None) -> CommandVerdict:
    """Check every element of hook ``hook``'s command that names a path."""
    if not command:
        raise ValueError(f"hook {hook} has an empty command")
    checks = _Checks(hook, project)
    argv0 = _check_program(command[0], checks, guard, path_env)
    for element in command[1:]:
        texts = list(_path_candidates(element, project))
        # An element with a blank is no path, but may be a command line a wrapper
        # splits (``env -S "<project>/h.sh --quiet"``): its first word is checked too.
        first = element.split(None, 1)[0] if element.strip() else ""
        if first and first != element:
            texts += [t for t in _path_candidates(first, project) if t not in texts]
        for text in texts:
            checked = _check_element(text, project, guard)
            if checked is not None:
                checks.record(checked)
    return checks.verdict((argv0, *command[1:]))


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
    """The texts in one element that may name paths: the element; for ``--opt=value``
    and ``NAME=value`` the value (the whole only when it exists); for a short option
    the value attached to its letter."""
    attached = ""
    if element.startswith("--"):
        attached = element.split("=", 1)[1] if "=" in element else ""
    elif element.startswith("-"):
        attached = element[2:]
    elif _ASSIGNMENT.match(element):
        attached = element.split("=", 1)[1]
    else:
        return [element]
    out: list[str] = []
    if _exists(element, project):
        out.append(element)
    if attached:
        out.append(attached)
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
