"""``harness-sandbox audit`` and ``harness-sandbox banner``, run as the real CLI in a
subprocess against real configs, real trees and real links."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO

from launchers.openharness import trust

HOOKS = REPO / "scripts" / "hooks"
FIX = "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks."
BANNER = ("hooks: no-force-push (bash, exec) · keywords (prompts) · notify (every tool, on "
          "the host)")


@dataclass
class Done:
    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        return json.loads(self.out)

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()


@dataclass
class World:
    """A home folder, a HARNESS_HOME and a project, all under the test's tmp_path."""

    tmp: Path
    home: Path
    harness_home: Path
    project: Path

    @property
    def config(self) -> Path:
        return self.harness_home / "config.toml"

    def write_config(self, text: str) -> Path:
        self.config.write_text(text, encoding="utf-8")
        return self.config

    def run(self, *args: str, env: dict[str, str] | None = None) -> Done:
        full = {
            "HOME": str(self.home),
            "HARNESS_HOME": str(self.harness_home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
        }
        full.update(env or {})
        p = subprocess.run([sys.executable, "-m", "launchers.cli", *args], cwd=self.tmp,
                           env=full, capture_output=True, timeout=60)
        return Done(p.returncode, p.stdout.decode(), p.stderr.decode())

    def audit(self, *args: str, env: dict[str, str] | None = None) -> Done:
        return self.run("audit", "--project", str(self.project), *args, env=env)


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path, tmp_path / "home", tmp_path / "harness-home", tmp_path / "proj")
    for d in (w.home, w.harness_home, w.project):
        d.mkdir()
    return w


@pytest.fixture
def slash_tmp() -> Iterator[Path]:
    """A folder under the system /tmp itself, whatever TMPDIR says."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        yield Path(d)


def hook(name: str, command: list[str], *, event: str = "PreToolUse",
         extra: str = "") -> str:
    return (f'[[hooks]]\nname = "{name}"\nevent = "{event}"\n'
            f"command = {json.dumps(command)}\n{extra}\n")


def script(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def example_config() -> str:
    text = (REPO / "examples" / "config.toml").read_text(encoding="utf-8")
    return text.replace("@HOOKS@", str(HOOKS))


# -- what may run ----------------------------------------------------------------------

def test_the_example_config_may_run(world: World) -> None:
    world.write_config(example_config())
    done = world.audit()
    assert (done.code, done.out) == (0, "")
    assert done.lines == [BANNER, "audit: 3 hooks may run"]


def test_the_json_document_describes_every_hook(world: World) -> None:
    world.write_config(example_config())
    done = world.audit("--json")
    assert done.code == 0
    doc = done.doc
    python3 = doc["hooks"][1]["command"][0]
    assert os.path.isabs(python3) and os.path.basename(python3) == "python3"
    assert doc == {
        "version": 1,
        "config": str(world.config),
        "project": str(world.project),
        "sandbox": True,
        "network": {"mode": "none", "allow": None},
        "box": {"name": "namespaces", "gives_up": []},
        "hooks": [
            {"name": "no-force-push", "source": "harness", "event": "PreToolUse",
             "tools": ["bash", "exec"], "sandbox": True, "runs": "box", "verdict": "ok",
             "command": [f"{HOOKS}/no-force-push.sh"], "refusals": []},
            {"name": "keywords", "source": "harness", "event": "UserPromptSubmit",
             "tools": None, "sandbox": True, "runs": "box", "verdict": "ok",
             "command": [python3, f"{HOOKS}/keyword-detector.py"], "refusals": []},
            {"name": "notify", "source": "harness", "event": "PreToolUse",
             "tools": None, "sandbox": False, "runs": "host", "verdict": "ok",
             "command": [f"{HOOKS}/notify.sh"], "refusals": []},
        ],
        "warnings": [],
        "ok": True,
    }
    # People's messages stay on stderr, even with --json.
    assert done.lines == [BANNER, "audit: 3 hooks may run"]


def test_no_config_file_means_no_hooks_to_check(world: World) -> None:
    done = world.audit()
    assert done.code == 0
    assert done.lines == ["hooks: none",
                          f"audit: no hooks to check ({world.config} does not exist)"]


def test_a_config_without_hooks_has_nothing_to_check(world: World) -> None:
    world.write_config('model = "m"\n')
    done = world.audit("--json")
    assert done.code == 0
    assert done.lines == ["hooks: none", "audit: no hooks to check"]
    assert done.doc["hooks"] == [] and done.doc["ok"] is True


def test_one_hook_is_counted_in_the_singular(world: World) -> None:
    world.write_config(hook("one", ["/bin/sh", "-c", "exit 0"]))
    assert world.audit().lines[-1] == "audit: 1 hook may run"


# -- what is refused ---------------------------------------------------------------------

def test_a_hook_in_the_project_is_refused_with_the_seed_message(world: World) -> None:
    check = script(world.project / "hooks" / "check.sh")
    world.write_config(example_config() + hook("in-project", [str(check)]))
    done = world.audit("--json")
    assert done.code == 1
    message = f"hook in-project: {check} is in the project, so the agent could change it. {FIX}"
    assert done.lines == [BANNER + " · in-project (every tool)", message,
                          "audit: 1 of 4 hooks refused"]
    entry = done.doc["hooks"][3]
    assert entry["verdict"] == "refused"
    assert entry["refusals"] == [{"path": str(check), "reason": message,
                                  "folder": str(world.project), "kind": "project"}]
    assert done.doc["ok"] is False
    assert [h["verdict"] for h in done.doc["hooks"][:3]] == ["ok", "ok", "ok"]


def test_a_link_that_leads_into_the_project_is_refused(world: World) -> None:
    check = script(world.project / "check.sh")
    link = world.tmp / "elsewhere" / "check.sh"
    link.parent.mkdir()
    link.symlink_to(check)
    world.write_config(hook("linked", [str(link)], extra="sandbox = false"))
    done = world.audit("--json")
    assert done.code == 1
    (refusal,) = done.doc["hooks"][0]["refusals"]
    assert (refusal["path"], refusal["kind"], refusal["folder"]) == (
        str(link), "project", str(world.project))
    assert refusal["reason"].startswith(f"hook linked: {link} is in the project")


def test_a_dangling_link_into_the_project_is_refused(world: World) -> None:
    link = world.tmp / "elsewhere" / "later.sh"
    link.parent.mkdir()
    link.symlink_to(world.project / "not-yet.sh")
    world.write_config(hook("dangling", ["/bin/sh", str(link)], extra="sandbox = false"))
    done = world.audit("--json")
    assert done.code == 1
    assert [r["kind"] for r in done.doc["hooks"][0]["refusals"]] == ["project"]


def test_an_argument_in_the_project_is_refused(world: World) -> None:
    rules = world.project / "rules.yaml"
    rules.write_text("rules: []\n")
    world.write_config(hook("args", ["/bin/sh", f"--rules={rules}"], extra="sandbox = false"))
    done = world.audit()
    assert done.code == 1
    assert done.lines[1] == (f"hook args: {rules} is in the project, so the agent could "
                             f"change it. {FIX}")


def test_every_refused_path_of_a_hook_is_reported(world: World) -> None:
    a = script(world.project / "a.sh")
    b = world.project / "b.txt"
    b.write_text("x")
    world.write_config(hook("two", [str(a), str(b)], extra="sandbox = false"))
    done = world.audit("--json")
    assert done.code == 1
    assert [r["path"] for r in done.doc["hooks"][0]["refusals"]] == [str(a), str(b)]
    assert done.lines[-1] == "audit: 1 of 1 hook refused"


def test_a_boxed_hook_under_tmp_is_refused_but_a_host_hook_is_not(world: World,
                                                                  slash_tmp: Path) -> None:
    # Under bubblewrap the box's /tmp is the agent's; the host's /tmp is not (there is a
    # sandbox), so only the boxed hook is refused.
    check = script(slash_tmp / "hooks" / "check.sh")
    world.write_config(hook("boxed", [str(check)])
                       + hook("host", [str(check)], extra="sandbox = false"))
    done = world.audit("--json")
    assert done.code == 1
    message = (f"hook boxed: {check} is in the system temp folder (/tmp), so the agent "
               f"could change it. {FIX}")
    assert done.lines[1:] == [message, "audit: 1 of 2 hooks refused"]
    boxed, host = done.doc["hooks"]
    assert boxed["refusals"] == [{"path": str(check), "reason": message, "folder": "/tmp",
                                  "kind": "writable"}]
    assert (host["runs"], host["verdict"]) == ("host", "ok")


def test_a_boxed_hook_in_a_hidden_folder_is_refused(world: World) -> None:
    program = HOOKS / "no-force-push.sh"
    world.write_config(hook("hidden", [str(program)])
                       + hook("host", [str(program)], extra="sandbox = false")
                       + f"[sandbox]\nhidden = [{json.dumps(str(HOOKS))}]\n")
    done = world.audit("--json")
    assert done.code == 1
    message = (f"hook hidden: {program} is in a folder the sandbox hides ({HOOKS}), so the "
               "hook could not read it. Move it, or set sandbox = false for this hook.")
    assert done.lines[1:] == [message, "audit: 1 of 2 hooks refused"]
    assert done.doc["hooks"][0]["refusals"] == [
        {"path": str(program), "reason": message, "folder": str(HOOKS), "kind": "hidden"}]
    assert done.doc["hooks"][1]["verdict"] == "ok"


def test_a_writable_folder_from_the_sandbox_table_counts(world: World) -> None:
    shared = world.tmp / "shared"
    check = script(shared / "check.sh")
    world.write_config(hook("shared", [str(check)], extra="sandbox = false")
                       + f"[sandbox]\nwritable = [{json.dumps(str(shared))}]\n")
    done = world.audit("--json")
    assert done.code == 1
    message = (f"hook shared: {check} is in a writable folder ({shared}), so the agent "
               f"could change it. {FIX}")
    assert done.lines[1:] == [message, "audit: 1 of 1 hook refused"]
    assert done.doc["hooks"][0]["refusals"][0]["kind"] == "writable"
    assert done.doc["hooks"][0]["refusals"][0]["folder"] == str(shared)


def test_a_program_not_on_path_is_refused(world: World) -> None:
    world.write_config(hook("missing", ["no-such-program-hsbox"]))
    done = world.audit("--json")
    assert done.code == 1
    message = "hook missing: no-such-program-hsbox was not found."
    assert done.lines[1:] == [message, "audit: 1 of 1 hook refused"]
    assert done.doc["hooks"][0]["refusals"] == [
        {"path": "no-such-program-hsbox", "reason": message, "folder": None,
         "kind": "not-found"}]


def test_an_absolute_program_that_does_not_exist_is_refused(world: World) -> None:
    world.write_config(hook("gone", ["/nonexistent-hsbox/check.sh"]))
    done = world.audit("--json")
    assert done.code == 1
    assert done.doc["hooks"][0]["refusals"] == [
        {"path": "/nonexistent-hsbox/check.sh",
         "reason": "hook gone: /nonexistent-hsbox/check.sh was not found.",
         "folder": None, "kind": "not-found"}]


def test_a_relative_program_with_a_slash_is_refused(world: World) -> None:
    world.write_config(hook("rel", ["hooks/check.sh"]))
    done = world.audit("--json")
    assert done.code == 1
    message = ("hook rel: hooks/check.sh must be an absolute path (a command with a / is "
               "not looked up on PATH).")
    assert done.lines[1:] == [message, "audit: 1 of 1 hook refused"]
    assert done.doc["hooks"][0]["refusals"][0]["kind"] == "not-absolute"


def test_the_example_config_with_its_placeholder_left_in_is_refused(world: World) -> None:
    world.write_config((REPO / "examples" / "config.toml").read_text(encoding="utf-8"))
    done = world.audit("--json")
    assert done.code == 1
    kinds = [[r["kind"] for r in h["refusals"]] for h in done.doc["hooks"]]
    # A relative argument shaped like a path is read from the project, where the agent
    # could create it.
    assert kinds == [["not-absolute"], ["project"], ["not-absolute"]]
    assert done.lines[-1] == "audit: 3 of 3 hooks refused"


def test_a_path_that_cannot_be_traced_is_refused_as_undecidable(world: World) -> None:
    loop = world.tmp / "loop"
    loop.symlink_to(loop)
    world.write_config(hook("loop", ["/bin/sh", str(loop)], extra="sandbox = false"))
    done = world.audit("--json")
    assert done.code == 1
    message = (f"hook loop: {loop} cannot be checked: a link loop or a chain of more than "
               "40 links, so the hook is refused.")
    assert done.lines[1:] == [message, "audit: 1 of 1 hook refused"]
    assert done.doc["hooks"][0]["refusals"] == [
        {"path": str(loop), "reason": message, "folder": None, "kind": "undecidable"}]


def test_a_boxed_program_found_on_path_is_checked_where_it_was_found(world: World) -> None:
    bin_dir = world.project / "bin"
    script(bin_dir / "planted-hsbox")
    world.write_config(hook("planted", ["planted-hsbox"]))
    done = world.audit("--json", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert done.code == 1
    entry = done.doc["hooks"][0]
    assert entry["command"] == [f"{bin_dir}/planted-hsbox"]
    assert entry["refusals"][0]["kind"] == "project"


def test_a_host_hook_looks_its_program_up_on_the_pruned_path(world: World) -> None:
    # The agent's folders are not on a host hook's PATH, so a program planted there is
    # not found by name: the audit agrees with what the run would do.
    bin_dir = world.project / "bin"
    script(bin_dir / "planted-hsbox")
    world.write_config(hook("planted", ["planted-hsbox"], extra="sandbox = false"))
    done = world.audit("--json", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert done.code == 1
    assert done.lines[1:] == ["hook planted: planted-hsbox was not found.",
                              "audit: 1 of 1 hook refused"]
    assert done.doc["hooks"][0]["refusals"][0]["kind"] == "not-found"


# -- sessions with no sandbox -------------------------------------------------------------

def test_with_no_sandbox_every_hook_runs_on_the_host_and_tmp_is_writable(
        world: World, slash_tmp: Path) -> None:
    check = script(slash_tmp / "hooks" / "check.sh")
    world.write_config(hook("host", [str(check)], extra="sandbox = false"))
    done = world.audit("--no-sandbox", "--json")
    assert done.code == 1
    assert done.lines[0] == "hooks: host (every tool, on the host)"
    assert done.lines[1] == (f"hook host: {check} is in the system temp folder (/tmp), so "
                             f"the agent could change it. {FIX}")
    assert done.doc["sandbox"] is False
    assert done.doc["hooks"][0]["runs"] == "host"


def test_sandbox_enabled_false_is_a_session_with_no_sandbox(world: World) -> None:
    world.write_config(hook("a", [str(HOOKS / "no-force-push.sh")])
                       + "[sandbox]\nenabled = false\n")
    done = world.audit("--json")
    assert done.code == 0
    assert done.lines == ["hooks: a (every tool, on the host)", "audit: 1 hook may run"]
    assert done.doc["sandbox"] is False
    assert (done.doc["hooks"][0]["sandbox"], done.doc["hooks"][0]["runs"]) == (False, "host")


def test_hidden_folders_do_not_count_without_a_sandbox(world: World) -> None:
    program = HOOKS / "no-force-push.sh"
    world.write_config(hook("h", [str(program)])
                       + f"[sandbox]\nhidden = [{json.dumps(str(HOOKS))}]\n")
    assert world.audit().code == 1
    assert world.audit("--no-sandbox").code == 0


# -- warnings and errors -----------------------------------------------------------------

def test_tool_name_warnings_are_printed_and_reported(world: World) -> None:
    world.write_config(hook("no-force-push", ["/bin/sh"], extra='tools = ["Bash"]'))
    done = world.audit("--json")
    warning = ('⚠ hook no-force-push lists "Bash", which is not a tool here; tool names '
               "are lower case, such as bash.")
    assert done.code == 0
    assert done.lines == ["hooks: no-force-push (Bash)", warning, "audit: 1 hook may run"]
    assert done.doc["warnings"] == [warning]


def test_a_config_error_exits_2_and_names_the_file_hook_and_key(world: World) -> None:
    world.write_config(hook("no-force-push", ["/bin/sh"], extra="timeout = 0"))
    message = (f'{world.config}: hook "no-force-push": key "timeout": 0 is out of range; '
               "use whole seconds from 1 to 600.")
    done = world.audit()
    assert (done.code, done.out, done.lines) == (2, "", [message])
    done = world.audit("--json")
    assert done.code == 2
    assert done.doc == {"version": 1, "ok": False, "error": message}
    assert done.lines == [message]


def test_a_toml_syntax_error_exits_2(world: World) -> None:
    world.write_config("[[hooks]\n")
    done = world.audit()
    assert done.code == 2
    assert done.lines == [f"{world.config}: not valid TOML: Expected ']]' at the end of "
                          "an array declaration (at line 1, column 8)."]


def test_a_config_inside_the_project_exits_2(world: World) -> None:
    inside = world.project / ".harness"
    inside.mkdir()
    (inside / "config.toml").write_text(example_config())
    done = world.audit(env={"HARNESS_HOME": str(inside)})
    assert done.code == 2
    assert done.lines == [
        f"{inside}/config.toml: this config is inside the project ({world.project}), so the "
        "agent could change it; its hooks and sandbox settings are refused. Keep the user "
        "config outside the project (it was found through HARNESS_HOME)."]


def test_the_rule_holds_for_a_config_option_inside_the_project(world: World) -> None:
    (world.project / "my.toml").write_text("")
    done = world.audit("--config", str(world.project / "my.toml"))
    assert done.code == 2
    assert done.lines[0].endswith("outside the project (--config names it).")


def test_a_config_option_overrides_harness_home(world: World) -> None:
    other = world.tmp / "other.toml"
    other.write_text(hook("other", ["/bin/sh"]))
    world.write_config(hook("home", ["/bin/sh"]))
    done = world.audit("--config", str(other), "--json")
    assert done.code == 0
    assert done.doc["config"] == str(other)
    assert [h["name"] for h in done.doc["hooks"]] == ["other"]


def test_a_missing_writable_folder_exits_2(world: World) -> None:
    world.write_config('[sandbox]\nwritable = ["/nonexistent-hsbox"]\n')
    done = world.audit("--json")
    message = (f"{world.config}: [sandbox]: the writable path /nonexistent-hsbox does not "
               "exist; make it (mkdir -p /nonexistent-hsbox) or take it out of [sandbox] "
               "writable.")
    assert (done.code, done.lines) == (2, [message])
    assert done.doc == {"version": 1, "ok": False, "error": message}


def test_a_project_that_is_not_a_folder_exits_2(world: World) -> None:
    done = world.run("audit", "--project", str(world.tmp / "nope"))
    assert (done.code, done.lines) == (2, [f"the project {world.tmp}/nope is not a "
                                           "directory."])


# -- openHarness hooks ---------------------------------------------------------------------

def test_openharness_hooks_are_audited_beside_the_user_config(world: World) -> None:
    oh = world.project / ".oh"
    oh.mkdir()
    planted = script(world.project / "hooks" / "gate.sh")
    (oh / "config.yaml").write_text(
        "hooks:\n  preToolUse:\n"
        f"    - command: {json.dumps(str(planted))}\n"
        f"    - command: {json.dumps(str(HOOKS / 'no-force-push.sh'))}\n")
    world.write_config(hook("mine", [str(HOOKS / "no-force-push.sh")]))
    assert world.run("trust", "--openharness", str(oh / "config.yaml")).code == 0
    done = world.audit("--openharness", str(oh / "config.yaml"), "--json")
    assert done.code == 1
    names = [(h["name"], h["source"], h["verdict"]) for h in done.doc["hooks"]]
    assert names[0] == ("mine", "harness", "ok")
    assert [(s, v) for _, s, v in names[1:]] == [("openharness", "refused"),
                                                ("openharness", "ok")]
    assert all(n.startswith("preToolUse") for n, _, _ in names[1:])
    refusal = done.doc["hooks"][1]["refusals"][0]
    assert (refusal["path"], refusal["kind"]) == (str(planted), "project")
    assert done.lines[-1] == "audit: 1 of 3 hooks refused"


def test_an_openharness_load_error_exits_2(world: World) -> None:
    bad = world.tmp / "config.yaml"
    bad.write_text("hooks:\n  preToolUse:\n    - nothing: 1\n")
    # trust refuses a file it cannot read as hooks; trusted all the same, it is an error.
    assert world.run("trust", "--openharness", str(bad)).code == 2
    trust.record(trust.read_file(str(bad)),
                 path=str(world.home / ".local/share/harness/trusted.json"))
    done = world.audit("--openharness", str(bad), "--json")
    assert done.code == 2
    assert done.doc["ok"] is False
    assert done.doc["error"].startswith(f"{bad}: ")
    assert done.lines == [done.doc["error"]]


# -- many hooks ----------------------------------------------------------------------------

def test_a_thousand_hooks_are_each_judged(world: World) -> None:
    good = HOOKS / "no-force-push.sh"
    bad = script(world.project / "hooks" / "bad.sh")
    parts = []
    for i in range(1000):
        target = bad if i % 4 == 0 else good
        parts.append(hook(f"h{i:04d}", [str(target), f"--n={i}"],
                          extra="sandbox = false" if i % 2 else ""))
    world.write_config("".join(parts))
    done = world.audit("--json")
    assert done.code == 1
    doc = done.doc
    assert [h["name"] for h in doc["hooks"]] == [f"h{i:04d}" for i in range(1000)]
    assert [h["verdict"] for h in doc["hooks"]] == [
        "refused" if i % 4 == 0 else "ok" for i in range(1000)]
    assert [h["runs"] for h in doc["hooks"]] == [
        "host" if i % 2 else "box" for i in range(1000)]
    assert done.lines[-1] == "audit: 250 of 1000 hooks refused"
    assert len(done.lines) == 1 + 250 + 1


# -- banner ----------------------------------------------------------------------------------

def test_banner_prints_the_hooks_line_on_stdout(world: World) -> None:
    world.write_config(example_config())
    done = world.run("banner", "--project", str(world.project))
    assert (done.code, done.out, done.err) == (0, BANNER + "\n", "")


def test_banner_says_off_with_no_hooks(world: World) -> None:
    world.write_config(example_config())
    done = world.run("banner", "--project", str(world.project), "--no-hooks")
    assert (done.code, done.out) == (0, "hooks: off (--no-hooks)\n")


def test_banner_says_none_without_a_config(world: World) -> None:
    done = world.run("banner", "--project", str(world.project))
    assert (done.code, done.out) == (0, "hooks: none\n")


def test_banner_marks_every_hook_on_the_host_with_no_sandbox(world: World) -> None:
    world.write_config(example_config())
    done = world.run("banner", "--project", str(world.project), "--no-sandbox")
    assert done.out == ("hooks: no-force-push (bash, exec, on the host) · keywords (prompts, "
                        "on the host) · notify (every tool, on the host)\n")


def test_banner_prints_warnings_on_stderr(world: World) -> None:
    world.write_config(hook("x", ["/bin/sh"], extra='tools = ["Read"]'))
    done = world.run("banner", "--project", str(world.project))
    assert done.code == 0
    assert done.out == "hooks: x (Read)\n"
    assert done.lines == ['⚠ hook x lists "Read", which is not a tool here; tool names '
                          "are lower case, such as read_file."]


def test_banner_exits_2_on_a_config_error(world: World) -> None:
    world.write_config(hook("x", ["/bin/sh"], extra='matcher = "Bash"'))
    done = world.run("banner", "--project", str(world.project))
    assert (done.code, done.out) == (2, "")
    assert done.lines == [f'{world.config}: hook "x": unknown key "matcher"; harness hooks '
                          'choose tools with tools = ["bash", ...], not matcher.']
