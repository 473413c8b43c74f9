"""A plan is data (issue 39): once the box is open, planning a run makes no mount, starts
no process, compiles nothing and makes no folder; it opens only the run's own
descriptors (the filter's, the start pipe). What it stands on is made when the box
opens (:meth:`sandbox.linux.bwrap.BwrapBackend.prepare`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox.linux import initcache, stage
from sandbox.linux.linuxbox import LinuxBox
from sandbox.policy import caches
from sandbox.session import Session

pytestmark = pytest.mark.isolation


def _forbid(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every way a plan could touch the kernel beyond a descriptor, made to fail the
    test (and to say which was tried)."""
    tried: list[str] = []

    def refuse(name: str) -> Any:
        def call(*_: object, **__: object) -> Any:
            tried.append(name)
            raise AssertionError(f"a plan called {name}")
        return call

    for target, name in ((os, "fork"), (os, "mkdir"), (os, "makedirs"), (os, "execv"),
                         (subprocess, "Popen"), (subprocess, "run"),
                         (stage.Stage, "open"), (stage.Stage, "bind_late"),
                         (initcache, "build"), (caches, "make")):
        monkeypatch.setattr(target, name, refuse(f"{target.__name__}.{name}"))
    return tried


def _shape(argv: tuple[str, ...]) -> tuple[str, ...]:
    """A plan's words with its run's descriptor numbers taken out."""
    return tuple(re.sub(r"\d+", "N", a) if re.fullmatch(r"\d+|/proc/self/fd/\d+", a) else a
                 for a in argv)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])
def test_an_open_boxs_plan_touches_nothing_but_its_runs_descriptors(
        project: Path, monkeypatch: pytest.MonkeyPatch, warm: bool) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with Session.open(str(project), warm=warm) as s:
        assert isinstance(s._box, LinuxBox)
        with monkeypatch.context() as m:
            tried = _forbid(m)
            first = s._box.plan(["echo", "one"])
            second = s._box.plan(["echo", "one"])
        assert tried == []
        assert _shape(first.argv) == _shape(second.argv)
        assert (first.env, first.cwd, first.description) == \
            (second.env, second.cwd, second.description)
        assert first.argv[-2:] == ("echo", "one") and first.cwd == os.path.realpath(project)
        # The plan still runs, once the calls are given back.
        assert s.run(["echo", "one"]).stdout == b"one\n"


def test_a_box_never_opened_makes_what_its_plan_stands_on_at_the_first(project: Path
                                                                      ) -> None:
    from sandbox.policy import Policy

    box = LinuxBox(Policy.create(str(project)))
    assert box.backend._prefix is None
    box.plan(["true"])
    assert box.backend._prefix is not None
    box.backend.release()
