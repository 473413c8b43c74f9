"""The console entry's first act: no import may come from the working directory.

Python puts the folder a program was started from on the import path in several ways:
an empty entry (``-c``, the interactive prompt), the working directory itself
(``python -m``), and ``PYTHONPATH`` entries that are empty or relative (``.`` is made
absolute by ``site``). Started from the project, each of those lets a ``json.py`` the
agent wrote there be imported in place of the standard library's. :func:`clean` drops
them all before the command imports anything else.

This module must import nothing that is not already loaded when the interpreter has
started (``sys`` is built in, ``os`` is loaded by ``site``), and it has no
``from __future__`` import: that statement imports a module too.
"""

import os
import sys


def safe_path(path: list[str], pythonpath: str | None, cwd: str, stdlib: set[str],
              home: str = "") -> list[str]:
    """``path`` without what names the working directory or lies relative to it: empty
    and relative entries anywhere; and, before the standard library (the first entry in
    ``stdlib``: the script's folder and ``PYTHONPATH`` come before it), ``cwd`` itself
    (``python -m``) and the absolute form ``site`` made of each empty or relative
    ``PYTHONPATH`` entry. After the standard library the same folder may come from a
    ``.pth`` file, as an editable install's does, and stays. ``home``, the folder this
    package was imported from, is kept last when it was dropped (run from a checkout):
    after the standard library and site-packages nothing there shadows them, and the
    self-guard still checks it."""
    bad = {cwd}
    for entry in pythonpath.split(os.pathsep) if pythonpath is not None else ():
        if not entry.startswith("/"):
            bad.add(os.path.normpath(os.path.join(cwd, entry)))
    out: list[str] = []
    before_stdlib = any(p in stdlib for p in path)
    for p in path:
        if before_stdlib and p in stdlib:
            before_stdlib = False
        if not p.startswith("/") or (before_stdlib and p.rstrip("/") in bad):
            continue
        out.append(p)
    if home and home in path and home not in out:
        out.append(home)
    return out


def clean() -> None:
    """Drop the unsafe entries from ``sys.path``, in place."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/nonexistent"  # the working directory is gone: nothing comes from it
    lib = os.path.join(sys.base_prefix, "lib")
    version = sys.version_info
    stdlib = {os.path.join(lib, f"python{version.major}{version.minor}.zip"),
              os.path.join(lib, f"python{version.major}.{version.minor}")}
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = safe_path(sys.path, os.environ.get("PYTHONPATH"), cwd, stdlib, home)
