"""openHarness files for the tests: written under a folder's ``.oh/`` and trusted, loaded,
and the contexts and variables an event gives."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from helpers.trusting import trust_file
from launchers import openharness as oh
from launchers.openharness import TOOL_EVENTS, Context, OhConfig, OhConfigError


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> str:
    d = tmp_path / ".oh"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text(text, encoding="utf-8")
    trust_file(f)
    return str(f)


def config(tmp_path: Path, text: str) -> OhConfig:
    return oh.load(write(tmp_path, text))


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(OhConfigError) as info:
        oh.load(path)
    return str(info.value)


def q(text: str) -> str:
    """``text`` as a single-quoted YAML scalar."""
    return "'" + text.replace("'", "''") + "'"


def one_hook(event: str, command: str, extra: str = "") -> str:
    return f"hooks:\n  {event}:\n    - command: {q(command)}\n{extra}"


def ctx_for(event: str, **kw: Any) -> Context:
    if event in TOOL_EVENTS:
        kw.setdefault("tool_name", "Bash")
    return Context(**kw)


def read_env(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition("=")
        out[name] = value
    return out


def json_hook(event: str, answer: dict[str, Any] | str, extra: str = "") -> str:
    """One JSON-I/O hook for ``event`` that prints ``answer``."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return one_hook(event, f"cat > /dev/null; printf '%s' {shlex.quote(text)}",
                    "      jsonIO: true\n" + extra)


def script(folder: Path, name: str = "gate.sh") -> Path:
    """A hook program in ``folder`` that allows."""
    p = folder / name
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o755)
    return p
