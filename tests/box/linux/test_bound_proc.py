"""The box where a fresh ``/proc`` is refused: the same namespaces and mounts, the
place's own ``/proc`` bound, and the whole box in a Landlock domain
(sandbox/linux/kind.py, sandbox/linux/landlock.py). Tested in a masked ``/proc`` made on
the host, as root and as a plain user; the container cases are in test_containers.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import boxed_work, masked_proc
from helpers.unprivileged import NOBODY, searchable_tmp

from sandbox.linux import landlock

pytestmark = pytest.mark.isolation

needs_scopes = pytest.mark.skipif(landlock.abi() < landlock.NEEDED_ABI,
                                  reason="this kernel's Landlock lacks the scopes (ABI 6)")


def _reach(*, domain: bool) -> str:
    """What a process of a plain user (in a Landlock domain of its own, or not) gets of
    another of that user's processes, which holds the key in its environment: the
    environment, its descriptors and a signal. (Root's CAP_SYS_PTRACE reads past a
    domain; the box's processes never hold it.)"""
    head = f"{sys.executable} -I -S {landlock.HERE} -- " if domain else ""
    script = (f"OPENAI_API_KEY={boxed_work.KEY} sleep 60 & h=$!; sleep 0.2; "
              f"{head}/bin/sh -c 'grep -a -q {boxed_work.KEY} /proc/'$h'/environ 2>/dev/null "
              "&& echo environ; ls /proc/'$h'/fd/0 -l >/dev/null 2>&1 && echo fd; "
              "kill -0 '$h' 2>/dev/null && echo signal; true'; kill $h")
    who = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
           if os.geteuid() == 0 else [])
    return subprocess.run([*who, "/bin/sh", "-c", script], capture_output=True, text=True,
                          timeout=30, check=True, cwd="/").stdout


@needs_scopes
def test_a_landlock_domain_keeps_every_process_outside_it_out_of_reach() -> None:
    assert _reach(domain=False) == "environ\nfd\nsignal\n"
    assert _reach(domain=True) == ""


@needs_scopes
@pytest.mark.parametrize("user", [False, True], ids=["root", "user"])
def test_in_a_masked_proc_the_box_takes_the_places_proc_and_holds(user: bool) -> None:
    masked_proc.skip_unless_root()
    base = searchable_tmp()
    try:
        if user:
            os.chown(base, NOBODY, NOBODY)
        r = masked_proc.run(boxed_work.script(str(base / "work")), user=user)
        boxed_work.check(r)
        assert not Path(base, "work", "out", "outside").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_scopes
def test_in_a_masked_proc_the_banner_and_audit_say_the_box_and_what_it_gives_up() -> None:
    masked_proc.skip_unless_root()
    cli = f"{sys.executable} -m launchers"
    r = masked_proc.run(f"cd /tmp && {cli} banner && {cli} audit --json", user=False)
    assert r.code == 0, r
    from sandbox.linux import kind

    line = f"box: {kind.BOUND_PROC} (weaker here: {'; '.join(kind.BOUND_PROC_GIVES_UP)})"
    assert line in r.out.splitlines(), r
    import json

    doc = json.loads(r.out[r.out.index("{"):])
    assert doc["box"] == {"name": kind.BOUND_PROC, "gives_up": list(kind.BOUND_PROC_GIVES_UP)}
