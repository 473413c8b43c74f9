"""The bubblewrap plan builder: exact argv for sample policies, on real temporary trees."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Unpack

import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.linux import bwrap
from sandbox.plan import LaunchPlan
from sandbox.policy import Policy, PolicyOptions
from sandbox.policy.env import PROVIDER_KEYS

BWRAP = "/usr/bin/bwrap"
PROC_RO = [x for name in bwrap.PROC_READ_ONLY for x in ("--ro-bind-try", name, name)]
TTY = [x for fd in range(3)
       for x in ("--symlink", f"/proc/self/fd/{fd}", f"/dev/tty-of-the-run-{fd}")]
HEAD = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *TTY, *PROC_RO,
        "--ro-bind", "/dev/null", "/proc/keys", "--ro-bind", "/dev/null", "/proc/key-users"]
TAIL = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
        "--new-session", "--cap-drop", "ALL"]
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def show(plan: LaunchPlan) -> str:
    """The whole plan, one bwrap option per line, for a failing comparison."""
    lines, cur = [], [plan.argv[0]]
    for a in plan.argv[1:]:
        if a.startswith("--") and cur:
            lines.append(" ".join(cur))
            cur = []
        cur.append(a)
    lines.append(" ".join(cur))
    return "\n".join(lines) + f"\nenv={dict(plan.env)}\ncwd={plan.cwd}"


def assert_argv(plan: LaunchPlan, want: list[str]) -> None:
    assert list(plan.argv) == want, "the plan was:\n" + show(plan)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside /tmp (the box's /tmp is the private folder, not the host's)."""
    d = tempfile.mkdtemp(dir="/var/tmp", prefix="hs-plan-")
    try:
        yield Path(os.path.realpath(d))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_tree(base: Path) -> dict[str, str]:
    t = {}
    for name in ("project", "ptmp", "home", "cache", "secret-dir"):
        (base / name).mkdir()
        t[name] = str(base / name)
    (base / "project" / ".git" / "hooks").mkdir(parents=True)
    (base / "project" / ".git" / "config").write_text("[core]\n")
    (base / "secret-file").write_text("s\n")
    t["secret-file"] = str(base / "secret-file")
    return t


def policy(t: dict[str, str], **kw: Unpack[PolicyOptions]) -> Policy:
    args: PolicyOptions = {
        "private_tmp": t["ptmp"], "home": t["home"], "env": dict(ENV),
        "hide_defaults": False,
    }
    args.update(kw)
    return Policy.create(t["project"], **args)


def test_sample_policy_gives_the_documented_mount_order(base: Path) -> None:
    t = make_tree(base)
    p = policy(t, writable=[t["cache"]], hidden=[t["secret-dir"], t["secret-file"]])
    plan = bwrap.plan(p, ["bash", "-lc", "make test"], bwrap=BWRAP)
    g = t["project"] + "/.git"
    # Equal depth keeps kind order: read-write binds, then masks; deeper paths later.
    assert_argv(plan, [
        BWRAP, *HEAD,
        "--bind", t["ptmp"], "/tmp",
        "--tmpfs", "/run",
        "--bind", t["project"], t["project"],
        "--bind", t["cache"], t["cache"],
        "--tmpfs", t["secret-dir"],
        "--ro-bind", "/dev/null", t["secret-file"],
        "--bind", g, g,
        "--ro-bind", g + "/hooks", g + "/hooks",
        "--ro-bind", g + "/config", g + "/config",
        "--remount-ro", t["secret-dir"],
        *TAIL,
        "--chdir", t["project"], "--", "bash", "-lc", "make test",
    ])
    assert plan.backend == "bwrap"
    assert plan.cwd == t["project"]
    assert plan.description == "bash -lc 'make test'"


def test_network_policy_keeps_the_network_namespace(base: Path) -> None:
    t = make_tree(base)
    plan = bwrap.plan(policy(t, network=True, protect=False), ["true"], bwrap=BWRAP)
    resolver = (["--ro-bind", bwrap.RESOLVER_DIR, bwrap.RESOLVER_DIR]
                if os.path.isdir(bwrap.RESOLVER_DIR) else [])
    assert_argv(plan, [
        BWRAP, *HEAD, "--bind", t["ptmp"], "/tmp", "--tmpfs", "/run", *resolver,
        "--bind", t["project"], t["project"],
        "--unshare-all", "--unshare-user", "--share-net", "--disable-userns",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--chdir", t["project"], "--", "true",
    ])


def test_no_protection_binds_no_git_paths(base: Path) -> None:
    t = make_tree(base)
    plan = bwrap.plan(policy(t, protect=False), ["true"], bwrap=BWRAP)
    assert not [a for a in plan.argv if ".git" in a], show(plan)


def test_project_under_tmp_is_bound_after_the_private_tmp(tmp_path: Path) -> None:
    # tmp_path is under the host's /tmp: the project must still be the project in the box.
    t = make_tree(tmp_path)
    real, ptmp = os.path.realpath(t["project"]), os.path.realpath(t["ptmp"])
    plan = bwrap.plan(policy(t, protect=False), ["true"], bwrap=BWRAP)
    assert_argv(plan, [
        BWRAP, *HEAD, "--bind", ptmp, "/tmp", "--tmpfs", "/run", "--bind", real, real,
        *TAIL, "--chdir", real, "--", "true",
    ])


def test_hidden_folder_holding_the_project_is_masked_before_the_project_is_bound(
        base: Path) -> None:
    t = make_tree(base)
    outer = base / "home" / ".codex"
    (outer / "worktrees" / "w").mkdir(parents=True)
    p = Policy.create(str(outer / "worktrees" / "w"), private_tmp=t["ptmp"], home=t["home"],
                      env=dict(ENV), hide_defaults=False, hidden=[str(outer)])
    plan = bwrap.plan(p, ["true"], bwrap=BWRAP)
    w = str(outer / "worktrees" / "w")
    assert_argv(plan, [
        BWRAP, *HEAD, "--bind", t["ptmp"], "/tmp", "--tmpfs", "/run",
        "--tmpfs", str(outer), "--bind", w, w, "--remount-ro", str(outer),
        *TAIL, "--chdir", w, "--", "true",
    ])


def test_hidden_path_under_the_hosts_tmp_is_left_out(base: Path, tmp_path: Path) -> None:
    # The box's /tmp is the private folder: the host's /tmp/... is not there to hide.
    t = make_tree(base)
    (tmp_path / "s").mkdir()
    plan = bwrap.plan(policy(t, hidden=[str(tmp_path / "s")], protect=False), ["true"],
                      bwrap=BWRAP)
    assert str(tmp_path / "s") not in plan.argv, show(plan)


def test_hidden_link_is_masked_where_it_leads(base: Path) -> None:
    t = make_tree(base)
    link = base / "home" / ".ssh"
    link.symlink_to(t["secret-dir"])
    plan = bwrap.plan(policy(t, hidden=[str(link)], protect=False), ["true"], bwrap=BWRAP)
    argv = list(plan.argv)
    assert ["--tmpfs", t["secret-dir"]] == argv[argv.index(t["secret-dir"]) - 1:
                                                argv.index(t["secret-dir"]) + 1], show(plan)
    assert str(link) not in argv, show(plan)


def test_box_environment_has_no_provider_key_and_tmpdir_is_tmp(base: Path) -> None:
    t = make_tree(base)
    env = dict(ENV, TMPDIR="/somewhere", MY_SERVICE_API_KEY="x")
    env.update({k: "secret" for k in PROVIDER_KEYS})
    p = policy(t, env=env)
    plan = bwrap.plan(p, ["true"], bwrap=BWRAP,
                      env_extra={"OH_EVENT": "PreToolUse", "OPENAI_API_KEY": "again"})
    assert dict(plan.env) == {**ENV, "TMPDIR": "/tmp", "OH_EVENT": "PreToolUse"}


def test_bwrap_without_disable_userns_still_gets_a_box(base: Path) -> None:
    t = make_tree(base)
    features = [f for f in bwrap.REQUIRED_FEATURES]
    plan = bwrap.plan(policy(t, protect=False), ["true"], bwrap=BWRAP, features=features)
    assert "--disable-userns" not in plan.argv, show(plan)
    assert "--unshare-user" in plan.argv, show(plan)


def test_bwrap_lacking_a_required_option_is_refused(base: Path) -> None:
    t = make_tree(base)
    features = [f for f in bwrap.REQUIRED_FEATURES if f not in ("--cap-drop", "--new-session")]
    with pytest.raises(SandboxUnavailable) as err:
        bwrap.plan(policy(t), ["true"], bwrap=BWRAP, features=features)
    assert str(err.value) == (
        "/usr/bin/bwrap lacks --new-session, --cap-drop; install bubblewrap 0.4 or later: "
        "sudo apt-get install bubblewrap")


def test_relative_bwrap_and_empty_command_are_refused(base: Path) -> None:
    t = make_tree(base)
    with pytest.raises(ValueError, match="bwrap must be an absolute path, not 'bwrap'"):
        bwrap.plan(policy(t), ["true"], bwrap="bwrap")
    with pytest.raises(ValueError, match="an empty command cannot run in the box"):
        bwrap.plan(policy(t), [], bwrap=BWRAP)


def test_plan_argv_after_the_separator_is_the_command_untouched(base: Path) -> None:
    t = make_tree(base)
    cmd = ["--help", "-lc", "echo $HOME", ""]
    plan = bwrap.plan(policy(t), cmd, bwrap=BWRAP)
    argv = list(plan.argv)
    assert argv[argv.index("--") + 1:] == cmd, show(plan)


def test_shm_size_and_a_filter_fd_are_in_the_plan(base: Path) -> None:
    t = make_tree(base)
    p = policy(t, protect=False)
    head = bwrap.box_args(p, bwrap=BWRAP, shm_size=64 << 20)
    assert head[len(HEAD) + 1 : len(HEAD) + 5] == ("--size", str(64 << 20), "--tmpfs",
                                                    "/dev/shm")
    plan = bwrap.plan(p, ["true"], bwrap=BWRAP, prefix=head, seccomp_fd=9)
    assert plan.argv[-4:] == ("--seccomp", "9", "--", "true")
    assert plan.pass_fds == (9,)
