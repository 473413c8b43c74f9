"""Git cannot be turned against the host: each attack is made from inside a real box,
then the host side runs for real (the next box, or host git with the attacker's
fsmonitor, hook or pager writing a marker), and nothing of the attacker's may run or be
bound. Run as root and again as an unprivileged user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gitworld import (
    GIT_ID,
    World,
    explain,
    home_is_read_only,
    host_git_runs_nothing,
    moved_out,
    w,
)

from sandbox.errors import PolicyError, SandboxUnavailable

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]
__all__ = ["w"]  # the fixture, imported


def test_a_module_config_linked_to_home_does_not_make_home_writable(w: World) -> None:
    r, _ = w.box(f"mkdir -p .git/modules/m && echo ref: x > .git/modules/m/HEAD && "
                 f"ln -s {w.home}/.profile .git/modules/m/config")
    assert r.ok, explain(r)
    home_is_read_only(w)


def test_a_users_hooks_link_builds_a_working_box_that_protects_what_it_names(w: World) -> None:
    hooks = w.link_hooks()
    with w.session() as s:
        r = s.run(["sh", "-c", "printf '#!/bin/sh\\n' > .git/hooks/pre-commit"])
        assert r.returncode != 0, explain(r)
        r = s.run(["git", *GIT_ID, "commit", "-q", "--allow-empty", "-m", "boxed"])
        assert r.ok, explain(r)
        r = s.run(["sh", "-c", f"echo x > {w.home}/x"])
        assert r.returncode != 0, explain(r)
    assert list(hooks.iterdir()) == []
    assert s.warnings == []


def test_a_linked_worktree_entry_config_linked_to_home_binds_nothing(w: World) -> None:
    wt = w.base / "wt"
    assert w.git("worktree", "add", "-q", str(wt)).returncode == 0
    r, _ = w.box(f"ln -s {w.home}/.profile .git/worktrees/wt/config")
    assert r.ok, explain(r)
    home_is_read_only(w, wt)
    home_is_read_only(w)


def test_a_git_file_pointing_anywhere_is_not_followed(w: World) -> None:
    elsewhere = w.base / "elsewhere"
    elsewhere.mkdir()
    plain = w.base / "plain"
    plain.mkdir()
    r, _ = w.box(f"echo 'gitdir: {elsewhere}' > .git", plain)
    assert r.ok, explain(r)
    r, _ = w.box(f"echo x > {elsewhere}/config; mkdir {elsewhere}/hooks", plain)
    assert r.returncode != 0, explain(r)
    assert list(elsewhere.iterdir()) == []


def test_a_git_link_to_a_folder_builds_a_box_and_protects_what_it_names(w: World) -> None:
    real = w.base / "real.git"
    (w.project / ".git").rename(real)
    (w.project / ".git").symlink_to(real)
    with w.session() as s:
        r = s.run(["git", "status", "--short"])
        assert r.ok, explain(r)
        r = s.run(["sh", "-c", "echo x > .git/hooks/pre-commit; echo x >> .git/config; "
                               "echo x > .git/new"])
        assert r.stderr.count(b"Read-only file system") == 3, explain(r)
    assert not (real / "hooks" / "pre-commit").exists()
    assert not (real / "new").exists()


def test_a_git_link_inside_the_project_protects_the_folder_it_names(w: World) -> None:
    (w.project / ".git").rename(w.project / ".repo")
    (w.project / ".git").symlink_to(".repo")
    with w.session() as s:
        config = (w.project / ".repo" / "config").read_bytes()
        r = s.run(["sh", "-c", "echo x > .repo/hooks/pre-commit; echo '[core]' >> "
                   ".repo/config; git config core.fsmonitor /evil"])
        assert r.returncode == 0, explain(r)
        assert r.stderr.count(b"Read-only file system") == 1, explain(r)
        # The config the link names is the box's copy: the project's is unchanged.
        assert (w.project / ".repo" / "config").read_bytes() == config
        r = s.run(["git", *GIT_ID, "commit", "-q", "--allow-empty", "-m", "boxed"])
        assert r.ok, explain(r)


def test_another_worktrees_commondir_cannot_be_repointed(w: World) -> None:
    wt2 = w.base / "wt2"
    assert w.git("worktree", "add", "-q", str(wt2)).returncode == 0
    (w.base / "fake").mkdir()
    r, _ = w.box(f"{w.evil()} && mkdir -p fake && "
                 f"printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' > fake/config && "
                 f"echo {w.project}/fake > .git/worktrees/wt2/commondir")
    assert r.returncode != 0, explain(r)
    assert b"Read-only file system" in r.stderr
    host_git_runs_nothing(w, wt2)


def test_a_config_worktree_the_box_makes_is_moved_out(w: World) -> None:
    assert w.git("config", "extensions.worktreeConfig", "true").returncode == 0
    r, warnings = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh"
                        "\\n' > .git/config.worktree")
    assert r.returncode == 0, explain(r)
    moved_out(w, warnings, w.project / ".git" / "config.worktree")
    host_git_runs_nothing(w)


PLANT = "printf '[core]\\n\\tfsmonitor = {p}/evil.sh\\n' > .git/config.worktree"


@pytest.mark.parametrize("keeper_on", [True, False])
def test_what_the_box_made_is_gone_before_host_git_runs_between_runs(
        w: World, keeper_on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session stays open: host git runs between two runs (the harness's own git
    status, say). With the keeper taken out, host git runs what the box planted."""
    from sandbox.linux import keeper

    if not keeper_on:
        monkeypatch.setattr(keeper.Keeper, "check", lambda self: [])
    assert w.git("config", "extensions.worktreeConfig", "true").returncode == 0
    with w.session() as s:
        r = s.run(["sh", "-c", f"{w.evil()} && {PLANT.format(p=w.project)}"])
        assert r.returncode == 0, explain(r)
        host_git = w.git("status", "--short")
        again = s.run(["git", "status", "--short"])
    assert host_git.returncode == 0 and again.returncode == 0, explain(again)
    if keeper_on:
        assert not w.marker.exists(), "host git ran the box's program"
        moved_out(w, s.warnings, w.project / ".git" / "config.worktree")
    else:
        assert w.marker.exists(), "the attack did not take: the test shows nothing"


@pytest.mark.parametrize("box", ["auto", "landlock"])
@pytest.mark.parametrize("sentry_on", [True, False])
def test_a_commondir_made_during_a_run_is_gone_before_host_git_reads_it(
        w: World, sentry_on: bool, box: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the run still goes (a harness that polls git status beside a command), a
    planted commondir is moved out as it appears: host git reads no common folder of
    the box's. With the sentry taken out, it is there until the run ends, and host git
    runs the fsmonitor that folder's config names."""
    import threading
    import time

    from sandbox.linux import landlock, landlockbox, linuxbox
    from sandbox.settings import SandboxSettings

    if box == "landlock" and landlock.abi() < landlock.NEEDED_ABI:
        pytest.skip("this kernel's Landlock lacks ABI 6")
    if not sentry_on:
        for kind in (linuxbox.LinuxBox, landlockbox.LandlockBox):
            monkeypatch.setattr(kind, "_seen", lambda self: None)
    plant = (f"{w.evil()} && cp -rL .git evilgit && printf '[core]\\n\\tfsmonitor = "
             f"{w.project}/evil.sh\\n' >> evilgit/config && echo ../evilgit > "
             ".git/commondir; sleep 3")
    with w.session(settings=SandboxSettings(hide_defaults=False, box=box)) as s:
        going = threading.Thread(target=s.run, args=(["sh", "-c", plant],))
        going.start()
        deadline = time.monotonic() + 10
        while not (w.project / "evilgit").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # the plant made, the run still going
        host_git_runs_nothing(w) if sentry_on else w.git("status")
        going.join()
    if sentry_on:
        moved_out(w, s.warnings, w.project / ".git" / "commondir")
    else:
        assert w.marker.exists(), "the attack did not take: the test shows nothing"


def test_the_hooks_path_folder_is_read_only(w: World) -> None:
    assert w.git("config", "core.hooksPath", ".husky").returncode == 0
    (w.project / ".husky").mkdir()
    r, _ = w.box(f"printf '#!/bin/sh\\ntouch {w.marker}\\n' > .husky/pre-commit && "
                 "chmod +x .husky/pre-commit")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_a_missing_hooks_path_folder_the_box_makes_is_moved_out(w: World) -> None:
    assert w.git("config", "core.hooksPath", ".husky").returncode == 0
    r, warnings = w.box(f"mkdir -p .husky; printf '#!/bin/sh\\ntouch {w.marker}\\n' > "
                        ".husky/pre-commit; chmod +x .husky/pre-commit")
    # Moved out as it was made (sentry.py: the hook's write may find no folder), or
    # once the run was over.
    assert r.returncode is not None, explain(r)
    moved_out(w, warnings, w.project / ".husky")
    host_git_runs_nothing(w)


def test_an_included_file_in_the_worktree_is_read_only(w: World) -> None:
    assert w.git("config", "include.path", "../.gitconfig").returncode == 0
    (w.project / ".gitconfig").write_text("[user]\n\tname = t\n")
    r, _ = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' "
                 ">> .gitconfig")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_an_included_file_that_is_missing_is_moved_out_when_made(w: World) -> None:
    assert w.git("config", "includeIf.onbranch:evil.path", "../.evil.cfg").returncode == 0
    r, warnings = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh"
                        "\\n' > .evil.cfg")
    assert r.returncode == 0, explain(r)
    moved_out(w, warnings, w.project / ".evil.cfg")
    w.git("checkout", "-q", "-b", "evil")
    host_git_runs_nothing(w)


def test_an_fsmonitor_program_in_the_project_is_read_only(w: World) -> None:
    (w.project / "tools" / "bin").mkdir(parents=True)
    (w.project / "tools" / "bin" / "fsmon").write_text("#!/bin/sh\nexit 0\n")
    (w.project / "tools" / "bin" / "fsmon").chmod(0o755)
    assert w.git("config", "core.fsmonitor", "tools/bin/fsmon").returncode == 0
    evil = (f"mkdir -p tools/bin && printf '#!/bin/sh\\ntouch {w.marker}\\n' > "
            "tools/bin/fsmon && chmod +x tools/bin/fsmon")
    # In place, and by moving a folder on the way aside and making a new one.
    r, _ = w.box(f"{evil}; mv tools/bin tools/old; mv tools tools2; {evil}")
    assert r.returncode != 0, explain(r)
    assert r.stderr.count(b"Device or resource busy") == 2, explain(r)
    host_git_runs_nothing(w)


def test_a_link_on_the_way_to_a_protected_file_refuses_the_box(w: World) -> None:
    (w.project / "conf").mkdir()
    (w.project / "cfg").symlink_to("conf")
    assert w.git("config", "include.path", "../cfg/git.cfg").returncode == 0
    with pytest.raises(PolicyError) as err, w.session():
        pass
    assert str(err.value) == (
        f"{w.project}/cfg/git.cfg (include.path = ../cfg/git.cfg) leads through a link in a "
        "folder the box can write, which could be re-pointed at the user's files; replace "
        "the link with the folder it names (or set [sandbox] protect = false)")
    cli = Path(sys.executable).parent / "harness-sandbox"
    done = subprocess.run([str(cli), "run", "--config", str(w.base / "none.toml"),
                           "--project", str(w.project), "--", "true"],
                          capture_output=True, text=True, env=w.env)
    assert done.returncode == 125
    assert done.stderr == f"harness-sandbox: {err.value}.\n"


def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(w: World) -> None:
    module = w.project / ".git" / "modules" / "m"
    (module / "hooks").mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text("[core]\n")
    # A folder of the user's outside the project that has the names the box binds.
    victim = w.base / "victim"
    (victim / "hooks").mkdir(parents=True)
    for name in ("config", "config.worktree", "commondir"):
        (victim / name).write_text("")
    with w.session() as s:
        # What a box of another session on this project could do between this session's
        # check and its first box: move the checked folder aside, put a link there.
        module.rename(module.parent / "m2")
        module.symlink_to(os.path.relpath(victim, module.parent))
        # Seen (sandbox/linux/replaced.py): the box's mounts cannot be made again
        # below a link, and the run is refused rather than started without them.
        with pytest.raises(SandboxUnavailable) as refused:
            s.run(["sh", "-c", f"echo x > {victim}/planted"])
    assert str(module) in str(refused.value) and "open a new one" in str(refused.value)
    assert not (victim / "planted").exists()


def test_a_pager_in_the_project_is_read_only(w: World) -> None:
    (w.project / "bin").mkdir()
    (w.project / "bin" / "pager").write_text("#!/bin/sh\ncat\n")
    (w.project / "bin" / "pager").chmod(0o755)
    assert w.git("config", "pager.log", "bin/pager -R").returncode == 0
    r, _ = w.box(f"printf '#!/bin/sh\\ntouch {w.marker}\\ncat\\n' > bin/pager")
    assert r.returncode != 0, explain(r)
    # git starts a pager only on a terminal: script(1) gives it one.
    subprocess.run(["script", "-qc", "git log -1", "/dev/null"], cwd=w.project, env=w.env,
                   capture_output=True, stdin=subprocess.DEVNULL)
    assert not w.marker.exists()


def test_a_hooks_link_into_the_project_protects_the_folder_it_names(w: World) -> None:
    (w.project / "githooks").mkdir()
    shutil.rmtree(w.project / ".git" / "hooks")
    (w.project / ".git" / "hooks").symlink_to("../githooks")
    r, warnings = w.box(f"printf '#!/bin/sh\\ntouch {w.marker}\\n' > githooks/pre-commit; "
                        "chmod +x githooks/pre-commit")
    assert r.returncode != 0, explain(r)
    assert warnings == []
    host_git_runs_nothing(w)


def _with_submodule(w: World) -> Path:
    w.add_submodule()
    return w.project / "lib"


def test_a_submodule_checkouts_git_file_cannot_be_repointed(w: World) -> None:
    _with_submodule(w)
    r, _ = w.box(f"{w.evil()} && git init -q evilgit && "
                 f"git -C evilgit config core.fsmonitor {w.project}/evil.sh && "
                 f"git -C evilgit config core.worktree {w.project}/lib && "
                 f"echo 'gitdir: {w.project}/evilgit/.git' > lib/.git")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_a_nested_git_folder_staged_before_the_session_keeps_its_files_read_only(
        w: World) -> None:
    inner = w.project / "inner"
    subprocess.run(["git", "init", "-q", str(inner)], check=True, env=w.env)
    assert w.git("commit", "-q", "--allow-empty", "-m", "x", cwd=inner).returncode == 0
    assert w.git("add", "inner").returncode == 0
    r, _ = w.box(f"{w.evil()} && git -C inner config core.fsmonitor {w.project}/evil.sh")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_a_linked_worktree_inside_the_project_keeps_its_git_file(w: World) -> None:
    assert w.git("worktree", "add", "-q", "wts/extra").returncode == 0
    extra = w.project / "wts" / "extra"
    r, _ = w.box(f"{w.evil()} && git init -q .evilgit && "
                 f"git -C .evilgit config core.fsmonitor {w.project}/evil.sh && "
                 f"git -C .evilgit config core.worktree {extra} && "
                 f"echo 'gitdir: {w.project}/.evilgit/.git' > wts/extra/.git")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w, extra)


def test_modules_nested_too_deep_to_check_refuse_the_box(w: World) -> None:
    deep = w.project / ".git" / "modules" / "/".join(["d"] * 201)
    deep.mkdir(parents=True)
    with pytest.raises(PolicyError) as err, w.session():
        pass
    folder = w.project / ".git" / "modules" / "/".join(["d"] * 201)
    assert str(err.value) == (f"the git folder {folder} nests more than 200 folders deep; "
                              "remove it and try again")


def test_a_git_on_path_inside_the_project_is_refused(w: World) -> None:
    (w.project / "bin").mkdir()
    (w.project / "bin" / "git").write_text("#!/bin/sh\nexit 0\n")
    (w.project / "bin" / "git").chmod(0o755)
    w.env["PATH"] = f"{w.project}/bin:{w.env['PATH']}"
    with pytest.raises(PolicyError) as err, w.session():
        pass
    assert str(err.value) == (
        f"git on PATH ({w.project}/bin/git) is in {w.project}, a folder the box can write; "
        "put the system's git first on PATH")


def test_a_config_git_cannot_read_refuses_the_box(w: World) -> None:
    with open(w.project / ".git" / "config", "a") as f:
        f.write("[broken\n")
    with pytest.raises(PolicyError) as err, w.session():
        pass
    lines = (w.project / ".git" / "config").read_text().count("\n")
    assert str(err.value) == (
        f"git could not read the repository of {w.project}: fatal: bad config line "
        f"{lines} in file .git/config; fix it (or set [sandbox] protect = false) and try "
        "again")


def test_an_include_named_from_home_in_a_writable_folder_is_moved_out_when_made(w: World) -> None:
    # ~ is the session's HOME here, and the project sits below it as written.
    w.env["HOME"] = str(w.base)
    assert w.git("config", "include.path", "~/project/.team.cfg").returncode == 0
    r, warnings = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh"
                        "\\n' > .team.cfg")
    assert r.returncode == 0, explain(r)
    moved_out(w, warnings, w.project / ".team.cfg")
    host_git_runs_nothing(w)


def test_a_module_folder_linked_into_the_project_keeps_its_hooks_read_only(w: World) -> None:
    mods = w.project / "mods" / "m"
    (mods / "hooks").mkdir(parents=True)
    (mods / "HEAD").write_text("ref: refs/heads/main\n")
    (mods / "config").write_text("[core]\n")
    (w.project / ".git" / "modules").mkdir()
    (w.project / ".git" / "modules" / "m").symlink_to(mods)
    r, warnings = w.box("echo x > mods/m/hooks/post-checkout; echo x >> mods/m/config")
    assert r.stderr.count(b"Read-only file system") == 2, explain(r)
    assert warnings == []


def test_a_link_to_outside_on_the_way_to_an_include_refuses_the_box_too(w: World) -> None:
    dotfiles = w.base / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "git.cfg").write_text("[user]\n\tname = t\n")
    (w.project / "cfg").symlink_to(dotfiles)
    assert w.git("config", "include.path", "../cfg/git.cfg").returncode == 0
    with pytest.raises(PolicyError) as err, w.session():
        pass
    assert str(err.value).startswith(f"{w.project}/cfg/git.cfg (include.path = ../cfg/"
                                     "git.cfg) leads through a link in a folder")


def test_a_file_on_the_way_to_a_missing_include_cannot_be_swapped(w: World) -> None:
    (w.project / "conf").write_text("not a folder\n")
    assert w.git("config", "include.path", "../conf/git.cfg").returncode == 0
    r, _ = w.box(f"{w.evil()} && rm conf && mkdir conf && printf '[core]\\n\\tfsmonitor = "
                 f"{w.project}/evil.sh\\n' > conf/git.cfg")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_a_file_a_module_config_includes_is_read_only(w: World) -> None:
    _with_submodule(w)
    assert w.git("-C", "lib", "config", "include.path", "../../../lib.cfg").returncode == 0
    (w.project / "lib.cfg").write_text("[user]\n\tname = t\n")
    r, _ = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' "
                 ">> lib.cfg")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)
    w.git("status", cwd=w.project / "lib")
    assert not w.marker.exists()


def test_a_modules_config_is_seen_in_the_box_without_its_worktree(w: World) -> None:
    """The box sees a copy of the module's config without core.worktree (git submodule
    update would rewrite the read-only file), made on /dev/shm where no box looks, and
    removed with the session; the host's file is unchanged."""
    from sandbox.process.made import shm_views

    _with_submodule(w)
    config = w.project / ".git" / "modules" / "lib" / "config"
    before = config.read_bytes()
    assert b"worktree" in before
    with w.session() as s:
        seen = s.run(["cat", str(config)])
        views = dict(s.policy.views)
        shm = shm_views(s.policy.private_tmp)
        wrote = s.run(["sh", "-c", f"echo x >> {config}"])
    assert seen.returncode == 0 and b"worktree" not in seen.stdout
    assert b"[remote" in seen.stdout
    assert wrote.returncode != 0
    if os.path.isdir("/dev/shm"):
        assert os.path.dirname(views[str(config)]) == shm
    assert not os.path.exists(views[str(config)]) and not os.path.exists(shm)
    assert config.read_bytes() == before
