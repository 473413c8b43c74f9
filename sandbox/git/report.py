"""What the box could not stop, said at the session's end: git folders that appeared
(at any depth, or behind a link), protected links that were re-pointed, and nested
repositories staged as gitlinks, each with the hooks and programs it names. Every name
in a message was chosen by a boxed command, so each is escaped (:mod:`sandbox.text`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from sandbox.errors import GitLayoutError
from sandbox.fs import beneath
from sandbox.fs.relink import restore_link
from sandbox.git import config as gitconfig
from sandbox.git import safe as gitsafe
from sandbox.git.dirs import GitLayout, find_layout
from sandbox.git.index import gitlinks as index_gitlinks
from sandbox.text import escape


def _hooks(gitdir: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(os.path.join(gitdir, "hooks"))
                      if not n.endswith(".sample"))
    except OSError:
        return []


def _programs(git: str | None, config: str, env: Mapping[str, str]) -> list[str]:
    if git is None or not os.path.isfile(config) or os.path.islink(config):
        return []
    done = subprocess.run(gitsafe.argv(git, ["config", "--file", config, "-z", "--list"]),
                          env=gitconfig.git_env(env), capture_output=True, cwd="/",
                          stdin=subprocess.DEVNULL, timeout=30)
    if done.returncode != 0:
        return []
    entries = []
    for item in done.stdout.split(b"\0"):
        key, _, value = os.fsdecode(item).partition("\n")
        if key:
            entries.append(gitconfig.Entry("", key.lower(), value))
    return gitconfig.programs(entries)


def _with(hooks: list[str], programs: list[str]) -> str:
    parts = ([f"hooks {', '.join(hooks)}"] if hooks else []) + programs
    return f", with {' and '.join(escape(p) for p in parts)}," if parts else ""


def _tail(project: str) -> str:
    return f" and git run on the host in {escape(project)} would use it; check it before you do"


def _gitlinks(paths: list[str], project: str,
              known: tuple[str, ...]) -> list[tuple[str, str]]:
    """(gitlink, its git folder) for each gitlink whose ``.git`` leads to a git folder
    that was not one of the project's at the start."""
    out: list[tuple[str, str]] = []
    for path in paths:
        rel = os.path.relpath(os.path.join(path, ".git"), project)
        found = beneath.find(project, rel)
        if found.kind == "dir":
            gitdir = found.path
        elif found.kind == "file":
            data = beneath.read_beneath(project, rel, 4096) or b""
            first = data.decode("utf-8", "replace").split("\n", 1)[0].strip()
            if not first.startswith("gitdir:"):
                continue
            gitdir = os.path.realpath(os.path.join(path, first[len("gitdir:"):].strip()))
        else:
            continue
        if gitdir not in known:
            out.append((path, gitdir))
    return out


_TODO = ("rebase-merge/git-rebase-todo", "sequencer/todo")


def _exec_lines(gitdir: str) -> list[tuple[str, str]]:
    """(file, command) for each ``exec`` line of a rebase or cherry-pick left in
    progress: ``git rebase --continue`` on the host would run it."""
    out: list[tuple[str, str]] = []
    for rel in _TODO:
        data = beneath.read_beneath(gitdir, rel, 1 << 20)
        # git's sequencer skips blanks and tabs before the word and takes any blank,
        # tab or line end after it; a line ends at "\n" only ("\r" is a blank).
        for line in (data or b"").decode("utf-8", "replace").split("\n"):
            parts = line.strip(" \t\r\v\f").split(None, 1)
            if len(parts) == 2 and parts[0] in ("exec", "x") and parts[1].strip():
                out.append((os.path.join(gitdir, rel), parts[1].strip()))
    return out


# The strategies git has built in: any other name runs the program git-merge-<name>.
_BUILT_IN = ("ort", "recursive", "resolve", "octopus", "ours", "subtree")


def _strategies(gitdir: str) -> list[tuple[str, str]]:
    """(file, strategy) for each merge strategy an operation left in progress names that
    git does not have built in: continuing it on the host runs ``git-merge-<name>``,
    found on PATH -- or, for a name with a slash, a path of the agent's choice."""
    out: list[tuple[str, str]] = []
    for rel in ("rebase-merge/strategy", "rebase-apply/strategy"):
        data = beneath.read_beneath(gitdir, rel, 4096)
        name = (data or b"").decode("utf-8", "replace").strip()
        if name and name not in _BUILT_IN:
            out.append((os.path.join(gitdir, rel), name))
    opts = beneath.read_beneath(gitdir, "sequencer/opts", 1 << 16) or b""
    for line in opts.decode("utf-8", "replace").splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip().lower() == "strategy" and value.strip() not in _BUILT_IN:
            out.append((os.path.join(gitdir, "sequencer/opts"), value.strip()))
    return out


def report(project: str, start: GitLayout, env: Mapping[str, str], since: float,
           writable: tuple[str, ...] = ()) -> list[str]:
    """One warning per thing git run on the host would now use that was not there.
    ``since`` is when the session started; file times are compared with a second's
    slack, since the kernel stamps them from a coarser clock."""
    now = find_layout(project, env=env, writable=writable, ask_git=False)
    try:
        git = gitconfig.find_git(env, ())
    except GitLayoutError:
        git = None
    # A gitlink whose .git was a protected file at the start still leads where it did:
    # the box could neither change that file nor move its folder (pinned) or what it
    # names (a pinned git folder). Only the others are looked at again.
    fixed = set(start.protected)
    links = tuple(p for p in start.gitlinks if os.path.join(p, ".git") not in fixed)
    return [*_new_folders(project, start, now, git, env), *_links(project, start, now),
            *_todos(project, now),
            *_new_gitlinks(project, now, git, env, since=since - 1.0, known=start.git_dirs,
                           start_links=links)]


def _new_folders(project: str, start: GitLayout, now: GitLayout, git: str | None,
                 env: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    old_dot = start.dotgit.ino if start.dotgit else (0, 0)
    fresh_dot = now.dotgit is not None and now.dotgit.kind == "dir" and \
        now.dotgit.ino != old_dot
    # A git folder reached through a new link is said once, as the link.
    behind = {os.path.realpath(p) for p, _ in now.links if p not in dict(start.links)}
    for g in now.git_dirs:
        if g in behind or (
                g in start.git_dirs and not (fresh_dot and g == os.path.join(project, ".git"))):
            continue
        also = _with(_hooks(g), _programs(git, os.path.join(g, "config"), env))
        out.append(f"the git folder {escape(g)} was created during the session{also}"
                   + _tail(project))
    return out


def _links(project: str, start: GitLayout, now: GitLayout) -> list[str]:
    out: list[str] = []
    made = [p for p in now.skipped if p not in start.skipped]
    made += [p for p, _ in now.links if p not in dict(start.links) and not p.endswith("/.git")]
    for link in made:
        out.append(f"the git folder {escape(link)} is a link to "
                   f"{escape(os.path.realpath(link))} made during the session"
                   + _tail(project))
    dot, was = now.dotgit, start.dotgit
    if dot is not None and dot.kind == "link" and (was is None or was[:3] != dot[:3]):
        out.append(f"{escape(dot.path)} was made a link to {escape(dot.target)} during the "
                   "session" + _tail(project))
    for path, text in start.links:
        try:
            same = os.readlink(path) == text
        except OSError:
            same = False
        if same:
            continue
        aside = restore_link(path, text)
        if aside is None:
            out.append(f"{escape(path)} was a link to {escape(text)} at the start and was "
                       "changed during the session" + _tail(project))
        else:
            put = f"; what the box put there is now {escape(aside)}" if aside else ""
            out.append(f"{escape(path)} was a link to {escape(text)} at the start and was "
                       f"changed during the session: the link is back{put}")
    return out


# The folders of an operation left in progress, where _exec_lines and _strategies read.
_IN_PROGRESS = ("rebase-merge", "rebase-apply", "sequencer")


def _todos(project: str, now: GitLayout) -> list[str]:
    # Only the git folders with one of those folders (or anything else by that name)
    # are read: most of a repository's hundreds of module folders have none.
    busy = [g for g in now.git_dirs
            if any(f.kind != "missing" for f in beneath.find_in(g, "", _IN_PROGRESS))]
    runs = [f"{escape(todo)} asks git to run {escape(command)}; git rebase --continue (or "
            f"cherry-pick, revert) on the host in {escape(project)} would run it; check "
            "it before you do" for g in busy for todo, command in _exec_lines(g)]
    return runs + [
        f"{escape(file)} names the merge strategy {escape(name)}; git rebase --continue "
        f"(or cherry-pick, revert) on the host in {escape(project)} would run "
        f"git-merge-{escape(name)}; check it before you do"
        for g in busy for file, name in _strategies(g)]


def _new_gitlinks(project: str, now: GitLayout, git: str | None, env: Mapping[str, str],
                  *, since: float, known: tuple[str, ...],
                  start_links: tuple[str, ...]) -> list[str]:
    # Only an index written during the session can hold a new gitlink: asked then.
    index = os.path.join(now.git_dirs[0], "index") if now.git_dirs else ""
    try:
        fresh = bool(index) and os.lstat(index).st_mtime >= since
    except OSError:
        fresh = False
    out: list[str] = []
    # A new module folder under .git/modules is said once, as a new git folder. The
    # gitlinks known at the start are looked at again (a .git made in an empty one).
    known = (*known, *now.git_dirs)
    staged: list[str] | None = []
    if fresh:
        # Read here, not by git: the box wrote this index (sandbox/git/index.py).
        top = os.path.dirname(now.git_dirs[0]) if os.path.basename(
            now.git_dirs[0]) == ".git" else project
        staged = index_gitlinks(index, top)
        if staged is None:
            out.append(f"the index {escape(index)} was written during the session in a "
                       "form this check does not read (a split index, or damaged)"
                       + _tail(project))
    paths = list(dict.fromkeys([*start_links, *(
        p for p in staged or () if p == project or p.startswith(project + "/"))]))
    for path, g in _gitlinks(paths, project, known):
        also = _with(_hooks(g), _programs(git, os.path.join(g, "config"), env))
        out.append(f"the repository {escape(path)} inside the project was made during the "
                   f"session and staged as a gitlink{also}" + _tail(project))
    return out
