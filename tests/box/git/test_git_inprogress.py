"""An operation left in progress is reported as git would read it: exec lines split by a
tab or a carriage return, and merge strategies that git would run as programs."""

from __future__ import annotations

import pytest
from helpers.gitworld import World, w  # noqa: F401  (the fixture)

pytestmark = pytest.mark.isolation

TAIL = "; git rebase --continue (or cherry-pick, revert) on the host in {p} would run {what}; "\
       "check it before you do"


@pytest.mark.parametrize("sep", ["\\t", "\\r", " \\t "])
def test_an_exec_line_split_by_any_blank_is_reported(w: World, sep: str) -> None:  # noqa: F811
    r, warnings = w.box("mkdir -p .git/rebase-merge && "
                        f"printf 'pick 1234 x\\nexec{sep}./evil.sh\\n' > "
                        ".git/rebase-merge/git-rebase-todo")
    assert r.ok, r
    assert warnings == [
        f"{w.project}/.git/rebase-merge/git-rebase-todo asks git to run ./evil.sh"
        + TAIL.format(p=w.project, what="it")]


@pytest.mark.parametrize(("rel", "text"), [
    ("rebase-merge/strategy", "/x"),
    ("sequencer/opts", "[options]\\n\\tstrategy = /x\\n"),
])
def test_a_strategy_git_would_run_as_a_program_is_reported(w: World, rel: str,  # noqa: F811
                                                           text: str) -> None:
    folder = rel.split("/")[0]
    r, warnings = w.box(f"mkdir -p .git/{folder} && printf '{text}' > .git/{rel}")
    assert r.ok, r
    assert warnings == [
        f"{w.project}/.git/{rel} names the merge strategy /x"
        + TAIL.format(p=w.project, what="git-merge-/x")]


def test_a_built_in_strategy_is_not_reported(w: World) -> None:  # noqa: F811
    r, warnings = w.box("mkdir -p .git/rebase-merge && echo ort > .git/rebase-merge/strategy")
    assert r.ok, r
    assert warnings == []
