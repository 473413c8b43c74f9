"""git's everyday commands in a repository the session opened on, and in one made
in the run: bare and boxed alike."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from helpers.workloads import Workload, cases

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bwrap box"),
]

SUBMODULE = ("git init -q -b main libsrc && git -C libsrc commit -q --allow-empty -m lib && "
             "git -c protocol.file.allow=always submodule add -q ./libsrc lib")
WORKLOADS = [
    Workload("git-status-log-branch",
             "git status --short --branch; git log --oneline; git branch; "
             "git rev-parse HEAD", project="repo"),
    Workload("git-add-commit",
             "echo more >> notes.txt; echo new > new.txt; git add -A; "
             "git commit -q -m third && git log --oneline && git show --stat HEAD | tail -3",
             project="repo"),
    Workload("git-branch-switch-merge",
             "git switch -q -c feature && echo f > feature.txt && git add feature.txt && "
             "git commit -q -m feature && git switch -q main && "
             "git merge -q --no-edit feature && git log --oneline && git branch",
             project="repo"),
    Workload("git-diff", "sed -i 's/beta/BETA/' notes.txt; git diff; git diff --stat",
             project="repo"),
    Workload("git-clean-fdx",
             "mkdir -p build junk; touch build/x.o junk/y hello; git clean -fdx; "
             "echo clean=$?; git status --short; ls -A", project="repo"),
    Workload("git-stash",
             "echo wip >> notes.txt; git stash -q && git stash list && git status -s && "
             "git stash pop -q && git diff --stat", project="repo"),
    Workload("git-config-user-name",
             "git config user.name 'Someone Else' && git config user.name",
             project="repo"),
    Workload("git-remote-add",
             "git remote add origin https://git.example.invalid/x.git && git remote -v",
             project="repo"),
    Workload("git-branch-set-upstream",
             "git branch topic && git branch --set-upstream-to=main topic && "
             "git rev-parse --abbrev-ref topic@{upstream}", project="repo"),
    Workload("git-branch-delete",
             "git branch scratch && git branch -D scratch; echo rc=$?; git branch",
             project="repo"),
    Workload("git-rev-parse-paths",
             "git rev-parse --git-dir --git-common-dir --git-path hooks --show-toplevel",
             project="repo"),
    Workload("git-tag-describe", "git tag -a v1 -m one && git describe --tags",
             project="repo"),
    Workload("git-gc-count-objects",
             "git gc -q; git count-objects -v | grep -E '^(count|garbage|size-garbage)'",
             project="repo"),
    Workload("git-worktree-in-project",
             "git worktree add -q wt -b wt-branch && git worktree list | wc -l && "
             "git -C wt status --short --branch", project="repo"),
    Workload("git-init-in-the-run",
             "git init -q -b main && git add -A && git commit -q -m one && "
             "git log --oneline && git status --short && ls -A .git | sort",
             project="plain"),
    Workload("git-submodule-add-a-local-repository", SUBMODULE + " && "
             "git config --get submodule.lib.active && git submodule status | cut -c42-",
             project="repo",
             boundary=".gitmodules is read by host git: one the box makes is moved out of "
                      "the project after the run (docs/protected-files.md)",
             said="moved out of the project"),
    Workload("git-submodule-objects-keep-their-mode", SUBMODULE + " && "
             "find .git/modules -path '*objects/??/*' -exec stat -c '%a %h' {} + | sort",
             project="repo", ignore=(".gitmodules",),
             boundary="a submodule's objects are copies (0644, one link) in the box, hard "
                      "links of 0444 bare: .git is a mount of its own there, so git's "
                      "link() from libsrc fails across it (EXDEV) and it copies",
             said="git copied the objects of the submodule lib into"),
    Workload("git-reset-and-restore",
             "echo x >> notes.txt; git restore notes.txt; git reset -q --soft HEAD~1; "
             "git status --short; git log --oneline", project="repo"),
]


@cases(WORKLOADS)
def test_git_work_ends_boxed_as_it_ends_bare(
        work: Workload, entry: str, compare: Callable[[Workload, str], None]) -> None:
    compare(work, entry)
