"""Git cannot be turned against the host: each attack is made from inside a real box,
then the host side runs for real (the next box, or host git with the attacker's
fsmonitor or hook writing a marker), and nothing of the attacker's may run or be bound.

Run as root and again as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SETTINGS = SandboxSettings(hide_defaults=False)
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@dataclass
class World:
    base: Path  # outside /tmp: the box sees it read-only
    home: Path
    project: Path
    marker: Path
    env: dict[str, str]

    def git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *GIT_ID, *args], cwd=cwd or self.project, env=self.env,
                              capture_output=True, text=True)

    def session(self, project: Path | None = None,
                settings: SandboxSettings = SETTINGS):  # type: ignore[no-untyped-def]
        return Session.open(str(project or self.project), settings, env=self.env)

    def box(self, script: str, project: Path | None = None) -> tuple[RunResult, list[str]]:
        with self.session(project) as s:
            r = s.run(["sh", "-c", script])
        return r, s.warnings

    def evil(self) -> str:
        """A script in the project that leaves the marker: what the agent wants run."""
        return (f"printf '#!/bin/sh\\ntouch {self.marker}\\n' > evil.sh && chmod +x evil.sh")


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-400:]!r} err={r.stderr[-600:]!r}"


@pytest.fixture
def w() -> Iterator[World]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-git-")))
    try:
        home = base / "home"
        home.mkdir()
        (home / ".profile").write_text("# profile\n")
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home),
               "GIT_CONFIG_NOSYSTEM": "1"}
        project = base / "project"
        world = World(base, home, project, base / "MARKER", env)
        subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True, env=env)
        assert world.git("commit", "-q", "--allow-empty", "-m", "first").returncode == 0
        yield world
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_git_runs_nothing(w: World, cwd: Path | None = None) -> None:
    w.git("status", cwd=cwd)
    w.git("commit", "-q", "--allow-empty", "-m", "host", cwd=cwd)
    assert not w.marker.exists(), "host git ran the box's program"


def home_is_read_only(w: World, project: Path | None = None) -> None:
    r, _ = w.box(f"echo x >> {w.home}/.profile; echo x > {w.home}/.bashrc", project)
    assert r.returncode != 0, explain(r)
    assert (w.home / ".profile").read_text() == "# profile\n"
    assert not (w.home / ".bashrc").exists()


# -- A. the box never binds what a link points at -----------------------------------------


def test_a_module_config_linked_to_home_does_not_make_home_writable(w: World) -> None:
    r, _ = w.box(f"mkdir -p .git/modules/m && echo ref: x > .git/modules/m/HEAD && "
                 f"ln -s {w.home}/.profile .git/modules/m/config")
    assert r.ok, explain(r)
    home_is_read_only(w)


def test_a_users_hooks_link_builds_a_working_box_that_protects_what_it_names(w: World) -> None:
    hooks = w.base / "githooks"
    hooks.mkdir()
    shutil.rmtree(w.project / ".git" / "hooks")
    (w.project / ".git" / "hooks").symlink_to(hooks)
    with w.session() as s:
        r = s.run(["sh", "-c", "printf '#!/bin/sh\\n' > .git/hooks/pre-commit"])
        assert r.returncode != 0, explain(r)
        r = s.run(["git", *GIT_ID, "commit", "-q", "--allow-empty", "-m", "boxed"])
        assert r.ok, explain(r)
        r = s.run(["sh", "-c", f"echo x > {w.home}/x"])
        assert r.returncode != 0, explain(r)
    assert list(hooks.iterdir()) == []
    assert s.warnings == []


def test_a_replaced_hooks_link_is_reported(w: World) -> None:
    hooks = w.base / "githooks"
    hooks.mkdir()
    shutil.rmtree(w.project / ".git" / "hooks")
    (w.project / ".git" / "hooks").symlink_to(hooks)
    r, warnings = w.box("rm .git/hooks && mkdir .git/hooks")
    assert r.ok, explain(r)
    assert warnings == [
        f"{w.project}/.git/hooks was a link to {hooks} at the start and was changed during "
        f"the session and git run on the host in {w.project} would use it; check it before "
        "you do"]


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
        r = s.run(["sh", "-c", "echo x > .repo/hooks/pre-commit; echo x >> .repo/config"])
        assert r.returncode != 0, explain(r)
        assert r.stderr.count(b"Read-only file system") == 2, explain(r)
        r = s.run(["git", *GIT_ID, "commit", "-q", "--allow-empty", "-m", "boxed"])
        assert r.ok, explain(r)


# -- B. everything host git reads to decide what to run is read-only ---------------------


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


def test_config_worktree_cannot_be_created(w: World) -> None:
    assert w.git("config", "extensions.worktreeConfig", "true").returncode == 0
    r, _ = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' "
                 "> .git/config.worktree")
    assert r.returncode != 0, explain(r)
    assert not (w.project / ".git" / "config.worktree").exists()
    host_git_runs_nothing(w)


def test_the_hooks_path_folder_is_read_only(w: World) -> None:
    assert w.git("config", "core.hooksPath", ".husky").returncode == 0
    (w.project / ".husky").mkdir()
    r, _ = w.box(f"printf '#!/bin/sh\\ntouch {w.marker}\\n' > .husky/pre-commit && "
                 "chmod +x .husky/pre-commit")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_a_missing_hooks_path_folder_cannot_be_made(w: World) -> None:
    assert w.git("config", "core.hooksPath", ".husky").returncode == 0
    r, _ = w.box(f"mkdir -p .husky; printf '#!/bin/sh\\ntouch {w.marker}\\n' > "
                 ".husky/pre-commit; chmod +x .husky/pre-commit")
    assert r.returncode != 0, explain(r)
    assert not (w.project / ".husky").exists()
    host_git_runs_nothing(w)


def test_an_included_file_in_the_worktree_is_read_only(w: World) -> None:
    assert w.git("config", "include.path", "../.gitconfig").returncode == 0
    (w.project / ".gitconfig").write_text("[user]\n\tname = t\n")
    r, _ = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' "
                 ">> .gitconfig")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w)


def test_an_included_file_that_is_missing_cannot_be_made(w: World) -> None:
    assert w.git("config", "includeIf.onbranch:evil.path", "../.evil.cfg").returncode == 0
    r, _ = w.box(f"{w.evil()} && printf '[core]\\n\\tfsmonitor = {w.project}/evil.sh\\n' "
                 "> .evil.cfg")
    assert r.returncode != 0, explain(r)
    assert not (w.project / ".evil.cfg").exists()
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


def test_a_nested_repository_staged_as_a_gitlink_is_reported(w: World) -> None:
    r, warnings = w.box(f"{w.evil()} && git init -q inner && "
                        f"git -C inner {' '.join(GIT_ID)} commit -q --allow-empty -m x && "
                        f"git -C inner config core.fsmonitor {w.project}/evil.sh && "
                        "git add inner")
    assert r.ok, explain(r)
    assert warnings == [
        f"the repository {w.project}/inner inside the project was made during the session "
        f"and staged as a gitlink, with core.fsmonitor = {w.project}/evil.sh, and git run "
        f"on the host in {w.project} would use it; check it before you do"]


def test_a_module_folder_behind_a_link_or_deep_is_reported(w: World) -> None:
    deep = "/".join(["d"] * 12)
    r, warnings = w.box(f"mkdir -p {w.project}/x/hooks && echo ref: x > {w.project}/x/HEAD && "
                        f"mkdir -p .git/modules && ln -s {w.project}/x .git/modules/m && "
                        f"mkdir -p .git/modules/{deep}/hooks && "
                        f"echo ref: x > .git/modules/{deep}/HEAD && "
                        f"echo x > .git/modules/{deep}/hooks/post-checkout")
    assert r.ok, explain(r)
    assert warnings == [
        f"the git folder {w.project}/.git/modules/{deep} was created during the session, "
        f"with hooks post-checkout, and git run on the host in {w.project} would use it; "
        "check it before you do",
        f"the git folder {w.project}/.git/modules/m is a link to {w.project}/x made during "
        f"the session and git run on the host in {w.project} would use it; check it before "
        "you do"]


def test_control_characters_in_a_reported_name_are_escaped(w: World) -> None:
    r, warnings = w.box("mkdir -p \".git/modules/$(printf 'a\\033[2Jb')\" && "
                        "echo ref: x > \".git/modules/$(printf 'a\\033[2Jb')/HEAD\"")
    assert r.ok, explain(r)
    assert warnings == [
        f"the git folder {w.project}/.git/modules/a\\x1b[2Jb was created during the session "
        f"and git run on the host in {w.project} would use it; check it before you do"]


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


# -- the work keeps working -------------------------------------------------------------


def test_commits_branches_rebase_stash_and_worktrees_work_in_the_box(w: World) -> None:
    g = "git " + " ".join(GIT_ID)
    script = (f"set -e; echo a > a; {g} add a; {g} commit -qm a; {g} branch side; "
              f"echo b > b; {g} add b; {g} commit -qm b; {g} checkout -q side; "
              f"echo c > c; {g} add c; {g} commit -qm c; {g} rebase -q main; "
              f"echo d > a; {g} stash -q; {g} stash pop -q; {g} checkout -q a; "
              f"{g} worktree add -q wts/extra; {g} -C wts/extra log --format=%s -1")
    r, _ = w.box(script)
    assert r.ok, explain(r)
    assert r.stdout == b"c\n"
    assert w.git("log", "--format=%s", "side").stdout == "c\nb\na\nfirst\n"


def test_work_in_an_existing_submodule_works_and_its_hooks_stay_read_only(w: World) -> None:
    lib = w.base / "lib"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True, env=w.env)
    assert w.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=lib).returncode == 0
    assert w.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib),
                 "lib").returncode == 0
    assert w.git("commit", "-qm", "add lib").returncode == 0
    g = "git " + " ".join(GIT_ID)
    with w.session() as s:
        r = s.run(["sh", "-c", f"set -e; cd lib; echo x > x; {g} add x; {g} commit -qm x; "
                               f"{g} checkout -q -b topic; cd ..; {g} add lib; "
                               f"{g} commit -qm bump; git submodule status"])
        assert r.ok, explain(r)
        r = s.run(["sh", "-c", "echo x > .git/modules/lib/hooks/post-checkout"])
        assert r.returncode != 0, explain(r)
    assert w.git("log", "--format=%s", "-1").stdout == "bump\n"
    assert s.warnings == []


# -- nothing is left behind ---------------------------------------------------------------


def _leftovers(w: World) -> list[str]:
    names = ("commondir", "config.worktree")
    return [n for n in names if (w.project / ".git" / n).exists()]


def _manifest_of(pid: int) -> Path | None:
    from sandbox.policy import private_tmp_root

    for m in Path(private_tmp_root()).glob("*.made"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(m.read_text())["pid"] == pid:
                return m
    return None


def test_nothing_is_left_when_the_harness_is_killed(w: World) -> None:
    driver = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "fixtures" / "box_driver.py"),
         str(w.project), "--", "sleep", "60"],
        cwd=str(Path(__file__).parent.parent), stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not _leftovers(w) and time.monotonic() < deadline:
            time.sleep(0.01)
        # Killed as soon as the session has made its files: the box may not even run.
        assert _leftovers(w) == ["commondir", "config.worktree"]
        manifest = _manifest_of(driver.pid)
        assert manifest is not None
        tmp = Path(str(manifest)[: -len(".made")])
        driver.kill()
        driver.wait()
        while (_leftovers(w) or manifest.exists()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _leftovers(w) == []
        assert not tmp.exists()
        assert not manifest.exists()
    finally:
        driver.kill()
        driver.wait()


def test_the_next_session_sweeps_what_a_dead_owner_left(w: World) -> None:
    from sandbox.policy import private_tmp_root

    root = private_tmp_root()
    (w.project / "made-dir").mkdir()
    (w.project / "made.cfg").write_text("")
    (w.project / "changed.cfg").write_text("mine")
    tmp = Path(tempfile.mkdtemp(prefix="session-", dir=root))
    (tmp / "left").write_text("x")
    outside = w.base / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    (tmp / "link").symlink_to(outside)
    manifest = str(tmp) + ".made"
    made = [[str(w.project), "made-dir", "dir", ""], [str(w.project), "made.cfg", "file", ""],
            [str(w.project), "changed.cfg", "file", ""]]
    with open(manifest, "w") as f:
        json.dump({"pid": 1 << 22, "start": "1", "tmp": str(tmp), "made": made}, f)
    with w.session():
        assert not (w.project / "made-dir").exists()
        assert not (w.project / "made.cfg").exists()
        assert (w.project / "changed.cfg").read_text() == "mine"
        assert not tmp.exists()
        assert not os.path.exists(manifest)
    assert (outside / "keep").exists()
    st = os.lstat(w.project / ".git")
    assert stat.S_ISDIR(st.st_mode)


def test_overlapping_sessions_share_what_they_made_and_the_last_removes_it(w: World) -> None:
    first = w.session()
    first.__enter__()
    try:
        assert _leftovers(w) == ["commondir", "config.worktree"]
        second = w.session()
        b = second.__enter__()
    finally:
        first.__exit__(None, None, None)
    try:
        # The first session ended while the second still runs: its box still builds.
        assert _leftovers(w) == ["commondir", "config.worktree"]
        r = b.run(["sh", "-c", "echo /tmp > .git/commondir"])
        assert b"Read-only file system" in r.stderr, explain(r)
    finally:
        second.__exit__(None, None, None)
    assert _leftovers(w) == []


def test_a_rebase_left_in_progress_with_an_exec_line_is_reported(w: World) -> None:
    r, warnings = w.box("mkdir -p .git/rebase-merge && "
                        "printf 'pick 1234 x\\nexec ./evil.sh\\n' > "
                        ".git/rebase-merge/git-rebase-todo")
    assert r.ok, explain(r)
    assert warnings == [
        f"{w.project}/.git/rebase-merge/git-rebase-todo asks git to run ./evil.sh; git rebase "
        f"--continue (or cherry-pick, revert) on the host in {w.project} would run it; check "
        "it before you do"]


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
        r = s.run(["sh", "-c", f"echo x > {victim}/planted"])
    assert not (victim / "planted").exists(), explain(r)


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


def test_a_git_link_made_in_a_project_that_is_not_a_repository_is_reported(w: World) -> None:
    plain = w.base / "plain"
    plain.mkdir()
    r, warnings = w.box(f"ln -s {w.project}/.git .git", plain)
    assert r.ok, explain(r)
    assert warnings == [
        f"{plain}/.git was made a link to {w.project}/.git during the session and git run "
        f"on the host in {plain} would use it; check it before you do"]
    r, warnings = w.box("true", plain)
    assert r.ok, explain(r)
    assert warnings == []


def _with_submodule(w: World) -> Path:
    lib = w.base / "lib"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True, env=w.env)
    assert w.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=lib).returncode == 0
    assert w.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib),
                 "lib").returncode == 0
    assert w.git("commit", "-qm", "add lib").returncode == 0
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


def test_a_gitlink_whose_git_file_leads_to_a_new_git_folder_is_reported(w: World) -> None:
    r, warnings = w.box(f"{w.evil()} && git init -q .evilgit && "
                        f"git -C .evilgit config core.fsmonitor {w.project}/evil.sh && "
                        "mkdir sub && echo 'gitdir: ../.evilgit/.git' > sub/.git && "
                        "git update-index --add --cacheinfo "
                        "160000,1234567890123456789012345678901234567890,sub")
    assert r.ok, explain(r)
    assert warnings == [
        f"the repository {w.project}/sub inside the project was made during the session "
        f"and staged as a gitlink, with core.fsmonitor = {w.project}/evil.sh, and git run "
        f"on the host in {w.project} would use it; check it before you do"]


def test_a_linked_worktree_inside_the_project_keeps_its_git_file(w: World) -> None:
    assert w.git("worktree", "add", "-q", "wts/extra").returncode == 0
    extra = w.project / "wts" / "extra"
    r, _ = w.box(f"{w.evil()} && git init -q .evilgit && "
                 f"git -C .evilgit config core.fsmonitor {w.project}/evil.sh && "
                 f"git -C .evilgit config core.worktree {extra} && "
                 f"echo 'gitdir: {w.project}/.evilgit/.git' > wts/extra/.git")
    assert r.returncode != 0, explain(r)
    host_git_runs_nothing(w, extra)
