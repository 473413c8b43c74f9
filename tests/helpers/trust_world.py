"""A user of openHarness files with a trust store: a home, a data folder (the store's),
a project with ``.oh/``, a marker folder, the real command line, and the refusals'
texts."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.procs import Done


@dataclass
class World:
    """Under /var/tmp (outside /tmp, which a session with no sandbox counts as the
    agent's): a home, a data folder (the store's), a project with ``.oh/``, a marker
    folder outside every folder the box can write."""

    base: Path
    data: Path
    project: Path
    marks: Path

    @property
    def oh(self) -> Path:
        return self.project / ".oh" / "config.yaml"

    @property
    def store(self) -> Path:
        return self.data / "harness" / "trusted.json"

    @property
    def marker(self) -> Path:
        return self.marks / "ran"

    def env(self, **extra: str) -> dict[str, str]:
        env = {"HOME": str(self.base / "home"), "XDG_DATA_HOME": str(self.data),
               "HARNESS_HOME": str(self.base / "harness"),
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        env.update(extra)
        return env

    def cli(self, *args: str, **extra: str) -> Done:
        p = subprocess.run([sys.executable, "-m", "launchers.cli", *args], cwd=self.base,
                           env=self.env(**extra), capture_output=True, timeout=60)
        return Done(p.returncode, p.stdout.decode(), p.stderr.decode())

    def hook(self, *args: str, **extra: str) -> Done:
        return self.cli("hook", "--openharness", str(self.oh), "preToolUse", "--tool",
                        "Bash", "--project", str(self.project), *args, **extra)

    def audit(self, *args: str, **extra: str) -> Done:
        return self.cli("audit", "--openharness", str(self.oh), "--project",
                        str(self.project), *args, **extra)

    def write(self, text: str, path: Path | None = None) -> Path:
        path = path or self.oh
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def marker_config(self) -> str:
        return f"hooks:\n  preToolUse:\n    - command: touch {self.marker}\n"


@contextlib.contextmanager
def new_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="hs-trust-", dir="/var/tmp")))
    w = World(base, base / "data", base / "project", base / "marks")
    monkeypatch.setenv("XDG_DATA_HOME", str(w.data))  # the library's loader, in this process
    for d in (base / "home", base / "harness", w.data, w.project, w.marks):
        d.mkdir()
    try:
        yield w
    finally:
        shutil.rmtree(base, ignore_errors=True)


def new_text(path: Path | str) -> str:
    return (f"{path}: not trusted: it is new (never trusted at this path), so none of its "
            f"hooks run. Review them, then trust the file: harness-sandbox trust "
            f"--openharness {path}")


def changed_text(path: Path | str) -> str:
    return (f"{path}: not trusted: it changed since it was trusted, so none of its hooks "
            f"run. Review them, then trust the file again: harness-sandbox trust "
            f"--openharness {path}")
