"""The toolkit guards itself: it will not start from a folder the box can write.

The guard keeps hook files out of the agent's reach; the toolkit's own code matters as
much. A virtual environment or a checkout of this package inside the project (a
``pip install`` into the project's ``.venv``) is code the box can rewrite, and the next
``harness-sandbox`` call would run it on the host, guard and all. So before a session
(and ``audit``, ``run``, ``hook``) starts, these are checked like a host hook's files,
against the folders the agent can write:

- the package's own folders (``sandbox``, ``pathguard``, ``launchers``, as imported);
- the interpreter (``sys.executable`` and where it leads);
- the Python installation or virtual environment (``sys.prefix``, ``sys.base_prefix``);
- every absolute folder on the import path (``sys.path``): a later import could come
  from there. (The console entry drops empty and relative entries before it imports
  anything: see :mod:`launchers.cli.syspath`.)

A refusal names what lies where and the fix. It is a :class:`PolicyError`.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING

from sandbox.errors import SelfGuardError as SelfGuardError

if TYPE_CHECKING:
    from pathguard.guard import Verdict
    from sandbox.policy import Policy

PACKAGES = ("sandbox", "pathguard", "launchers")
FIX_INSTALL = ("Install harness-sandbox outside the project and every writable folder "
               "(for example from a checkout kept outside them: the .venv its set-up makes, or "
               "pipx install PATH-TO-CHECKOUT) and run that one.")
FIX_PATH = "Remove it from PYTHONPATH, or install harness-sandbox outside the project."
FIX_ENV = "Start harness-sandbox without it."
# Read when the interpreter itself starts, before any code of ours: libraries
# (the linker's three) and the standard library (PYTHONHOME).
OWN_LOADER_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONHOME")


def own_paths() -> list[tuple[str, str]]:
    """(path, what it is) for everything the running toolkit loads code from."""
    out: list[tuple[str, str]] = []
    for name in PACKAGES:
        try:
            module = sys.modules.get(name) or import_module(name)
        except ImportError:
            continue  # an embedding that does not ship this part of the toolkit
        where = getattr(module, "__file__", None)
        if where:
            out.append((os.path.dirname(os.path.abspath(where)), "harness-sandbox's own code"))
    if sys.executable:
        out.append((sys.executable, "harness-sandbox's interpreter"))
        out.append((os.path.realpath(sys.executable), "harness-sandbox's interpreter"))
    venv = sys.prefix != sys.base_prefix
    prefix = "virtual environment" if venv else "Python"
    out.append((sys.prefix, f"harness-sandbox's {prefix}"))
    if venv:
        out.append((sys.base_prefix, "harness-sandbox's Python"))
    out += [(p, "a folder on harness-sandbox's import path (sys.path)") for p in sys.path
            if p.startswith("/")]
    unique: dict[str, str] = {}
    for path, what in out:
        unique.setdefault(path, what)
    return list(unique.items())


def _where(verdict: Verdict) -> str:
    zone = verdict.zone
    if zone is None:
        return f"cannot be checked ({verdict.reason})"
    where = zone.label if zone.kind == "project" else f"{zone.label} ({zone.path})"
    if verdict.problem == "alias":
        return (f"is in {where} (it is {verdict.same_as} through the mount at "
                f"{verdict.mount})")
    if verdict.problem == "hard-link":
        return f"may be in {where} (it has {verdict.links} hard links on that file system)"
    return f"is in {where}"


def check(policy: Policy) -> None:
    """Raise :class:`SelfGuardError` when anything the toolkit runs from lies in a
    folder the agent can write (or cannot be checked), or its own environment makes
    the interpreter load from one."""
    guard = policy.guard(boxed=False)
    from sandbox.policy.env import path_words

    for name in OWN_LOADER_VARS:
        for word in path_words(os.environ.get(name, "")):
            verdict = guard.check(word, "/", check_hidden=False)
            if not verdict.ok:
                raise SelfGuardError(
                    f"the environment variable {name} names {word}, which "
                    f"{_where(verdict)}, so the agent could change the code that "
                    f"harness-sandbox loads; harness-sandbox will not start. {FIX_ENV}")
    for path, what in own_paths():
        verdict = guard.check(path, "/", check_hidden=False)
        if verdict.ok:
            continue
        fix = FIX_PATH if what.startswith("a folder on") else FIX_INSTALL
        raise SelfGuardError(
            f"{what}, {path}, {_where(verdict)}, so the agent could change the code that "
            f"guards it; harness-sandbox will not start. {fix}")
