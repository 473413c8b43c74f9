"""Git, continued: what the box cannot stop is reported at the session's end (names
escaped), the work keeps working in the box, and nothing a session made is left behind,
even when the harness is killed. Run as root and again as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers.gitworld import GIT_ID, World, explain, host_git_runs_nothing, w
from helpers.procs import box_driver

from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]
__all__ = ["w"]  # the fixture, imported


def test_a_replaced_hooks_link_is_put_back_and_reported(w: World) -> None:
    hooks = w.link_hooks()
    r, warnings = w.box(f"rm .git/hooks && mkdir .git/hooks && printf '#!/bin/sh\\ntouch "
                        f"{w.marker}\\n' > .git/hooks/pre-commit && "
                        "chmod +x .git/hooks/pre-commit")
    assert r.ok, explain(r)
    assert len(warnings) == 1
    aside = Path(warnings[0].rsplit(" ", 1)[1])
    assert warnings == [
        f"{w.project}/.git/hooks was a link to {hooks} at the start and was changed during "
        f"the session: the link is back; what the box put there is now {aside}"]
    assert aside.parent == w.project / ".git" and (aside / "pre-commit").exists()
    assert os.readlink(w.project / ".git" / "hooks") == str(hooks)
    host_git_runs_nothing(w)


def test_a_removed_hooks_link_is_put_back(w: World) -> None:
    hooks = w.link_hooks()
    r, warnings = w.box("rm .git/hooks")
    assert r.ok, explain(r)
    assert warnings == [
        f"{w.project}/.git/hooks was a link to {hooks} at the start and was changed during "
        "the session: the link is back"]
    assert os.readlink(w.project / ".git" / "hooks") == str(hooks)


def test_a_nested_repository_staged_as_a_gitlink_is_reported(w: World) -> None:
    r, warnings = w.box(f"{w.evil()} && git init -q inner && "
                        f"git -C inner {' '.join(GIT_ID)} commit -q --allow-empty -m x && "
                        f"git -C inner config core.fsmonitor {w.project}/evil.sh && "
                        "git add inner")
    assert r.ok, explain(r)
    assert warnings == [w.staged_gitlink("inner")]


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


def test_submodule_update_of_an_existing_module_works(w: World) -> None:
    lib = w.add_submodule()
    assert w.git("commit", "-q", "--allow-empty", "-m", "lib 2", cwd=lib).returncode == 0
    assert w.git("-C", "lib", "pull", "-q").returncode == 0
    assert w.git("commit", "-qam", "bump lib").returncode == 0
    want = w.git("-C", "lib", "rev-parse", "HEAD").stdout
    assert w.git("-C", "lib", "checkout", "-q", "HEAD~1").returncode == 0
    config = (w.project / ".git" / "modules" / "lib" / "config").read_bytes()
    with w.session() as s:
        r = s.run(["git", "submodule", "update", "-q"])
        assert r.ok, explain(r)
        r = s.run(["sh", "-c", "echo '[core] fsmonitor = /x' >> .git/modules/lib/config"])
        assert r.returncode != 0, explain(r)
    assert w.git("-C", "lib", "rev-parse", "HEAD").stdout == want
    assert (w.project / ".git" / "modules" / "lib" / "config").read_bytes() == config
    assert w.git("status", "--short").stdout == ""
    assert s.warnings == []


def test_work_in_an_existing_submodule_works_and_its_hooks_stay_read_only(w: World) -> None:
    w.add_submodule()
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


# What the box makes at a name host git reads, where nothing was (no session makes
# anything there): a file the config includes, in a folder that did not exist either,
# which the sentry does not watch (sandbox/linux/sentry.py), so that it stays while the
# run goes, for the harness to be killed meanwhile.
PLANT = "mkdir inc && printf '[user]\\n' > inc/team.cfg; sleep 60"
MADE = ["team.cfg"]


def _planted(w: World) -> list[str]:
    return ["team.cfg"] if (w.project / "inc" / "team.cfg").exists() else []


def _include(w: World) -> None:
    assert w.git("config", "include.path", "../inc/team.cfg").returncode == 0


def _moved(data: Path) -> list[str]:
    return sorted(p.name for p in data.glob("harness/moved/*-after-the-harness/inc/*"))


def test_what_the_box_made_is_moved_out_when_the_harness_is_killed(
        w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(w.base / "data"))
    _include(w)
    driver = box_driver(w.project, "sh", "-c", PLANT)
    try:
        deadline = time.monotonic() + 20
        while _planted(w) != MADE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _planted(w) == MADE
        manifest = _manifest_of(driver.pid)
        assert manifest is not None
        tmp = Path(str(manifest)[: -len(".made")])
        driver.kill()
        driver.wait()
        while (_planted(w) or manifest.exists()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _planted(w) == []
        assert _moved(w.base / "data") == MADE  # by the watchdog: nothing is lost
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
    tmp = Path(tempfile.mkdtemp(prefix=f"session-{1 << 22}-", dir=root))
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


@pytest.mark.parametrize("box", ["auto", "landlock"])
def test_overlapping_sessions_make_nothing_and_never_put_back_what_a_box_made(
        w: World, box: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions side by side on one project. The first's run plants a commondir
    and, while it runs, the second's run starts and ends: the second takes the plant
    for nobody's start (were it taken, the second would put it back once the first
    moved it out), and neither makes anything at the open."""
    import threading

    from sandbox.linux import landlock, landlockbox, linuxbox

    if box == "landlock" and landlock.abi() < landlock.NEEDED_ABI:
        pytest.skip("this kernel's Landlock lacks ABI 6")
    for kind in (linuxbox.LinuxBox, landlockbox.LandlockBox):  # the plant stays a while
        monkeypatch.setattr(kind, "_seen", lambda self: None)
    settings = SandboxSettings(hide_defaults=False, box=box)
    with w.session(settings=settings) as a, w.session(settings=settings) as b:
        assert _leftovers(w) == []
        planted = threading.Event()
        done: list[object] = []
        runner = threading.Thread(target=lambda: done.append(a.run(
            ["sh", "-c", "echo /tmp > .git/commondir; sleep 1"])))
        runner.start()
        deadline = time.monotonic() + 10
        while not (w.project / ".git" / "commondir").exists() and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        planted.set()
        r = b.run(["true"])
        assert r.ok, explain(r)
        runner.join()
        assert _leftovers(w) == []
        r = b.run(["true"])  # the second's next run: nothing is put back after it
        assert r.ok, explain(r)
        assert _leftovers(w) == []
    assert _leftovers(w) == []
    host_git_runs_nothing(w)


def test_a_rebase_left_in_progress_with_an_exec_line_is_reported(w: World) -> None:
    r, warnings = w.box("mkdir -p .git/rebase-merge && "
                        "printf 'pick 1234 x\\nexec ./evil.sh\\n' > "
                        ".git/rebase-merge/git-rebase-todo")
    assert r.ok, explain(r)
    assert warnings == [
        f"{w.project}/.git/rebase-merge/git-rebase-todo asks git to run ./evil.sh; git rebase "
        f"--continue (or cherry-pick, revert) on the host in {w.project} would run it; check "
        "it before you do"]


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


def test_a_gitlink_whose_git_file_leads_to_a_new_git_folder_is_reported(w: World) -> None:
    r, warnings = w.box(f"{w.evil()} && git init -q .evilgit && "
                        f"git -C .evilgit config core.fsmonitor {w.project}/evil.sh && "
                        "mkdir sub && echo 'gitdir: ../.evilgit/.git' > sub/.git && "
                        "git update-index --add --cacheinfo "
                        "160000,1234567890123456789012345678901234567890,sub")
    assert r.ok, explain(r)
    assert warnings == [w.staged_gitlink("sub")]


def test_a_git_folder_made_in_an_empty_submodule_path_is_reported(w: World) -> None:
    w.add_submodule()
    assert w.git("submodule", "deinit", "-q", "lib").returncode == 0
    assert not (w.project / "lib" / ".git").exists()
    r, warnings = w.box(f"{w.evil()} && git init -q lib && "
                        f"git -C lib config core.fsmonitor {w.project}/evil.sh")
    assert r.ok, explain(r)
    assert warnings == [w.staged_gitlink("lib")]


def test_a_submodule_s_git_file_cannot_be_re_pointed_nor_its_checkout_moved(
        w: World) -> None:
    """What the end's report takes as given for a gitlink whose ``.git`` was a protected
    file at the start (it does not read it again): the box can neither rewrite that
    file, nor move the checkout or the module's git folder for another in its place."""
    w.add_submodule()
    module = w.project / ".git" / "modules" / "lib"
    r, warnings = w.box(
        f"{w.evil()}; git init -q .evilgit; "
        f"git -C .evilgit config core.fsmonitor {w.project}/evil.sh; "
        "echo 'gitdir: ../.evilgit/.git' > lib/.git; "
        "mv lib lib.moved; mv .git/modules/lib .git/modules/lib.moved; "
        "mv .git/modules .git/modules.moved; echo done")
    assert r.stdout == b"done\n", explain(r)
    err = r.stderr.decode()
    assert err.count("Read-only file system") == 1 and err.count("busy") == 3, err
    assert warnings == []
    got = w.git("rev-parse", "--absolute-git-dir", cwd=w.project / "lib")
    assert got.stdout.strip() == str(module)
    assert not w.marker.exists()


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(name))
    return out


def test_the_next_session_cleans_up_when_harness_and_watchdog_were_both_killed(
        w: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(w.base / "data"))
    _include(w)
    driver = box_driver(w.project, "sh", "-c", PLANT)
    try:
        deadline = time.monotonic() + 20
        manifest = None
        while (manifest is None or _planted(w) != MADE) and time.monotonic() < deadline:
            manifest = _manifest_of(driver.pid)
            time.sleep(0.01)
        assert manifest is not None and _planted(w) == MADE
        tmp = Path(str(manifest)[: -len(".made")])
        # Stopped first: with its box gone, a harness left running would end its session
        # (and clean up) before its own kill arrived.
        os.kill(driver.pid, signal.SIGSTOP)
        for pid in _children(driver.pid):  # the watchdog (and bwrap): gone first
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        driver.kill()
        driver.wait()
        time.sleep(0.3)
        assert _planted(w) == MADE  # nobody cleaned
        with w.session():
            assert not tmp.exists() and not manifest.exists()
            assert _planted(w) == []
        assert _moved(w.base / "data") == MADE
    finally:
        driver.kill()
        driver.wait()


def test_the_report_reads_the_boxs_index_itself_not_with_git(w: World) -> None:
    # Host git on PATH is a wrapper that logs each subcommand and runs the real one:
    # at the session's end no git may be asked to read the index the box wrote.
    wrapper = w.base / "bin"
    wrapper.mkdir()
    log = w.base / "git.log"
    real = shutil.which("git")
    (wrapper / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (wrapper / "git").chmod(0o755)
    env = {**w.env, "PATH": f"{wrapper}:{w.env['PATH']}"}
    with Session.open(str(w.project), SandboxSettings(hide_defaults=False), env=env) as s:
        log.write_text("")
        r = s.run(["sh", "-c", f"git init -q inner && git -C inner {' '.join(GIT_ID)} "
                   "commit -q --allow-empty -m x && git add inner"])
    assert r.ok, explain(r)
    assert any("staged as a gitlink" in line for line in s.warnings)
    asked = log.read_text().splitlines()
    assert not [a for a in asked if "ls-files" in a or "status" in a], asked


def test_an_index_the_report_cannot_read_is_said(w: World) -> None:
    r, warnings = w.box("git update-index --split-index")
    assert r.ok, explain(r)
    assert warnings == [
        f"the index {w.project}/.git/index was written during the session in a form this "
        "check does not read (a split index, or damaged) and git run on the host in "
        f"{w.project} would use it; check it before you do"]
