"""Which command elements are checked, the PATH lookup at start, and PATH pruning."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.trees import FIX_W, link, touch

from pathguard import zones as z
from pathguard.argv import CommandVerdict, check_command, find_program, prune_path
from pathguard.guard import Guard
from pathguard.zones import Zone


@dataclass
class Tree:
    root: Path
    proj: Path
    tools: Path
    guard: Guard

    def run(self, *command: str | Path, path_env: str | None = None) -> CommandVerdict:
        return check_command("h", [str(c) for c in command], project=str(self.proj),
                             guard=self.guard, path_env=path_env)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    root = tmp_path.resolve()
    proj = root / "proj"
    proj.mkdir()
    tools = root / "tools"
    tools.mkdir()
    guard = Guard([Zone(str(proj), "project", z.PROJECT)], [])
    return Tree(root, proj, tools, guard)


def in_project(path: str) -> str:
    return f"hook h: {path} is in the project, so the agent could change it. {FIX_W}"


# -- command[0] -----------------------------------------------------------------------


def test_an_absolute_program_outside_passes_unchanged(tree: Tree) -> None:
    hook = touch(tree.tools / "check.sh")
    v = tree.run(hook)
    assert v.ok and v.argv == (str(hook),) and v.refusals == ()


def test_an_absolute_program_in_the_project_is_refused(tree: Tree) -> None:
    hook = touch(tree.proj / "hooks" / "check.sh")
    v = tree.run(hook, "--flag")
    assert not v.ok and v.refusals == (in_project(str(hook)),)


def test_a_relative_program_with_a_slash_is_refused(tree: Tree) -> None:
    touch(tree.proj / "hooks" / "check.sh")
    v = tree.run("hooks/check.sh")
    assert v.refusals == (
        "hook h: hooks/check.sh must be an absolute path "
        "(a command with a / is not looked up on PATH).",
    )


def test_a_missing_absolute_program_is_not_found(tree: Tree) -> None:
    v = tree.run(tree.tools / "check.sh")
    assert v.refusals == (f"hook h: {tree.tools / 'check.sh'} was not found.",)


def test_a_missing_absolute_program_in_the_project_is_refused_as_in_the_project(
    tree: Tree,
) -> None:
    v = tree.run(tree.proj / "check.sh")
    assert v.refusals == (in_project(str(tree.proj / "check.sh")),)


def test_a_name_not_on_path_is_not_found(tree: Tree) -> None:
    v = tree.run("check.sh", path_env=str(tree.tools))
    assert v.refusals == ("hook h: check.sh was not found.",)
    assert tree.run("check.sh", path_env=None).refusals == ("hook h: check.sh was not found.",)


def test_a_name_is_looked_up_on_path_and_replaced_by_what_was_found(tree: Tree) -> None:
    hook = touch(tree.tools / "check.sh")
    v = tree.run("check.sh", "x", path_env=f"/nonexistent:{tree.tools}")
    assert v.ok and v.argv == (str(hook), "x")


def test_path_lookup_skips_empty_and_relative_entries(
    tree: Tree, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # From the project, "" and "." would find the project's copy.
    touch(tree.proj / "check.sh")
    touch(tree.proj / "bin" / "check.sh")
    good = touch(tree.tools / "check.sh")
    monkeypatch.chdir(tree.proj)
    v = tree.run("check.sh", path_env=f"::.:bin:{tree.tools}")
    assert v.ok and v.argv[0] == str(good)


def test_path_lookup_skips_files_that_are_not_executable(tree: Tree) -> None:
    touch(tree.root / "a" / "check.sh", 0o644)
    (tree.root / "b" / "check.sh").mkdir(parents=True)
    good = touch(tree.root / "c" / "check.sh")
    # A file with no x bit and a folder are skipped (for root too: X_OK on a regular
    # file needs some x bit).
    found = find_program("check.sh", f"{tree.root / 'a'}:{tree.root / 'b'}:{tree.root / 'c'}")
    assert found == str(good)


def test_a_writable_path_entry_holding_the_program_is_refused(tree: Tree) -> None:
    planted = touch(tree.proj / "bin" / "check.sh")
    touch(tree.tools / "check.sh")
    v = tree.run("check.sh", path_env=f"{tree.proj / 'bin'}:{tree.tools}")
    assert v.argv[0] == str(planted)
    assert v.refusals == (in_project(str(planted)),)


def test_a_path_entry_that_is_a_link_into_the_project_is_refused(tree: Tree) -> None:
    touch(tree.proj / "bin" / "check.sh")
    entry = link(tree.root / "bin-link", tree.proj / "bin")
    v = tree.run("check.sh", path_env=str(entry))
    assert v.argv[0] == f"{entry}/check.sh"
    assert v.refusals == (in_project(f"{entry}/check.sh"),)


# -- later elements -------------------------------------------------------------------


def test_an_existing_relative_argument_in_the_project_is_refused(tree: Tree) -> None:
    touch(tree.proj / "hooks" / "r.yaml")
    v = tree.run(touch(tree.tools / "check.sh"), "hooks/r.yaml")
    assert v.refusals == (in_project("hooks/r.yaml"),)


def test_a_bare_name_that_exists_in_the_project_is_refused(tree: Tree) -> None:
    touch(tree.proj / "hook.py")
    v = tree.run(touch(tree.tools / "python3"), "hook.py")
    assert v.refusals == (in_project("hook.py"),)


def test_a_bare_word_that_does_not_exist_is_not_checked(tree: Tree) -> None:
    v = tree.run(touch(tree.tools / "check.sh"), "status", "hook.py")
    assert v.ok and len(v.verdicts) == 1


def test_an_existing_argument_outside_passes(tree: Tree) -> None:
    rules = touch(tree.tools / "r.yaml")
    v = tree.run(touch(tree.tools / "check.sh"), rules)
    assert v.ok and len(v.verdicts) == 2


def test_a_missing_path_shaped_argument_in_the_project_is_refused(tree: Tree) -> None:
    v = tree.run(touch(tree.tools / "check.sh"), "hooks/later.yaml")
    assert v.refusals == (in_project("hooks/later.yaml"),)


def test_a_missing_path_shaped_argument_outside_passes(tree: Tree) -> None:
    v = tree.run(touch(tree.tools / "check.sh"), str(tree.tools / "later" / "r.yaml"))
    assert v.ok and len(v.verdicts) == 2


def test_a_missing_path_in_a_hidden_folder_is_not_a_hidden_refusal(tree: Tree) -> None:
    ssh = tree.root / "home" / ".ssh"
    ssh.mkdir(parents=True)
    hook = touch(tree.tools / "check.sh")
    guard = Guard([], [Zone(str(ssh), "hidden", z.HIDDEN)])
    v = check_command("h", [str(hook), f"{ssh}/later"], project=str(tree.proj),
                      guard=guard, path_env=None)
    assert v.ok
    touch(ssh / "now")
    v = check_command("h", [str(hook), f"{ssh}/now"], project=str(tree.proj),
                      guard=Guard([], [Zone(str(ssh), "hidden", z.HIDDEN)]), path_env=None)
    assert not v.ok


def test_an_option_value_is_checked_like_an_element(tree: Tree) -> None:
    touch(tree.proj / "hooks" / "r.yaml")
    hook = touch(tree.tools / "check.sh")
    assert tree.run(hook, "--rules=hooks/r.yaml").refusals == (in_project("hooks/r.yaml"),)
    assert tree.run(hook, f"--rules={tree.tools}/r.yaml").ok
    # Only the first = splits: the value keeps the rest (shaped like a path, in the
    # project, so refused as one).
    v = tree.run(hook, "--define=a=hooks/r.yaml")
    assert v.refusals == (in_project("a=hooks/r.yaml"),)


def test_an_empty_option_value_names_nothing(tree: Tree) -> None:
    v = tree.run(touch(tree.tools / "check.sh"), "--exclude=")
    assert v.ok and len(v.verdicts) == 1


def test_a_value_that_only_looks_like_a_path_is_refused_as_one(tree: Tree) -> None:
    v = tree.run(touch(tree.tools / "check.sh"), "--header=Content-Type:application/json")
    assert v.refusals == (in_project("Content-Type:application/json"),)


def test_an_option_without_a_value_is_not_a_path_unless_it_exists(tree: Tree) -> None:
    hook = touch(tree.tools / "check.sh")
    v = tree.run(hook, "-v", "--", "-")
    assert v.ok and len(v.verdicts) == 1
    touch(tree.proj / "-rf")
    assert tree.run(hook, "-rf").refusals == (in_project("-rf"),)


def test_an_existing_name_with_spaces_is_checked(tree: Tree) -> None:
    touch(tree.proj / "my rules.yaml")
    hook = touch(tree.tools / "check.sh")
    assert tree.run(hook, "my rules.yaml").refusals == (in_project("my rules.yaml"),)
    # Missing and with a space: not shaped like a path.
    assert tree.run(hook, "my dir/x").ok


def test_a_dangling_link_argument_in_the_project_is_refused(tree: Tree) -> None:
    link(tree.proj / "cfg", tree.tools / "nowhere")
    v = tree.run(touch(tree.tools / "check.sh"), "cfg")
    assert v.refusals == (in_project("cfg"),)


def test_every_refusal_is_reported(tree: Tree) -> None:
    touch(tree.proj / "a.yaml")
    touch(tree.proj / "b.yaml")
    v = tree.run("nothere.sh", "a.yaml", "--x=b.yaml", path_env=str(tree.tools))
    assert v.refusals == ("hook h: nothere.sh was not found.", in_project("a.yaml"),
                          in_project("b.yaml"))


def test_an_empty_command_is_an_error(tree: Tree) -> None:
    with pytest.raises(ValueError, match="empty command"):
        tree.run()


# -- PATH pruning ---------------------------------------------------------------------


def test_prune_path_keeps_good_entries_in_order(tree: Tree) -> None:
    a = tree.root / "a"
    b = tree.root / "b"
    a.mkdir()
    b.mkdir()
    assert prune_path(f"{a}:{b}", tree.guard) == f"{a}:{b}"


def test_prune_path_drops_empty_dot_and_relative_entries(tree: Tree) -> None:
    assert prune_path(f"::.:bin:{tree.tools}:", tree.guard) == str(tree.tools)


def test_prune_path_drops_entries_in_the_project_and_links_into_it(tree: Tree) -> None:
    (tree.proj / "bin").mkdir()
    lk = link(tree.root / "pbin", tree.proj / "bin")
    env = f"{tree.proj / 'bin'}:{lk}:{tree.proj}:{tree.tools}"
    assert prune_path(env, tree.guard) == str(tree.tools)


def test_prune_path_drops_entries_that_cannot_be_traced(tree: Tree) -> None:
    dangling = link(tree.root / "later", tree.root / "not-yet")
    link(tree.root / "l1", tree.root / "l2")
    link(tree.root / "l2", tree.root / "l1")
    env = f"{dangling}:{tree.root / 'l1'}:{tree.tools}"
    assert prune_path(env, tree.guard) == str(tree.tools)


def test_prune_path_gives_none_when_nothing_is_left(tree: Tree) -> None:
    assert prune_path(f":.:{tree.proj}", tree.guard) is None
    assert prune_path("", tree.guard) is None
    assert prune_path(None, tree.guard) is None


def test_each_refusal_carries_its_kind_and_folder(tree: Tree) -> None:
    inside = touch(tree.proj / "check.sh")
    loop = link(tree.tools / "a", tree.tools / "b")
    link(tree.tools / "b", tree.tools / "a")
    v = tree.run(inside, f"--rules={loop}")
    assert [(r.path, r.kind, r.folder) for r in v.details] == [
        (str(inside), "project", str(tree.proj)),
        (str(loop), "undecidable", None),
    ]
    assert v.refusals == tuple(r.message for r in v.details)
    assert [(r.kind, r.folder) for r in tree.run("no-such-program-here", path_env="/usr/bin")
            .details] == [("not-found", None)]
    assert [r.kind for r in tree.run("hooks/check.sh").details] == ["not-absolute"]
