"""The guard by identity: bind-mount aliases, hard links, more argument forms, and what
runs is what was checked.

Each attack is made as the agent would make it: the hook passes the spelling checks,
the agent changes what it runs from inside the real box, then the host would run it.
Each test asserts that the host never does (a marker file stays absent) and the exact
refusal or failure text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.trees import FIX_W

from launchers.config import Config, HookSpec, OnFailure
from launchers.harness.hooks import Decision, HookRefused, HookRunner
from sandbox.session import Session

CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
FIX_ALIAS = ("Copy it outside (for example to ~/.local/share/harness/hooks/) instead of "
             "mounting it, or start with --no-hooks.")
FIX_LINK = "Copy it (cp, not ln) so that it is a file of its own, or start with --no-hooks."
FAILING = ("This is not a policy decision: retrying or rephrasing the call will not help. "
           "Tell the user their hook is failing.")

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = Path(os.path.realpath(tmp_path)) / "proj"
    p.mkdir()
    return p


@pytest.fixture
def tools(project: Path) -> Path:
    """Where the user keeps hook programs: beside the project (outside it), on its file
    system. A host hook under /tmp is accepted in a sandboxed session (the box's /tmp
    is its own)."""
    t = project.parent / "tools"
    t.mkdir()
    return t


@pytest.fixture
def session(project: Path) -> Iterator[Session]:
    with Session.open(str(project)) as s:
        yield s


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def host_hook(name: str, *command: str | Path, on_failure: OnFailure = "block") -> HookSpec:
    return HookSpec(name=name, event="PreToolUse", command=tuple(str(c) for c in command),
                    sandbox=False, on_failure=on_failure)


def runner(session: Session, *specs: HookSpec) -> HookRunner:
    return HookRunner(Config(path=None, hooks=specs), session, session_id="01MSESSION")


def call(r: HookRunner) -> Decision:
    return r.pre_tool_use("bash", {"command": "ls"}, tool_use_id="7EX")


def in_box(session: Session, shell: str) -> None:
    """The agent's step: a shell command in the session's real box, in the project."""
    done = session.run(["/bin/sh", "-c", shell], timeout=30)
    assert done.ok, done.stderr.decode()


def failed(hook: str, path: Path) -> str:
    return (f'the user\'s hook "{hook}" failed (could not start: {path} changed since the '
            f"session started), so this call was blocked. {FAILING}")


# -- hard links --------------------------------------------------------------------------


def test_a_hard_link_of_a_project_file_is_refused_and_its_rewrite_never_runs(
        project: Path, tools: Path, session: Session) -> None:
    marker = tools / "PWNED"
    hook = script(tools / "check.sh", "exit 0")
    (project / "hooks").mkdir()
    os.link(hook, project / "hooks" / "check.sh")
    # The agent rewrites the project's name in place; the hook's name is the same file.
    in_box(session, f"printf '#!/bin/sh\\ntouch {marker}\\n' > hooks/check.sh")
    assert str(marker) in hook.read_text()
    with pytest.raises(HookRefused) as err:
        call(runner(session, host_hook("check", hook)))
    assert err.value.messages == (
        f"hook check: {hook} has 2 hard links and lies on the file system of the project, "
        "so another of its names may be there and the agent could change it through that "
        f"name. {FIX_LINK}",)
    assert not marker.exists()


def test_audit_json_gives_a_hard_link_its_kind(project: Path, tools: Path,
                                             tmp_path: Path) -> None:
    hook = script(tools / "check.sh", "exit 0")
    os.link(hook, project / "check.sh")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[[hooks]]\nname = "check"\nevent = "PreToolUse"\ncommand = ["{hook}"]\n'
        "sandbox = false\n")
    done = subprocess.run([CLI, "audit", "--json", "--project", str(project)],
                          env={"HARNESS_HOME": str(home), "HOME": str(home), "LANG": "C.UTF-8",
                               "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    message = (f"hook check: {hook} has 2 hard links and lies on the file system of the "
               "project, so another of its names may be there and the agent could change it "
               f"through that name. {FIX_LINK}")
    assert json.loads(done.stdout)["hooks"][0]["refusals"] == [
        {"path": str(hook), "reason": message, "folder": str(project), "kind": "hard-link"}]


def test_a_program_whose_other_names_all_lie_beside_it_is_accepted(
        project: Path, tools: Path, session: Session) -> None:
    # Like /usr/bin/perl and perl5.36.0: every name is known, none is the agent's.
    hook = script(tools / "check.sh", "exit 0")
    os.link(hook, tools / "check-1.0.sh")
    assert call(runner(session, host_hook("check", hook))).outcome == "allowed"


# -- what runs is what was checked ---------------------------------------------------------


def test_a_link_re_pointed_after_the_check_is_not_run(tools: Path, session: Session) -> None:
    marker = tools / "PWNED"
    script(tools / "a.sh", "exit 0")
    script(tools / "b.sh", f"touch {marker}")
    link = tools / "hook.sh"
    link.symlink_to("a.sh")
    r = runner(session, host_hook("check", link))
    assert call(r).outcome == "allowed"
    link.unlink()
    link.symlink_to("b.sh")
    d = call(r)
    assert (d.outcome, d.message) == ("blocked", failed("check", link))
    assert d.warnings == [
        f"⚠ hook check is failing (could not start: {link} changed since the session "
        "started), so the calls it covers are blocked. Fix it, set on_failure = "
        '"continue", or restart with --no-hooks.']
    assert not marker.exists()


def test_a_file_rewritten_in_place_after_the_check_is_not_run(tools: Path,
                                                             session: Session) -> None:
    marker = tools / "PWNED"
    hook = script(tools / "check.sh", "exit 0")
    r = runner(session, host_hook("check", "/bin/sh", hook, on_failure="continue"))
    assert call(r).outcome == "allowed"
    time.sleep(0.05)  # past the file system's clock tick, so that ctime moves
    before = hook.stat().st_ino
    with open(hook, "r+") as f:  # in place: the same inode
        f.write(f"#!/bin/sh\ntouch {marker}\n")
        f.truncate()
    assert hook.stat().st_ino == before
    d = call(r)
    assert d.outcome == "allowed"
    assert d.warnings == [f"⚠ hook check failed (could not start: {hook} changed since the "
                          'session started); on_failure = "continue" let the call through.']
    assert not marker.exists()


def test_the_failure_is_recorded_as_could_not_start(tools: Path, session: Session) -> None:
    hook = script(tools / "check.sh", "exit 0")
    r = runner(session, host_hook("check", hook))
    hook.unlink()
    script(hook, "exit 0")  # replaced: a new inode under the same name
    d = call(r)
    [row] = [x for x in d.records if x["type"] == "hook.decided"]
    assert row["failure"] == f"could not start: {hook} changed since the session started"


# -- argument forms -------------------------------------------------------------------------


def test_perl_with_an_include_attached_to_its_option_cannot_load_the_agents_module(
        project: Path, tools: Path, session: Session) -> None:
    marker = tools / "PWNED"
    perl = shutil.which("perl") or "/usr/bin/perl"
    spec = host_hook("perl-hook", perl, f"-I{project}/lib", "-MHookLib", "-e", "1")
    in_box(session, "mkdir -p lib && cat > lib/HookLib.pm <<'EOF'\n"
                    f'package HookLib; open(my $f, ">", "{marker}"); 1;\nEOF')
    with pytest.raises(HookRefused) as err:
        call(runner(session, spec))
    assert err.value.messages == (
        f"hook perl-hook: {project}/lib is in the project, so the agent could change it. "
        f"{FIX_W}",)
    assert not marker.exists()


def test_env_with_an_assignment_outside_the_project_runs(session: Session) -> None:
    r = runner(session, host_hook("env-hook", "env", "X=/usr/share", "/bin/true"))
    assert call(r).outcome == "allowed"


def test_an_assignment_into_the_project_is_refused_naming_its_value(
        project: Path, session: Session) -> None:
    with pytest.raises(HookRefused) as err:
        runner(session, host_hook("env-hook", "env", "RULES=hooks/r.yaml", "/bin/true"))
    assert err.value.messages == (
        f"hook env-hook: hooks/r.yaml is in the project, so the agent could change it. "
        f"{FIX_W}",)


# -- mount aliases: a bind of a project folder, an overlay whose layer is one ------------

ALIAS_DRIVER = r"""
set -u
if [ "$KIND" = bind ]; then
    mount --bind "$PROJ/hooks" "$ALIAS" || exit 97
else
    mount -t overlay overlay -o "lowerdir=$PROJ/hooks,upperdir=$UP,workdir=$WORK" \
        "$ALIAS" || exit 97
fi
cd /
"$CLI" audit --json --project "$PROJ" > "$OUT/audit.json" 2> "$OUT/audit.err"
echo $? > "$OUT/audit.rc"
"$CLI" run --project "$PROJ" -- /bin/sh -c \
    "printf '#!/bin/sh\ntouch $MARK\n' > hooks/check.sh" 2> "$OUT/run.err"
echo $? > "$OUT/run.rc"
"$CLI" hook PreToolUse --tool bash --input '{"command": "ls"}' --project "$PROJ" \
    > "$OUT/hook.out" 2> "$OUT/hook.err"
echo $? > "$OUT/hook.rc"
"""


def _unshare() -> list[str]:
    # A mount namespace of the test's own: the bind is real, and gone with the process.
    # Root needs nothing more; another user makes it inside a user namespace it owns.
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private"]
    return ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]


@pytest.mark.parametrize("kind", ["bind", "overlay"])
def test_a_hook_under_a_mount_of_the_project_is_refused_and_never_runs(
        project: Path, tmp_path: Path, kind: str) -> None:
    alias, out, home = tmp_path / "alias", tmp_path / "out", tmp_path / "home"
    for d in (alias, out, home, tmp_path / "tmp", tmp_path / "up", tmp_path / "work"):
        d.mkdir()
    marker = tmp_path / "PWNED"
    script(project / "hooks" / "check.sh", "exit 0")
    (home / "config.toml").write_text(
        '[[hooks]]\nname = "check"\nevent = "PreToolUse"\n'
        f'command = ["{alias}/check.sh"]\nsandbox = false\n')
    env = {"PROJ": str(project), "ALIAS": str(alias), "OUT": str(out), "CLI": CLI,
           "MARK": str(marker), "HARNESS_HOME": str(home), "HOME": str(home),
           "TMPDIR": str(tmp_path / "tmp"), "KIND": kind, "UP": str(tmp_path / "up"),
           "WORK": str(tmp_path / "work"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "LANG": "C.UTF-8"}
    done = subprocess.run([*_unshare(), "/bin/sh", "-c", ALIAS_DRIVER], env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()

    def read(name: str) -> str:
        return (out / name).read_text()

    message = (f"hook check: {alias}/check.sh is the same as {project}/hooks/check.sh "
               f"through the mount at {alias}, which is in the project, so the agent could "
               f"change it. {FIX_ALIAS}")
    assert read("audit.rc").strip() == "1", read("audit.err")
    audit: dict[str, Any] = json.loads(read("audit.json"))
    assert audit["hooks"][0]["refusals"] == [{"path": f"{alias}/check.sh", "reason": message,
                                              "folder": str(project), "kind": "alias"}]
    assert read("run.rc").strip() == "0", read("run.err")
    assert str(marker) in (project / "hooks" / "check.sh").read_text()
    assert read("hook.rc").strip() == "2"
    assert read("hook.err").strip() == message
    assert not marker.exists()


# -- the openHarness front ------------------------------------------------------------------


def test_an_openharness_hook_re_pointed_after_the_check_is_not_run(
        project: Path, tools: Path, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.trusting import data_home, trust_file

    from launchers.openharness.envelope import Context
    from launchers.openharness.fire import admit, fire, session_runner
    from launchers.openharness.trust import load

    marker = tools / "PWNED"
    script(tools / "a.sh", "exit 0")
    script(tools / "b.sh", f"touch {marker}")
    link = tools / "hook.sh"
    link.symlink_to("a.sh")
    oh_file = project.parent / "oh.yaml"
    oh_file.write_text(f"hooks:\n  preToolUse:\n    - command: '{link}'\n")
    with data_home(monkeypatch):
        trust_file(oh_file)
        config = load(str(oh_file))
    admitted = admit(config, policy=session.policy)
    assert [v.refusals for _, v in admitted.checked] == [()]
    run = session_runner(session, admitted.hooks)
    ctx = Context(tool_name="Bash", cwd=str(project))
    assert fire(config, "preToolUse", ctx, runner=run).decision == "allow"
    link.unlink()
    link.symlink_to("b.sh")
    result = fire(config, "preToolUse", ctx, runner=run)
    why = f"could not start: {link} changed since the session started"
    assert (result.decision, result.reason) == ("deny", f"hook preToolUse[0] failed ({why})")
    assert not marker.exists()
