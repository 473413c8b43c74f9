"""What the host's git reads and runs for a project, asked of git itself.

Re-implementing git's rules (which config files apply, ``includeIf`` conditions,
``core.hooksPath``, which keys name a program) drifts; asking it does not. This module
runs the host's git, found once outside every folder the box can write, at most a few
times per session, and turns its answers into paths: the files git includes, the hooks
folder it uses, and every program a key names.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping

from pathguard.records import NamedTuple
from sandbox.errors import GitLayoutError
from sandbox.fs.which import which
from sandbox.git import safe as gitsafe
from sandbox.text import escape

# Keys whose value is a command git may run in the course of ordinary work (status,
# commit, fetch, diff, merge...). The value's first word, and every word with a ``/``,
# is a program or script path. Matched as words, not a pattern: compiling one costs
# more than a session's whole look-up.
_PROGRAM_KEYS = frozenset({
    "core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "core.askpass",
    "core.gitproxy", "core.alternaterefscommand", "sequence.editor", "diff.external",
    "interactive.difffilter", "gpg.program", "gpg.ssh.defaultkeycommand",
    "credential.helper", "web.browser", "uploadpack.packobjectshook",
})
# (section, name) of keys with a subsection (``filter.<driver>.clean``).
_PROGRAM_NAMES = frozenset({
    ("gpg", "program"), ("credential", "helper"), ("filter", "clean"),
    ("filter", "smudge"), ("filter", "process"), ("diff", "textconv"), ("diff", "command"),
    ("merge", "driver"), ("mergetool", "cmd"), ("mergetool", "path"), ("difftool", "cmd"),
    ("difftool", "path"), ("remote", "uploadpack"), ("remote", "receivepack"),
    ("submodule", "update"), ("hook", "command"), ("man", "cmd"), ("man", "path"),
    ("browser", "cmd"), ("browser", "path"),
})


def names_program(key: str) -> bool:
    """Whether the (lower-case) key's value is a command git may run."""
    if key in _PROGRAM_KEYS:
        return True
    section, _, rest = key.partition(".")
    if section == "pager":
        return bool(rest)
    _, dot, name = rest.rpartition(".")
    return bool(dot) and (section, name) in _PROGRAM_NAMES


def worth_asking(data: bytes) -> bool:
    """Whether a config file (a module's, another worktree's) may hold a key that names
    a program, a hooks folder or an include, so that git must be asked what it says.
    Only a first look, leaning to yes: a section header or key line it cannot read
    plainly, or a continued line, is a yes."""
    section = ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            return True
        if line.startswith("["):
            head = line[1:line.find("]")] if "]" in line else ""
            name, _, sub = head.partition(" ")
            if not name or "." in name or (sub and not sub.startswith('"')):
                return True
            section = name.lower() + (".x" if sub else "")
            if line.find("]") != len(line) - 1:
                return True  # a key on the header's line
            continue
        key = line.split("=", 1)[0].strip().lower()
        if not section or not key.replace("-", "").isalnum():
            return True
        full = f"{section}.{key}"
        if full == "core.hookspath" or _includes(full) or names_program(full):
            return True
    return False


def _includes(key: str) -> bool:
    section, _, rest = key.partition(".")
    return (key == "include.path"
            or (section == "includeif" and rest.endswith(".path") and rest != "path"))


# What git says when it will not work in a folder at all: then it reads only the user's
# and the system's config. Any other failure is refused (the check cannot decide).
_NO_REPOSITORY = ("not a git repository", "detected dubious ownership")
_BOOLEAN = {"", "true", "false", "yes", "no", "on", "off", "1", "0"}
# Kept for the host git we ask: they say which config files the user's git reads, and
# what config it is given from the environment. GIT_CONFIG_COUNT goes with each of its
# GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n> (git refuses to start with half a set).
_GIT_ENV_KEPT = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
                 "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_",
                 "GIT_CONFIG_PARAMETERS")

class Entry(NamedTuple):
    """One config value: the file it came from (absolute; "" for none), key, value."""

    origin: str
    key: str
    value: str


class Wanted(NamedTuple):
    """A path git reads or runs, with why: the key and its value (for messages)."""

    path: str
    key: str
    value: str
    folder: bool = False


def find_git(env: Mapping[str, str], forbidden: tuple[str, ...]) -> str | None:
    """The host's git, by canonical path; None when there is none. A git inside a
    folder the box can write is refused: the agent could have put it there."""
    found = which("git", env.get("PATH", os.defpath))
    if found is None:
        return None
    real = os.path.realpath(found)
    for root in forbidden:
        if real == root or real.startswith(root.rstrip("/") + "/"):
            raise GitLayoutError(f"git on PATH ({escape(found)}) is in {escape(root)}, a "
                              "folder the box can write; put the system's git first on PATH")
    return real


# Read by the dynamic linker and by shells git may start: the host's git is asked
# before any box exists, so what these name (a library the agent built in the project)
# must never load into it. git is a system program; it needs none of them.
_NOT_FOR_GIT = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV")


def git_env(env: Mapping[str, str]) -> dict[str, str]:
    out = {k: v for k, v in env.items()
           if (not k.startswith("GIT_") or k.startswith(_GIT_ENV_KEPT))
           and k not in _NOT_FOR_GIT}
    out["LC_ALL"] = "C"
    out["GIT_TERMINAL_PROMPT"] = "0"
    return out


def _git(git: str, args: list[str], env: Mapping[str, str], cwd: str
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(gitsafe.argv(git, args), cwd=cwd, env=git_env(env),
                          stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)


def _parse(out: bytes, cwd: str) -> list[Entry]:
    """``--show-origin -z --list``: ``origin NUL key LF value NUL`` per entry."""
    parts = out.split(b"\0")
    found: list[Entry] = []
    for i in range(0, len(parts) - 1, 2):
        origin = os.fsdecode(parts[i])
        key, _, value = os.fsdecode(parts[i + 1]).partition("\n")
        if gitsafe.ours(origin, key, value):
            continue
        path = origin[len("file:"):] if origin.startswith("file:") else ""
        if path:
            path = os.path.normpath(os.path.join(cwd, path))
        found.append(Entry(path, key.lower(), value))
    return found


def _failed(what: str, done: subprocess.CompletedProcess[bytes]) -> GitLayoutError:
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    said = escape(lines[0]) if lines else f"exit status {done.returncode}"
    return GitLayoutError(f"git could not read {what}: {said}; fix it (or set "
                       "[sandbox] protect = false) and try again")


class Project(NamedTuple):
    """What git run in the project reads: the work tree's top (the project when it is
    not in one), the hooks folder it uses (None when it sees no repository, or will not
    use it: another owner), every config entry with its file, and the gitlinks."""

    top: str
    hooks: str | None
    entries: list[Entry]
    gitlinks: list[str]


def _start(git: str, args: list[str], env: Mapping[str, str], cwd: str
           ) -> subprocess.Popen[bytes]:
    return subprocess.Popen(gitsafe.argv(git, args), cwd=cwd, env=git_env(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen[bytes]) -> subprocess.CompletedProcess[bytes]:
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def ask_project(git: str, project: str, env: Mapping[str, str]) -> Project:
    """Asks git run in ``project`` two questions at once (they do not depend on each
    other): where the hooks, the top and the git folder are, and the config with its
    files. The index's gitlinks are read from the file (:mod:`sandbox.git.index`); git
    reads the index only when that reader cannot (a split index). A failure other than
    "no repository here" is refused. Where git could find no repository at all
    (:func:`no_repository_above`) only the config is asked for."""
    config = ["config", "--show-origin", "-z", "--list"]
    where = ["rev-parse", "--path-format=absolute", "--git-path", "hooks", "--show-toplevel",
             "--absolute-git-dir"]
    procs = [_start(git, args, env, project)
             for args in ([config] if no_repository_above(project) else [where, config])]
    *asked, listed = (_finish(p) for p in procs)
    done = asked[0] if asked else None
    said = done.stderr.decode("utf-8", "replace") if done else ""
    if done and done.returncode != 0 and not any(w in said for w in _NO_REPOSITORY):
        raise _failed(f"the repository of {escape(project)}", done)
    top, hooks, cwd, gitdir = project, None, project, ""
    if done and done.returncode == 0:
        lines = os.fsdecode(done.stdout).split("\n")
        hooks = lines[0]
        top = lines[1] if len(lines) > 1 and lines[1] else project
        gitdir = lines[2] if len(lines) > 2 else ""
    elif listed.returncode != 0:
        # Where git sees no repository it refuses to work at all, and reads only the
        # user's and the system's config: asked from / for that.
        cwd = "/"
        listed = _finish(_start(git, config, env, cwd))
    if listed.returncode != 0:
        raise _failed(f"the config for {escape(project)}", listed)
    found = _index_gitlinks(git, env, project, top, gitdir) if hooks else []
    return Project(top, hooks, _parse(listed.stdout, cwd), found)


def no_repository_above(project: str) -> bool:
    """Whether git, run in ``project``, could find no repository: no folder from it up
    to / holds a ``.git`` (a work tree's) or a ``HEAD`` (a bare repository's, or a git
    folder's), which is what git looks for, and the git asked is given no GIT_DIR (see
    :func:`git_env`). Then asking where the repository is would cost a git process for
    a known answer. Anything that cannot be looked at is git's to answer."""
    path = project
    while True:
        for name in (".git", "HEAD"):
            try:
                os.lstat(os.path.join(path, name))
                return False
            except FileNotFoundError:
                continue
            except OSError:
                return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _index_gitlinks(git: str, env: Mapping[str, str], project: str, top: str,
                    gitdir: str) -> list[str]:
    """The gitlinks the index records in ``project`` (which may lie below the top)."""
    from sandbox.git.index import gitlinks

    read = gitlinks(os.path.join(gitdir, "index"), top) if gitdir else None
    if read is None:
        return _gitlinks(_git(git, ["ls-files", "--stage", "-z"], env, project), project)
    return [p for p in read if p == project or p.startswith(project.rstrip("/") + "/")]


def _gitlinks(done: subprocess.CompletedProcess[bytes], cwd: str) -> list[str]:
    out: list[str] = []
    for item in done.stdout.split(b"\0") if done.returncode == 0 else []:
        meta, _, name = item.partition(b"\t")
        if meta.startswith(b"160000 "):
            out.append(os.path.join(cwd, os.fsdecode(name)))
    return out


def ask_file(git: str, path: str, env: Mapping[str, str]) -> list[Entry]:
    """Every entry of one config file and what it includes."""
    listed = _git(git, ["config", "--file", path, "--includes", "--show-origin", "-z",
                        "--list"], env, "/")
    if listed.returncode != 0:
        raise _failed(escape(path), listed)
    return _parse(listed.stdout, "/")


def _words(value: str) -> list[str]:
    value = value[1:] if value.startswith("!") else value
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _home(path: str, home: str) -> str:
    """``~`` and ``~/x`` against the session's home (git's own rule), ``~user`` as the
    system says."""
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return os.path.expanduser(path) if path.startswith("~") else path


def wanted(entries: list[Entry], top: str, home: str) -> list[Wanted]:
    """The paths the entries make git read (includes, as files) or run (programs, as
    files; ``core.hooksPath``, as a folder), made absolute the way git does."""
    out: list[Wanted] = []
    for e in entries:
        if _includes(e.key):
            p = _home(e.value, home)
            base = os.path.dirname(e.origin) if e.origin else top
            out.append(Wanted(os.path.normpath(os.path.join(base, p)), e.key, e.value))
        elif e.key == "core.hookspath" and e.value:
            out.append(Wanted(os.path.normpath(os.path.join(top, _home(e.value, home))),
                              e.key, e.value, True))
        elif names_program(e.key):
            if e.key == "core.fsmonitor" and e.value.lower() in _BOOLEAN:
                continue
            words = _words(e.value)
            for i, w in enumerate(words):
                if "/" in w or (i == 0 and e.key == "core.fsmonitor"):
                    w = _home(w, home)
                    out.append(Wanted(os.path.normpath(os.path.join(top, w)), e.key,
                                      e.value))
    return out


def naming(entries: list[Entry]) -> list[Entry]:
    """The entries that name a hooks folder or a program (not an include): those
    :func:`wanted` turns into paths that depend on the work tree's top."""
    return [e for e in entries if e.key == "core.hookspath" or (
        not _includes(e.key) and names_program(e.key))]


def programs(entries: list[Entry]) -> list[str]:
    """``key = value`` for each entry that names a program or hooks folder (messages)."""
    return [f"{e.key} = {e.value}" for e in entries
            if e.key == "core.hookspath" or (names_program(e.key) and not (
                e.key == "core.fsmonitor" and e.value.lower() in _BOOLEAN))]
