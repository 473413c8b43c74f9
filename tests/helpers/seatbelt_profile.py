"""The macOS plan taken apart: a reader of the profile language (an s-expression
dialect), a plan split into its profile, definitions and command, and the trees and
policies the seatbelt tests build (no sandbox-exec runs here)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from sandbox.macos import seatbelt
from sandbox.plan import LaunchPlan
from sandbox.policy import Policy, PolicyOptions

# -- a small reader for the profile language (an s-expression dialect) -------------------


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class Str:
    value: str


Node = Sym | Str | list["Node"]


class ProfileSyntaxError(ValueError):
    pass


def read_profile(text: str) -> list[Node]:
    """Every top-level form of ``text``; raises on unbalanced parentheses, unterminated
    strings, or anything after a closing parenthesis that has no opening one."""
    stack: list[list[Node]] = [[]]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == ";":
            i = _line_end(text, i)
        elif c.isspace():
            i += 1
        elif c == "(":
            stack.append([])
            i += 1
        elif c == ")":
            if len(stack) == 1:
                raise ProfileSyntaxError(f"unbalanced ')' at {i}")
            done = stack.pop()
            stack[-1].append(done)
            i += 1
        elif c == '"' or text.startswith('#"', i):
            string, i = _read_string(text, i + (1 if c == '"' else 2))
            stack[-1].append(string)
        else:
            symbol, i = _read_symbol(text, i)
            stack[-1].append(symbol)
    if len(stack) != 1:
        raise ProfileSyntaxError(f"{len(stack) - 1} '(' never closed")
    return stack[0]


def _line_end(text: str, i: int) -> int:
    """Where the line holding ``i`` ends (a comment runs to it)."""
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _read_symbol(text: str, i: int) -> tuple[Sym, int]:
    """The symbol that starts at ``i``, and where reading goes on."""
    start, n = i, len(text)
    while i < n and not text[i].isspace() and text[i] not in '();"':
        i += 1
    return Sym(text[start:i]), i


def _read_string(text: str, i: int) -> tuple[Str, int]:
    """The string whose first character is at ``i``, and where reading goes on."""
    out = []
    n = len(text)
    while True:
        if i >= n:
            raise ProfileSyntaxError("unterminated string")
        ch = text[i]
        if ch == "\\":
            if i + 1 >= n:
                raise ProfileSyntaxError("unterminated escape")
            out.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            return Str("".join(out)), i + 1
        if ch == "\n":
            raise ProfileSyntaxError("newline inside a string")
        out.append(ch)
        i += 1


def walk(nodes: list[Node]) -> Iterator[list[Node]]:
    for node in nodes:
        if isinstance(node, list):
            yield node
            yield from walk(node)


def params_used(forms: list[Node]) -> set[str]:
    used = set()
    for form in walk(forms):
        if form and form[0] == Sym("param"):
            assert len(form) == 2 and isinstance(form[1], Str), form
            used.add(form[1].value)
    return used


def rules(forms: list[Node], action: str, operation: str) -> list[list[Node]]:
    """Top-level (action operation ... filters) rules naming ``operation``."""
    return [
        f
        for f in forms
        if isinstance(f, list) and f and f[0] == Sym(action) and Sym(operation) in f[1:]
    ]


def filters_of(rule: list[Node]) -> list[list[Node]]:
    return [f for f in rule[1:] if isinstance(f, list)]


def param_filters(rule: list[Node]) -> set[tuple[str, str]]:
    """{(filter kind, parameter name)} of a rule's ``(kind (param "NAME"))`` filters."""
    out = set()
    for f in filters_of(rule):
        kind, arg = f[0], f[1]
        if isinstance(kind, Sym) and isinstance(arg, list) and arg[0] == Sym("param"):
            value = arg[1]
            assert isinstance(value, Str)
            out.add((kind.name, value.value))
    return out


# -- taking a plan apart -----------------------------------------------------------------


@dataclass
class Parts:
    profile: str
    definitions: dict[str, str]
    definition_args: list[str]
    command: list[str]
    forms: list[Node]
    # The forms after the fixed base: the session's rules (and the network's).
    session: list[Node]

    def names_for(self, value: str) -> set[str]:
        return {k for k, v in self.definitions.items() if v == value}

    def matches(self, rule: list[Node], path: str) -> bool:
        """Whether one of ``rule``'s parameter filters matches ``path``, read the way
        Seatbelt reads them (its regex dialect agrees with Python's for ours)."""
        for kind, name in param_filters(rule):
            value = self.definitions[name]
            if kind == "literal" and path == value:
                return True
            if kind == "subpath" and (path == value or path.startswith(value + "/")):
                return True
            if kind == "regex" and re.search(value, path):
                return True
        return False


def parts(p: LaunchPlan) -> Parts:
    argv = list(p.argv)
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"], p
    profile = argv[2]
    end = argv.index("--", 3)
    defs = argv[3:end]
    definitions: dict[str, str] = {}
    for d in defs:
        assert d.startswith("-D"), (d, p)
        name, _, value = d[2:].partition("=")
        assert name not in definitions, f"{name} defined twice"
        definitions[name] = value
    base = len(seatbelt.base_profile())
    return Parts(profile, definitions, defs, argv[end + 1 :], read_profile(profile),
                 read_profile(profile[base:]))


def private(p: Path | str) -> str:
    """Where a path under /tmp is, as macOS names it."""
    s = str(p)
    for top in ("/tmp", "/var", "/etc"):
        if s == top or s.startswith(top + "/"):
            return "/private" + s
    return s


# -- fixtures ------------------------------------------------------------------------------

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/Users/dana", "TMPDIR": "/var/folders/ab/xyz/T/"}


def user_tmp() -> str:
    """The user temp folder a sandboxed macOS policy gets: off a Mac the environment's
    TMPDIR (nothing to ask), on a Mac what the system says (sandbox/macos/darwin.py)."""
    if sys.platform == "darwin":
        from sandbox.policy.usertmp import user_temp_dir

        return user_temp_dir()
    return ENV["TMPDIR"]


def make_project(root: Path, name: str = "proj", *, git: bool = True) -> Path:
    project = root / name
    project.mkdir(parents=True)
    if git:
        (project / ".git" / "hooks").mkdir(parents=True)
        (project / ".git" / "config").write_text("[core]\n")
    return project


def make_policy(root: Path, project: Path | None = None,
                **kw: Unpack[PolicyOptions]) -> Policy:
    if project is None:
        project = root / "proj" if (root / "proj").is_dir() else make_project(root)
    ptmp = root / "ptmp"
    ptmp.mkdir(exist_ok=True)
    args: PolicyOptions = {
        "private_tmp": str(ptmp),
        "hide_defaults": False,
        "env": dict(ENV),
        "home": str(root / "home"),
        "platform": "darwin",
    }
    args.update(kw)
    return Policy.create(str(project), **args)


def make_plan(policy: Policy, argv: tuple[str, ...] = ("/bin/echo", "hi")) -> LaunchPlan:
    return seatbelt.plan(policy, argv)
