"""Every entry point reads the user config the same way: ``run``, ``hook``,
``hook --openharness`` and ``audit`` (both fronts) build one policy from one ``[sandbox]``
table, and print one line for one load error. Real command line, real box."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers.paths import REPO

PREFIX = "harness-sandbox: "

pytestmark = pytest.mark.isolation

# A boxed hook that reports what it sees: the scrubbed variable and the hidden file.
REPORT = """#!/bin/sh
{{ echo "secret=${{MY_SECRET:-none}}"
  if cat {hidden}/secret.txt >/dev/null 2>&1; then echo read=yes; else echo read=no; fi
}} > "out-$1.txt"
exit 0
"""


class Setup(NamedTuple):
    project: Path
    home: Path
    hooks: Path  # outside every folder the box writes or hides
    hidden: Path
    writable: Path


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    outside = Path(os.path.realpath(tempfile.mkdtemp(prefix="entry-", dir="/var/tmp")))
    os.chmod(outside, 0o755)
    try:
        project, home = tmp_path / "proj", tmp_path / "home"
        hooks, hidden, writable = outside / "hooks", outside / "hidden", outside / "writable"
        for d in (project, home, hooks, hidden, writable):
            d.mkdir()
        (hidden / "secret.txt").write_text("the secret\n")
        report = hooks / "report.sh"
        report.write_text(REPORT.format(hidden=hidden))
        report.chmod(0o755)
        gate = writable / "gate.sh"
        gate.write_text("#!/bin/sh\nexit 0\n")
        gate.chmod(0o755)
        yield Setup(project, home, hooks, hidden, writable)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def sandbox_table(s: Setup) -> str:
    return (f'[sandbox]\nscrub = ["MY_SECRET"]\nhidden = ["{s.hidden}"]\n'
            f'writable = ["{s.writable}"]\n')


def harness_hook(name: str, program: Path, arg: str) -> str:
    return (f'[[hooks]]\nname = "{name}"\nevent = "PreToolUse"\n'
            f"command = {json.dumps([str(program), arg])}\nsandbox = true\n")


def oh_file(s: Setup, program: Path, *, trusted: bool = True) -> Path:
    f = s.project.parent / "oh.yaml"
    f.write_text(f"hooks:\n  preToolUse:\n    - command: '{program} openharness'\n"
                 "      sandbox: true\n")
    if trusted:  # as its user would
        done = cli(s, "trust", "--openharness", str(f), "--project", str(s.project))
        assert done.returncode == 0, done.stderr
    return f


def cli(s: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env.update(HARNESS_HOME=str(s.home), MY_SECRET="s3cret",
               XDG_DATA_HOME=str(s.hooks.parent / "data"))  # the trust store: the test's own
    return subprocess.run([sys.executable, "-m", "launchers", *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=60, check=False)


def seen(s: Setup, name: str) -> str:
    return (s.project / f"out-{name}.txt").read_text()


def test_one_sandbox_table_means_the_same_box_through_every_entry_point(setup: Setup) -> None:
    s = setup
    (s.home / "config.toml").write_text(
        sandbox_table(s) + harness_hook("report", s.hooks / "report.sh", "harness"))
    oh = oh_file(s, s.hooks / "report.sh")
    project = ["--project", str(s.project)]

    box = cli(s, "run", *project, "--", "sh", "-c",
              f"echo secret=${{MY_SECRET:-none}}; "
              f"if cat {s.hidden}/secret.txt >/dev/null 2>&1; then echo read=yes; "
              f"else echo read=no; fi; touch {s.writable}/from-the-box && echo wrote=yes")
    assert (box.returncode, box.stdout) == (0, "secret=none\nread=no\nwrote=yes\n")

    hook = cli(s, "hook", "PreToolUse", "--tool", "bash", *project)
    assert hook.returncode == 0, hook.stderr
    assert seen(s, "harness") == "secret=none\nread=no\n"

    oh_hook = cli(s, "hook", "--openharness", str(oh), "preToolUse", "--tool", "Bash", *project)
    assert oh_hook.returncode == 0, oh_hook.stderr
    assert seen(s, "openharness") == "secret=none\nread=no\n"

    audit = cli(s, "audit", "--openharness", str(oh), "--json", *project)
    assert audit.returncode == 0, audit.stderr
    assert [h["verdict"] for h in json.loads(audit.stdout)["hooks"]] == ["ok", "ok"]


def test_a_hook_in_a_writable_folder_is_refused_by_every_entry_point(setup: Setup) -> None:
    s = setup
    gate = s.writable / "gate.sh"
    (s.home / "config.toml").write_text(sandbox_table(s) + harness_hook("gate", gate, "x"))
    oh = oh_file(s, gate)
    project = ["--project", str(s.project)]

    audit = cli(s, "audit", "--openharness", str(oh), "--json", *project)
    assert audit.returncode == 1
    reasons = [r["reason"] for h in json.loads(audit.stdout)["hooks"] for r in h["refusals"]]
    why = f"{gate} is in a writable folder ({s.writable}), so the agent could change it."
    assert [r.split(": ", 1)[1].startswith(why) for r in reasons] == [True, True], reasons

    hook = cli(s, "hook", "PreToolUse", "--tool", "bash", *project)
    assert (hook.returncode, hook.stderr.splitlines()) == (2, [reasons[0]])

    oh_hook = cli(s, "hook", "--openharness", str(oh), "preToolUse", "--tool", "Bash", *project)
    assert (oh_hook.returncode, oh_hook.stderr.splitlines()) == (2, [PREFIX + reasons[1]])


def test_every_command_prints_the_same_line_for_the_same_load_error(setup: Setup) -> None:
    s = setup
    config = s.home / "config.toml"
    config.write_text(harness_hook("slow", s.hooks / "report.sh", "x") + "timeout = 0\n")
    line = (f'{config}: hook "slow": key "timeout": 0 is out of range; use whole seconds '
            "from 1 to 600.")
    oh = oh_file(s, s.hooks / "report.sh", trusted=False)  # the user config comes first
    project = ["--project", str(s.project)]
    said = {
        "run": cli(s, "run", *project, "--", "true"),
        "audit": cli(s, "audit", *project),
        "hook": cli(s, "hook", "PreToolUse", "--tool", "bash", *project),
        "oh": cli(s, "hook", "--openharness", str(oh), "preToolUse", "--tool", "x", *project),
    }
    assert {name: r.stderr.removeprefix(PREFIX) for name, r in said.items()} == {
        name: line + "\n" for name in said}
    assert [r.returncode for r in said.values()] == [125, 2, 2, 2]
