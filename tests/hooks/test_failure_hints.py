"""Failures that say why, beside the seed's unchanged texts: real failing hooks, in the
box and on the host, through ``harness-sandbox hook`` (stderr and ``--json``) and the
records; ``hook --json`` on a refusal; the fix shown for a command written as for a
shell; ``--version``."""

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
from helpers.procs import Done

from launchers.config import Config, HookSpec
from launchers.harness import records as rec
from launchers.harness.hooks import HookRunner
from sandbox.session import Session

pytestmark = pytest.mark.isolation
FAILING = ('⚠ hook {h} is failing ({k}), so the calls it covers are blocked. Fix it, set '
           'on_failure = "continue", or restart with --no-hooks.')
CALL_FAILED = ('the user\'s hook "{h}" failed ({k}), so this call was blocked. This is not a '
               "policy decision: retrying or rephrasing the call will not help. Tell the user "
               "their hook is failing.")
HIDDEN_HINT = ("hint: {f} is hidden in the box, so hook {h} cannot write there. Set sandbox = "
               "false for this hook to run it on the host, or have it write somewhere else.")
READ_ONLY_HINT = ("hint: {f} is read-only in the box, so hook {h} cannot write there. Set "
                  "sandbox = false for this hook to run it on the host, or have it write "
                  "somewhere else.")
CONTEXT_HINT = ('hint: hook {h} printed text that is not hook JSON. A prompt hook adds context '
                'by printing {{"hookSpecificOutput": {{"hookEventName": "UserPromptSubmit", '
                '"additionalContext": "..."}}}} (or prints nothing); plain text on stdout is '
                "not read here.")
NOT_FOUND_HINT = ("hint: exit code 127 means a program hook {h} runs was not found; name it by "
                  "its absolute path (a host hook's PATH leaves out the folders the agent can "
                  "write).")

PROGRAMS = {
    "log-claude.sh": '#!/bin/sh\ncat >/dev/null\nset -e\ntouch "$HOME/.claude/hooks.log"\n',
    "log-beside.sh": '#!/bin/sh\ncat >/dev/null\nset -e\ntouch "$(dirname "$0")/state.json"\n',
    "uv-hook.sh": "#!/bin/sh\ncat >/dev/null\nexec env no-such-tool-hsbox run check.py\n",
    "plain.sh": "#!/bin/sh\ncat >/dev/null\necho 'Remember: run the tests'\n",
    "noisy.sh": ("#!/bin/sh\ncat >/dev/null\nfor i in 1 2 3 4 5 6 7; do echo \"line $i\" >&2; "
                 "done\nprintf 'red \\033[31mX\\033[0m\\t%0400d\\n' 0 >&2\nexit 3\n"),
}


class World(NamedTuple):
    base: Path
    home: Path
    programs: Path
    project: Path

    @property
    def config(self) -> Path:
        return self.base / "harness" / "config.toml"

    def hooks(self, *entries: str) -> None:
        self.config.parent.mkdir(exist_ok=True)
        self.config.write_text("\n".join(entries))

    def cli(self, *args: str) -> Done:
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME",)}
        env.update(HOME=str(self.home), HARNESS_HOME=str(self.config.parent), LC_ALL="C")
        r = subprocess.run([sys.executable, "-m", "launchers.cli", *args], cwd=REPO,
                           capture_output=True, text=True, env=env, timeout=60, check=False)
        return Done(r.returncode, r.stdout, r.stderr)

    def fire(self, *args: str) -> Done:
        return self.cli("hook", *args, "--project", str(self.project))


def entry(name: str, command: list[str], *, event: str = "PreToolUse",
          sandbox: bool = True) -> str:
    return (f'[[hooks]]\nname = "{name}"\nevent = "{event}"\ncommand = {json.dumps(command)}\n'
            f"sandbox = {'true' if sandbox else 'false'}\n")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix="failure-hints-", dir="/var/tmp"))
    base.chmod(0o755)
    home = base / "home"
    (home / ".claude").mkdir(parents=True)
    programs = base / "programs"
    programs.mkdir()
    for name, text in PROGRAMS.items():
        (programs / name).write_text(text)
        (programs / name).chmod(0o755)
    project = tmp_path / "proj"
    project.mkdir()
    try:
        yield World(base, home, programs, project)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_boxed_write_under_a_hidden_folder_gets_a_hint(world: World) -> None:
    world.hooks(entry("logger", [str(world.programs / "log-claude.sh")]))
    r = world.fire("PreToolUse", "--tool", "bash", "--input", '{"command": "ls"}')
    kind = "exited with code 1"
    claude = world.home / ".claude"
    assert r.code == 1
    assert r.err.splitlines() == [
        FAILING.format(h="logger", k=kind),
        "stderr of hook logger (last lines):",
        f"  touch: cannot touch '{claude}/hooks.log': Read-only file system",
        HIDDEN_HINT.format(f=claude, h="logger"),
        CALL_FAILED.format(h="logger", k=kind)]
    # On the host, as the hint says, it works.
    world.hooks(entry("logger", [str(world.programs / "log-claude.sh")], sandbox=False))
    ok = world.fire("PreToolUse", "--tool", "bash", "--input", '{"command": "ls"}')
    assert (ok.code, ok.err) == (0, "")
    assert (claude / "hooks.log").exists()


def test_a_boxed_write_in_a_read_only_folder_gets_a_hint_and_json_carries_it(
        world: World) -> None:
    world.hooks(entry("state", [str(world.programs / "log-beside.sh")]))
    r = world.fire("PreToolUse", "--tool", "bash", "--input", "{}", "--json")
    kind = "exited with code 1"
    line = f"touch: cannot touch '{world.programs}/state.json': Read-only file system"
    hint = READ_ONLY_HINT.format(f=world.programs, h="state")
    assert r.code == 1
    assert r.err.splitlines()[1:4] == ["stderr of hook state (last lines):", f"  {line}",
                                       hint]
    doc = json.loads(r.out)
    assert doc["message"] == CALL_FAILED.format(h="state", k=kind)
    assert doc["failures"] == [{"hook": "state", "kind": kind, "stderr": line,
                                "hints": [hint[len("hint: "):]]}]
    assert (doc["outcome"], doc["refusals"], doc["error"]) == ("blocked", [], None)


@pytest.mark.parametrize("sandbox", [True, False], ids=["boxed", "host"])
def test_a_program_not_found_shows_its_stderr(world: World, sandbox: bool) -> None:
    world.hooks(entry("uv", [str(world.programs / "uv-hook.sh")], sandbox=sandbox))
    r = world.fire("PreToolUse", "--tool", "bash", "--input", "{}")
    assert r.code == 1
    assert r.err.splitlines()[1:4] == [
        "stderr of hook uv (last lines):",
        "  env: 'no-such-tool-hsbox': No such file or directory",
        NOT_FOUND_HINT.format(h="uv")]


@pytest.mark.parametrize("sandbox", [True, False], ids=["boxed", "host"])
def test_plain_text_from_a_prompt_hook_says_how_context_is_given(world: World,
                                                                 sandbox: bool) -> None:
    world.hooks(entry("reminder", [str(world.programs / "plain.sh")], event="UserPromptSubmit",
                      sandbox=sandbox))
    r = world.fire("UserPromptSubmit", "--prompt", "hi")
    kind = "printed output that is not hook JSON"
    assert r.code == 1
    assert r.err.splitlines() == [
        f"⚠ hook reminder is failing ({kind}), so your prompts are blocked. Fix it, set "
        'on_failure = "continue", or restart with --no-hooks.',
        CONTEXT_HINT.format(h="reminder"),
        f'✗ prompt blocked: hook "reminder" failed ({kind})']


def test_the_stderr_tail_is_cut_and_escaped_and_recorded(world: World) -> None:
    spec = HookSpec("noisy", "PreToolUse", (str(world.programs / "noisy.sh"),))
    log = world.base / "log.jsonl"
    with Session.open(str(world.project)) as session, rec.Recorder(log) as recorder:
        d = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="S",
                       recorder=recorder).pre_tool_use("bash", {}, tool_use_id="T")
    shown = "red \\x1b[31mX\\x1b[0m\\t"
    tail = "\n".join(["line 4", "line 5", "line 6", "line 7",
                      shown + "0" * (300 - len(shown)) + "…"])
    assert d.message == CALL_FAILED.format(h="noisy", k="exited with code 3")
    [failure] = d.failures
    assert (failure.kind, failure.stderr, failure.hints) == ("exited with code 3", tail, ())
    [decided] = [r for r in rec.read(log) if r["type"] == "hook.decided"]
    assert decided["stderr"] == tail and decided["failure"] == "exited with code 3"


def test_hook_json_on_a_refusal_holds_the_refusals_and_the_config_warnings(
        world: World) -> None:
    inside = world.project / "check.sh"
    inside.write_text("#!/bin/sh\n")
    inside.chmod(0o755)
    world.hooks(entry("guard", [str(inside)]).replace('event = "PreToolUse"\n',
                                                      'event = "PreToolUse"\ntools = ["Bash"]\n'))
    r = world.fire("PreToolUse", "--tool", "bash", "--input", "{}", "--json")
    reason = (f"hook guard: {inside} is in the project, so the agent could change it. Move it "
              "outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks.")
    warning = ('⚠ hook guard lists "Bash", which is not a tool here; tool names are lower '
               "case, such as bash.")
    assert r.code == 2
    assert r.err.splitlines() == [warning, reason]
    assert json.loads(r.out) == {
        "version": 1, "event": "PreToolUse", "outcome": "refused", "message": None,
        "contexts": [], "warnings": [warning], "hook": None, "failures": [],
        "refusals": [{"hook": "guard", "path": str(inside), "reason": reason,
                      "folder": str(world.project), "kind": "project"}],
        "error": None}
    world.config.write_text("[[hooks]]\n")
    bad = world.fire("PreToolUse", "--tool", "bash", "--json")
    doc = json.loads(bad.out)
    assert bad.code == 2 and doc["outcome"] == "error"
    assert doc["error"] == bad.err.strip() == (
        f'{world.config}: hook #1: key "name": missing; every hook needs a name of 1–32 of '
        'a-z, 0-9, "-", "_".')


def test_a_command_written_as_for_a_shell_is_refused_with_the_fix(world: World) -> None:
    script = world.programs / "plain.sh"
    world.hooks(
        entry("one-string", [f"python3 {script} --strict"]),
        entry("home-var", ["/bin/sh", "$HOME/x.sh"]),
        entry("project-var", ["/bin/sh", "$CLAUDE_PROJECT_DIR/.claude/hooks/x.sh"]),
        entry("tilde", ["~/bin/x.sh"]))
    r = world.cli("audit", "--project", str(world.project))
    assert r.code == 1
    assert r.err.splitlines()[1:-1] == [
        f"hook one-string: python3 {script} --strict must be an absolute path (a command with "
        "a / is not looked up on PATH). The command is an argv, one word per element: "
        f'["python3", "{script}", "--strict"].',
        "hook home-var: $HOME/x.sh is not expanded: no shell runs the command, so variables "
        "and ~ stay as written, and as written it is a path relative to the project "
        f"({world.project}/$HOME/x.sh), which the agent could create or change; write the "
        f"path out: {world.home}/x.sh.",
        "hook project-var: $CLAUDE_PROJECT_DIR/.claude/hooks/x.sh is not expanded: no shell "
        "runs the command, so variables and ~ stay as written, and as written it is a path "
        f"relative to the project ({world.project}/$CLAUDE_PROJECT_DIR/.claude/hooks/x.sh), "
        "which the agent could create or change; write the path out ($CLAUDE_PROJECT_DIR is "
        "not set here).",
        "hook tilde: ~/bin/x.sh must be an absolute path (a command with a / is not looked up "
        "on PATH). Variables and ~ are not expanded (no shell runs the command); write the "
        f"path out: {world.home}/bin/x.sh."]


def test_version_is_the_packages(world: World) -> None:
    from importlib.metadata import version

    r = world.cli("--version")
    line = f"harness-sandbox {version('harness-sandbox')}\n"
    assert (r.code, r.out, r.err) == (0, line, "")
    # python -m launchers behaves as the console script.
    for argv in (["-m", "launchers", "--version"],
                 [str(Path(sys.executable).parent / "harness-sandbox"), "--version"]):
        cmd = argv if not argv[0].startswith("-") else [sys.executable, *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
        assert (done.returncode, done.stdout) == (0, line)
