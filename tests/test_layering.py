"""Who may import whom, read from the source (every import statement, those inside
functions too; those under ``if TYPE_CHECKING:`` aside, which never run):

- nothing in ``sandbox/`` or ``pathguard/`` imports ``launchers/`` (data flows one way);
- ``sandbox/errors.py`` imports nothing of ours (the error tree is a leaf);
- what runs inside the box, started by path by the box's own interpreter, imports only
  the standard library and its fellow programs there (the package is not importable in
  the box, and must not be trusted there);
- a platform's folder (``sandbox/linux/``, ``sandbox/macos/``) is imported only by
  itself and by :data:`DISPATCH` (``sandbox/dispatch.py``, the doctor's probe, the
  hardening's filter), never by the other platform's, nor by ``launchers/``;
- no import circle among the modules of the three packages;
- ``sandbox/``'s top level holds at most ten modules beside its sub-packages.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

OURS = ("sandbox", "pathguard", "launchers")
# Run inside the box by path (sandbox/linux/warm/starting.py and the compiled launchers start
# them): each may import its fellows by their bare names or as sandbox.linux.warm.NAME.
IN_BOX = ("inbox", "helper", "guardmain", "guarded", "guardparts", "guardlocks", "unixguard")
# Run by path too, before the box's domain is made: the standard library alone.
STANDALONE = ("sandbox.linux.landlock", "sandbox.linux.landlockrun")
PLATFORMS = ("sandbox.linux", "sandbox.macos")
# The modules that may import a platform's folder: the one dispatch, the doctor's probe of
# each platform's box, and the session's hardening (the Linux filter and launcher it
# loads; a macOS session's host runs share its groups).
DISPATCH = ("sandbox.dispatch", "sandbox.doctor.probe", "sandbox.box.harden")


def imports(source: str, module: str) -> list[tuple[int, str]]:
    """(line, module) for each import in ``source`` that can run, relative ones made
    absolute against ``module`` (dotted)."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    out: list[tuple[int, str]] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base == "__future__":
                continue
            if base == "sandbox.linux.warm":  # from sandbox.linux.warm import guardlocks
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, base))
    return out


def breaks(module: str, source: str) -> list[str]:
    """Each rule ``source`` (the module named ``module``) breaks, one line each."""
    top = module.split(".")[0]
    name = module.rsplit(".", 1)[-1]
    out: list[str] = []
    for line, target in imports(source, module):
        first = target.split(".")[0]
        if top in ("sandbox", "pathguard") and first == "launchers":
            out.append(f"{module}:{line} imports {target}: sandbox/ and pathguard/ "
                       "never import launchers/")
        if module == "sandbox.errors" and first in OURS:
            out.append(f"{module}:{line} imports {target}: the error tree is a leaf")
        if module in STANDALONE and first not in sys.stdlib_module_names:
            out.append(f"{module}:{line} imports {target}: what runs in the box "
                       "imports only the standard library")
        plat = next((p for p in PLATFORMS if target == p or target.startswith(p + ".")), None)
        if plat is not None and not module.startswith(plat) and module not in DISPATCH:
            out.append(f"{module}:{line} imports {target}: a platform's folder is imported "
                       "only by the dispatch")
        if module.startswith("sandbox.linux.warm.") and name in IN_BOX:
            fellow = target in IN_BOX or (target.startswith("sandbox.linux.warm.")
                                          and target.rsplit(".", 1)[-1] in IN_BOX)
            if not fellow and first not in sys.stdlib_module_names:
                out.append(f"{module}:{line} imports {target}: what runs in the box "
                           "imports only the standard library and its fellows there")
    return out


def modules() -> list[tuple[str, Path]]:
    out = []
    for top in OURS:
        for path in sorted((REPO / top).rglob("*.py")):
            dotted = ".".join(path.relative_to(REPO).with_suffix("").parts)
            out.append((dotted.removesuffix(".__init__"), path))
    return out


def test_every_module_keeps_the_layering() -> None:
    broken = [b for module, path in modules() for b in breaks(module, path.read_text())]
    assert broken == []


@pytest.mark.parametrize(("module", "source", "rule"), [
    ("sandbox.policy", "def f():\n    from launchers.config import load\n",
     "never import launchers/"),
    ("pathguard.walk", "import launchers\n", "never import launchers/"),
    ("sandbox.errors", "from .text import escape\n", "the error tree is a leaf"),
    ("sandbox.linux.warm.helper", "from sandbox.policy import Policy\n", "only the standard"),
    ("sandbox.linux.warm.inbox", "import yaml\n", "only the standard"),
    ("sandbox.session", "from sandbox.linux.bwrap import plan\n", "only by the dispatch"),
    ("sandbox.linux.bwrap", "from sandbox.macos import seatbelt\n", "only by the dispatch"),
    ("launchers.cli.audit", "from sandbox.linux.kind import choose\n", "only by the dispatch"),
    ("sandbox.linux.landlockrun", "from sandbox.text import escape\n", "only the standard"),
])
def test_a_broken_rule_is_caught(module: str, source: str, rule: str) -> None:
    found = breaks(module, source)
    assert len(found) == 1 and rule in found[0], found


def test_imports_under_type_checking_and_fellows_are_allowed() -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from launchers.config import Config\n"
              "from inbox import pack\nfrom sandbox.linux.warm.guardparts import load\n")
    assert breaks("sandbox.linux.warm.helper", source) == []


def test_the_platform_is_read_in_one_module_of_the_package() -> None:
    """``sandbox/platform.py`` reads it for the package; pathguard, which imports
    nothing of the package, reads its own."""
    readers = sorted(str(path.relative_to(REPO)) for _, path in modules()
                     if "sys.platform" in path.read_text())
    assert readers == ["pathguard/aliases.py", "sandbox/platform.py"]


def test_the_package_s_errors_live_in_its_error_module() -> None:
    """A class of the package's error tree defined anywhere but ``sandbox/errors.py`` is
    a second home for errors (five lived where they were raised). Control flow that
    never leaves its module (the proxy's ``RequestRefused``, the guard's ``CallRefused``)
    is not of the tree."""
    tree = ast.parse((REPO / "sandbox" / "errors.py").read_text())
    ours = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    elsewhere = []
    for module, path in modules():
        if module == "sandbox.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b).rsplit(".", 1)[-1] in ours for b in node.bases):
                elsewhere.append(f"{module}.{node.name}")
    assert elsewhere == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports): each set of
    more than one module that reach one another."""
    reach = {v: _reached(graph, v) for v in graph}
    out: list[list[str]] = []
    for v in sorted(graph):
        ring = sorted(w for w in reach[v] if v in reach.get(w, set()))
        if len(ring) > 1 and ring not in out:
            out.append(ring)
    return out


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def import_graph() -> dict[str, set[str]]:
    """Each module of ours and the modules of ours it imports (a name imported from a
    module is that module; TYPE_CHECKING aside)."""
    known = dict(modules())
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        deps = set()
        for _, target in imports(path.read_text(), module):
            parts = target.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != module:
                deps.add(".".join(parts))
        graph[module] = deps
    return graph


def test_no_module_imports_itself_through_a_circle() -> None:
    assert circles(import_graph()) == []


def test_a_circle_is_caught() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_top_level_holds_at_most_ten_modules() -> None:
    top = sorted(p.name for p in (REPO / "sandbox").glob("*.py"))
    assert len(top) <= 10, top
