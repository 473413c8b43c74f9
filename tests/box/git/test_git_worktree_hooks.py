"""A relative ``core.hooksPath`` means a folder in each work tree git runs in.

The user's global config says ``core.hooksPath = .githooks``. Host git resolves that
against the top of the work tree it runs in: the project's, a submodule's, a linked
worktree's. The box must not be able to fill any of them: host ``git commit`` in the
submodule or the worktree would run what it wrote. Each attempt is made from the box,
then host git runs there for real.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.gitworld import World, explain, host_git_runs_nothing, w

__all__ = ["w"]  # the fixture, imported

HOOK = "printf '#!/bin/sh\\ntouch {marker}\\n' > {d}/pre-commit; chmod +x {d}/pre-commit"


def _global_hooks_path(w: World) -> None:
    (w.home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")


def _submodule(w: World) -> Path:
    sub = w.base / "sub"
    subprocess.run(["git", "init", "-q", "-b", "main", str(sub)], check=True, env=w.env)
    assert w.git("commit", "-q", "--allow-empty", "-m", "s", cwd=sub).returncode == 0
    added = w.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub),
                  "m1")
    assert added.returncode == 0, added.stderr
    assert w.git("commit", "-q", "-m", "with m1").returncode == 0
    return w.project / "m1"


def test_a_submodules_relative_hooks_folder_cannot_be_filled(w: World) -> None:
    module = _submodule(w)
    _global_hooks_path(w)
    r, _ = w.box("mkdir -p m1/.githooks; " + HOOK.format(marker=w.marker, d="m1/.githooks"))
    assert not (module / ".githooks" / "pre-commit").exists(), explain(r)
    host_git_runs_nothing(w, cwd=module)


def test_a_linked_worktrees_relative_hooks_folder_cannot_be_filled(w: World) -> None:
    tree = w.project / "wt"
    assert w.git("worktree", "add", "-q", str(tree)).returncode == 0
    _global_hooks_path(w)
    r, _ = w.box("mkdir -p wt/.githooks; " + HOOK.format(marker=w.marker, d="wt/.githooks"))
    assert not (tree / ".githooks" / "pre-commit").exists(), explain(r)
    host_git_runs_nothing(w, cwd=tree)
