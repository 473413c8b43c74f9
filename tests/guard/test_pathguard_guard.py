"""The guard on real temporary trees with real links: W, H, as written and where it leads."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

import pytest
from helpers.trees import FIX_H, FIX_W, link, touch
from helpers.unprivileged import as_nobody, searchable_tmp

from pathguard import zones as z
from pathguard.guard import Guard
from pathguard.zones import Zone
from sandbox.policy import Policy, PolicyOptions


@dataclass
class Tree:
    root: Path
    proj: Path
    out: Path
    guard: Guard

    def check(self, path: str | Path, cwd: str | Path | None = None) -> bool:
        return self.guard.check(str(path), str(cwd or self.proj)).ok


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    root = tmp_path.resolve()
    proj = root / "proj"
    (proj / "sub").mkdir(parents=True)
    out = root / "out"
    out.mkdir()
    guard = Guard([Zone(str(proj), "project", z.PROJECT)], [])
    return Tree(root, proj, out, guard)


# -- the plain cases ------------------------------------------------------------------


def test_a_file_outside_the_project_passes(tree: Tree) -> None:
    assert tree.check(touch(tree.out / "check.sh"))


def test_a_program_in_the_project_is_refused(tree: Tree) -> None:
    hook = touch(tree.proj / "hooks" / "check.sh")
    v = tree.guard.check(str(hook), "/")
    assert not v.ok and v.zone is not None and v.zone.kind == "project"
    assert v.refusal("no-force-push") == (
        f"hook no-force-push: {hook} is in the project, so the agent could change it. {FIX_W}"
    )


def test_the_project_folder_itself_is_refused(tree: Tree) -> None:
    assert not tree.check(tree.proj)


def test_a_relative_path_is_taken_from_the_working_directory(tree: Tree) -> None:
    touch(tree.proj / "hooks" / "check.sh")
    touch(tree.out / "hooks" / "check.sh")
    assert not tree.check("hooks/check.sh", tree.proj)
    assert tree.check("hooks/check.sh", tree.out)


def test_a_sibling_folder_sharing_the_name_prefix_passes(tree: Tree) -> None:
    hook = touch(tree.root / "proj-tools" / "check.sh")
    assert tree.check(hook)


# -- links --------------------------------------------------------------------------


def test_a_link_outside_leading_to_a_file_inside_is_refused(tree: Tree) -> None:
    inside = touch(tree.proj / "check.sh")
    lk = link(tree.out / "check.sh", inside)
    v = tree.guard.check(str(lk), "/")
    assert not v.ok and v.location == str(inside)
    assert v.refusal("h") == (
        f"hook h: {lk} is in the project, so the agent could change it. {FIX_W}"
    )


def test_a_link_inside_leading_to_a_file_outside_is_refused(tree: Tree) -> None:
    # The agent could re-point the link.
    outside = touch(tree.out / "check.sh")
    lk = link(tree.proj / "check.sh", outside)
    v = tree.guard.check(str(lk), "/")
    assert not v.ok and v.location == str(lk)


def test_a_parent_folder_that_is_a_link_into_the_project_is_refused(tree: Tree) -> None:
    touch(tree.proj / "sub" / "check.sh")
    parent = link(tree.out / "tools", tree.proj / "sub")
    assert not tree.check(parent / "check.sh")


def test_a_dangling_link_into_the_project_is_refused(tree: Tree) -> None:
    lk = link(tree.out / "check.sh", tree.proj / "later.sh")
    v = tree.guard.check(str(lk), "/")
    assert not v.ok and v.status == "missing" and v.location == str(tree.proj / "later.sh")


def test_a_dangling_link_to_a_missing_folder_inside_the_project_is_refused(tree: Tree) -> None:
    lk = link(tree.out / "check.sh", tree.proj / "not" / "yet" / "check.sh")
    v = tree.guard.check(str(lk), "/")
    assert not v.ok and v.location == str(tree.proj / "not")


def test_a_dangling_link_to_nowhere_outside_passes(tree: Tree) -> None:
    lk = link(tree.out / "check.sh", tree.out / "gone.sh")
    v = tree.guard.check(str(lk), "/")
    assert v.ok and v.status == "missing"


def test_dot_dot_after_a_link_into_the_project_follows_the_kernel(tree: Tree) -> None:
    touch(tree.proj / "x")
    link(tree.out / "link", tree.proj / "sub")
    # Lexically this is out/x, outside; the kernel reaches proj/x.
    assert not tree.check(f"{tree.out}/link/../x")


def test_dot_dot_after_a_link_out_of_a_lexical_project_path_follows_the_kernel(
    tree: Tree,
) -> None:
    # Lexically root/proj/check.sh (inside); the kernel reaches elsewhere/proj/check.sh.
    elsewhere = tree.root / "elsewhere"
    touch(elsewhere / "proj" / "check.sh")
    (elsewhere / "deep").mkdir()
    link(tree.root / "jump", elsewhere / "deep")
    path = f"{tree.root}/jump/../proj/check.sh"
    assert os.path.realpath(path) == str(elsewhere / "proj" / "check.sh")
    assert tree.check(path)


def test_a_missing_folder_in_a_writable_folder_is_refused_even_when_dot_dot_leaves(
    tree: Tree,
) -> None:
    # The agent can create proj/missing as a link to anywhere, so where ../.. lands is
    # its choice.
    # The project is reached through a link, so the path as written is not in it.
    hook = touch(tree.out / "check.sh")
    link(tree.out / "p", tree.proj)
    path = f"{tree.out}/p/missing/../../check.sh"
    assert os.path.normpath(path) == str(hook)
    v = tree.guard.check(path, "/")
    assert not v.ok and v.location == str(tree.proj / "missing")


def test_a_folder_on_the_way_inside_the_project_is_refused_even_when_dot_dot_leaves(
    tree: Tree,
) -> None:
    # proj/sub could be replaced by a link, so ../.. from it is the agent's choice.
    hook = touch(tree.root / "check.sh")
    link(tree.out / "p", tree.proj)
    path = f"{tree.out}/p/sub/../../check.sh"
    assert os.path.realpath(path) == str(hook)
    v = tree.guard.check(path, "/")
    assert not v.ok and v.location == str(tree.proj / "sub")


def test_dot_dot_from_the_project_folder_itself_passes(tree: Tree) -> None:
    # The agent can change what is in the project, not the project folder itself.
    hook = touch(tree.root / "check.sh")
    link(tree.out / "p", tree.proj)
    path = f"{tree.out}/p/../check.sh"
    assert os.path.realpath(path) == str(hook)
    assert tree.check(path)


def test_a_path_written_through_the_project_is_refused_as_written(tree: Tree) -> None:
    touch(tree.out / "check.sh")
    v = tree.guard.check(f"{tree.proj}/../out/check.sh", "/")
    assert not v.ok and v.location == f"{tree.proj}/../out/check.sh"


def test_a_link_loop_is_refused_with_the_reason(tree: Tree) -> None:
    link(tree.out / "a", tree.out / "b")
    link(tree.out / "b", tree.out / "a")
    v = tree.guard.check(str(tree.out / "a"), "/")
    assert not v.ok and v.zone is None and v.status == "loop"
    assert v.refusal("h") == (
        f"hook h: {tree.out / 'a'} cannot be checked: a link loop or a chain of more than "
        "40 links, so the hook is refused."
    )


def make_chain(at: Path, n: int, end: Path) -> Path:
    for i in range(n - 1, -1, -1):
        link(at / f"l{i}", end if i == n - 1 else at / f"l{i + 1}")
    return at / "l0"


def test_a_chain_of_40_links_to_a_good_file_passes(tree: Tree) -> None:
    hook = touch(tree.out / "check.sh")
    assert tree.check(make_chain(tree.out / "chain", 40, hook))


def test_a_chain_of_41_links_is_refused(tree: Tree) -> None:
    hook = touch(tree.out / "check.sh")
    v = tree.guard.check(str(make_chain(tree.out / "chain", 41, hook)), "/")
    assert not v.ok and v.status == "loop"


def test_a_folder_that_cannot_be_searched_is_refused_with_the_reason(tree: Tree) -> None:
    base = searchable_tmp()
    try:
        hook = touch(base / "locked" / "check.sh")
        (base / "locked").chmod(0)
        v = as_nobody(lambda: tree.guard.check(str(hook), "/"))
    finally:
        (base / "locked").chmod(0o755)
        shutil.rmtree(base)
    assert v.refusal("h") == (
        f"hook h: {hook} cannot be checked: permission denied at {hook}, so the hook is refused."
    )


# -- the project through a link ---------------------------------------------------------


def test_the_project_given_by_a_link_guards_the_real_folder(tree: Tree) -> None:
    plink = link(tree.root / "plink", tree.proj)
    guard = Guard([Zone(str(plink), "project", z.PROJECT)], [])
    hook = touch(tree.proj / "check.sh")
    assert not guard.check(str(hook), "/").ok
    assert not guard.check(str(plink / "check.sh"), "/").ok


def test_the_project_given_by_its_real_path_guards_paths_through_a_link(tree: Tree) -> None:
    plink = link(tree.root / "plink", tree.proj)
    touch(tree.proj / "check.sh")
    v = tree.guard.check(str(plink / "check.sh"), "/")
    assert not v.ok and v.location == str(tree.proj / "check.sh")


# -- other writable zones -----------------------------------------------------------------


def test_a_writable_folder_is_named_with_its_label_and_path(tree: Tree) -> None:
    w = tree.root / "cache"
    hook = touch(w / "check.sh")
    guard = Guard([Zone(str(w), "writable", z.WRITABLE)], [])
    assert guard.check(str(hook), "/").refusal("h") == (
        f"hook h: {hook} is in a writable folder ({w}), so the agent could change it. {FIX_W}"
    )


def test_a_private_temp_folder_that_does_not_exist_yet_still_counts(tree: Tree) -> None:
    private = tree.root / "harness-sandbox-1000"
    guard = Guard([Zone(str(private), "writable", z.PRIVATE_TMP)], [])
    v = guard.check(str(private / "check.sh"), "/")
    assert v.refusal("h") == (
        f"hook h: {private / 'check.sh'} is in the private temp folder ({private}), "
        f"so the agent could change it. {FIX_W}"
    )
    # And through a link that waits for it.
    lk = link(tree.out / "check.sh", private / "check.sh")
    assert not guard.check(str(lk), "/").ok


def test_case_is_folded_only_when_asked(tree: Tree) -> None:
    written = str(tree.proj).upper() + "/CHECK.SH"
    zone = Zone(str(tree.proj), "project", z.PROJECT)
    assert not Guard([zone], [], casefold=True).check(written, "/").ok
    assert Guard([zone], []).check(written, "/").ok


def test_a_relative_zone_is_an_error() -> None:
    with pytest.raises(ValueError, match="not an absolute path"):
        Guard([Zone("proj", "project", z.PROJECT)], [])


# -- hidden -----------------------------------------------------------------------------


def test_a_file_in_a_hidden_folder_is_refused_with_the_hidden_text(tree: Tree) -> None:
    ssh = tree.root / "home" / ".ssh"
    hook = touch(ssh / "check.sh")
    guard = Guard([], [Zone(str(ssh), "hidden", z.HIDDEN)])
    assert guard.check(str(hook), "/").refusal("no-force-push") == (
        f"hook no-force-push: {hook} is in a folder the sandbox hides ({ssh}), "
        f"so the hook could not read it. {FIX_H}"
    )


def test_a_link_into_a_hidden_folder_is_refused(tree: Tree) -> None:
    ssh = tree.root / "home" / ".ssh"
    touch(ssh / "check.sh")
    lk = link(tree.out / "check.sh", ssh / "check.sh")
    guard = Guard([], [Zone(str(ssh), "hidden", z.HIDDEN)])
    v = guard.check(str(lk), "/")
    assert not v.ok and v.zone is not None and v.zone.kind == "hidden"


def test_a_hidden_file_is_refused(tree: Tree) -> None:
    netrc = touch(tree.root / "home" / ".netrc", 0o600)
    guard = Guard([], [Zone(str(netrc), "hidden", z.HIDDEN)])
    assert not guard.check(str(netrc), "/").ok


def test_hidden_is_skipped_when_asked(tree: Tree) -> None:
    ssh = tree.root / "home" / ".ssh"
    ssh.mkdir(parents=True)
    guard = Guard([], [Zone(str(ssh), "hidden", z.HIDDEN)])
    assert guard.check(str(ssh / "later"), "/", check_hidden=False).ok
    assert not guard.check(str(ssh / "later"), "/").ok


# -- zones from the policy ----------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
           "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "-c", "init.defaultBranch=main", *args],
                   cwd=cwd, env=env, check=True, capture_output=True)


def policy(project: Path, root: Path, **kw: Unpack[PolicyOptions]) -> Policy:
    home = root / "home"
    home.mkdir(exist_ok=True)
    args: PolicyOptions = {"private_tmp": str(root / "ptmp"), "home": str(home),
                           "env": {"HOME": str(home)}, "platform": "linux"}
    args.update(kw)
    return Policy.create(str(project), **args)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_linked_worktrees_common_dir_is_refused(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    main = root / "main"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=main)
    git("worktree", "add", "-q", str(root / "wt"), cwd=main)
    pol = policy(root / "wt", root)
    common = str(main / ".git")
    assert pol.common_dir == common
    hook = touch(main / ".git" / "check.sh")
    # A host hook: the system /tmp (where tmp_path may be) is not in W for it.
    guard = Guard(pol.writable_zones(boxed=False), [])
    assert guard.check(str(hook), "/").refusal("h") == (
        f"hook h: {hook} is in the worktree's common directory ({common}), "
        f"so the agent could change it. {FIX_W}"
    )
    # The main checkout's files are not the agent's.
    assert guard.check(str(touch(main / "tool.sh")), "/").ok


@pytest.fixture
def system_tmp_hook() -> Iterator[Path]:
    d = tempfile.mkdtemp(dir="/tmp")
    try:
        yield touch(Path(d) / "check.sh")
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize(
    ("session_boxed", "boxed", "refused"),
    [(True, True, True), (True, False, False), (False, True, True), (False, False, True)],
)
def test_a_hook_under_tmp_is_refused_for_a_boxed_hook_or_with_no_sandbox(
    tmp_path: Path, system_tmp_hook: Path, session_boxed: bool, boxed: bool,
    refused: bool,
) -> None:
    root = tmp_path.resolve()
    (root / "proj").mkdir()
    pol = policy(root / "proj", root, boxed=session_boxed)
    guard = Guard(pol.writable_zones(boxed=boxed), [])
    v = guard.check(str(system_tmp_hook), "/")
    assert v.ok is not refused
    if refused:
        assert v.refusal("h") == (
            f"hook h: {system_tmp_hook} is in the system temp folder (/tmp), "
            f"so the agent could change it. {FIX_W}"
        )


def test_the_policys_private_temp_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "proj").mkdir()
    pol = policy(root / "proj", root)
    hook = touch(root / "ptmp" / "check.sh")
    v = Guard(pol.writable_zones(boxed=False), []).check(str(hook), "/")
    assert v.zone is not None and v.zone.label == "the private temp folder"


def test_the_policys_hidden_folders_apply_to_boxed_hooks_only(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "proj").mkdir()
    hook = touch(root / "home" / ".claude" / "check.sh")
    pol = policy(root / "proj", root)
    boxed = Guard([], pol.hidden_zones(boxed=True))
    host = Guard([], pol.hidden_zones(boxed=False))
    assert boxed.check(str(hook), "/").refusal("no-force-push") == (
        f"hook no-force-push: {hook} is in a folder the sandbox hides "
        f"({root / 'home' / '.claude'}), so the hook could not read it. {FIX_H}"
    )
    assert host.check(str(hook), "/").ok


def test_the_policys_project_through_a_link_is_guarded_both_ways(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "proj").mkdir()
    plink = link(root / "plink", root / "proj")
    hook = touch(root / "proj" / "check.sh")
    guard = Guard(policy(plink, root).writable_zones(boxed=False), [])
    assert not guard.check(str(hook), "/").ok
    assert not guard.check(str(plink / "check.sh"), "/").ok


# -- the cache ------------------------------------------------------------------------------


def test_a_guard_checks_a_thousand_paths_examining_each_location_once(tree: Tree) -> None:
    hooks = [touch(tree.out / "hooks" / f"h{i}.sh") for i in range(1000)]
    for h in hooks:
        assert tree.guard.check(str(h), "/").ok
    examined = tree.guard.lookups
    # The shared folders once, each hook once, plus the project zone's walk.
    assert examined <= 1000 + 2 * len(tree.root.parts) + 4
    for h in hooks:
        assert tree.guard.check(str(h), str(tree.proj)).ok
    assert tree.guard.lookups == examined
