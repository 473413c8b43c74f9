"""The project's git folders, and everything host git reads from them to decide what to
run: found without following links, once per session.

The box keeps ``.git`` writable (commits must work) but makes read-only, for every git
folder of the project (its ``.git``, a linked worktree's own and common folders, each
``worktrees/*`` entry, every module folder at any depth): ``hooks``, ``config``,
``config.worktree``, ``commondir`` and ``gitdir``; and, inside the folders the box can
write, the files the config includes, ``core.hooksPath`` and every program a key names
(asked of the host's git, :mod:`sandbox.git.config`). A protected name that does not
exist is not made (a placeholder would be a file nobody made, which git itself reads): a
session lists it as ``kept``, and what a run makes there is moved out once the run is
over (:func:`sandbox.git.layouts.unmade`, :mod:`sandbox.linux.keeper`). On macOS the
Seatbelt profile denies the name, there or not.

Also protected: each submodule checkout's ``.git`` and each staged nested repository's
git folder (the index's gitlinks, from ``git ls-files``), and each linked worktree's
``.git`` file that lies in a writable folder.

The rule for links: every path here is found by walking down from the project, the
common dir or a ``[sandbox] writable`` folder with :mod:`sandbox.fs.beneath`, so nothing
the plan binds is a link's target. A protected name (or a module folder) that *is* a
link is left as it is (a mount could not cover the link, only what it leads to): what
it leads to is protected when it lies in a writable folder and can be reached there
without links, and the link is checked at the end of the session. A link elsewhere on
the way to a protected path refuses the session (:class:`GitLinkError`): it could be
re-pointed. A ``.git`` file or link leading outside every writable folder is not
followed: what it names stays read-only, and is never bound.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from pathguard.records import NamedTuple
from sandbox.errors import GitLayoutError, GitLinkError
from sandbox.fs import beneath
from sandbox.fs.beneath import Found
from sandbox.git import config as gitconfig
from sandbox.git.linked import linked_common_dir, read_gitdir_file
from sandbox.text import escape

# What git reads in each git folder to decide what to run (gitrepository-layout), and
# what to make when it is missing: a folder, or a file with this content.
_NAMES: tuple[tuple[str, bytes | None], ...] = (
    ("hooks", None), ("config", b""), ("config.worktree", b""), ("commondir", b".\n"),
)
_WORKTREE_NAMES = ("commondir", "gitdir", "config.worktree", "config")
# The folders in a git folder the walk goes into.
_HOLDERS = ("modules", "worktrees")
MAX_DEPTH = 200


class GitLayout(NamedTuple):
    """What :func:`find_layout` found, as data (canonical paths)."""

    common_dir: str | None = None
    git_dirs: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()      # bound read-only onto themselves
    pinned_dirs: tuple[str, ...] = ()    # bound read-write onto themselves: not renamable
    make_dirs: tuple[str, ...] = ()      # to make before the box (empty folders)
    make_files: tuple[tuple[str, bytes], ...] = ()  # to make before the box
    links: tuple[tuple[str, str], ...] = ()  # protected names that are links: (path, text)
    dotgit: Found | None = None          # what ``<project>/.git`` was at the start
    skipped: tuple[str, ...] = ()        # git folders behind a link, not followed
    modules: tuple[str, ...] = ()        # the module folders among git_dirs
    gitlinks: tuple[str, ...] = ()       # the index's gitlinks (asked of host git)
    # (protected path, what the box sees there instead), made by the session once the
    # layout's missing names are: see sandbox.git.views.
    views: tuple[tuple[str, str], ...] = ()
    # The protected names missing at the open, not made (sandbox.git.layouts.unmade).
    kept: tuple[str, ...] = ()


class _Finder:
    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self.git_dirs: list[str] = []
        self.protected: list[str] = []
        self.pinned: list[str] = []
        self.make_dirs: list[str] = []
        self.make_files: list[tuple[str, bytes]] = []
        self.links: list[tuple[str, str]] = []
        self.skipped: list[str] = []
        self.module_dirs: list[str] = []
        self.gitlinks: list[str] = []
        # The other work trees host git may run in: submodules' and linked worktrees'
        # tops, where a relative core.hooksPath (or program) means another folder.
        self.tops: list[str] = []
        # What the lists above hold, looked up without walking them: a repository with
        # hundreds of modules has thousands of protected and pinned paths.
        self.seen: dict[str, set[str]] = {
            "pinned": set(), "protected": set(), "make_dirs": set(), "git_dirs": set()}
        # A git folder's ``modules`` and ``worktrees``, looked at with its protected
        # names: what the walk finds there when it comes to them.
        self.holders: dict[str, Found] = {}
        # Folders above a missing name that are there (not to be made).
        self.there: set[str] = set()

    def _add(self, kind: str, path: str) -> bool:
        """Append ``path`` to the list ``kind`` unless it is there; whether it was not."""
        seen = self.seen[kind]
        if path in seen:
            return False
        seen.add(path)
        getattr(self, kind).append(path)
        return True

    def _pin_above(self, root: str, rel: str) -> None:
        """Pin every folder between ``root`` and ``root/rel``, shallowest first. A folder
        pinned already has every folder above it pinned: the walk up stops there."""
        seen = self.seen["pinned"]
        up: list[str] = []
        d = os.path.dirname(os.path.join(root, rel))
        while len(d) > len(root) and d not in seen:
            up.append(d)
            d = os.path.dirname(d)
        for d in reversed(up):
            seen.add(d)
            self.pinned.append(d)

    def protect(self, path: str, make: bytes | bool | None = False, why: str = "",
                hops: int = 0, found: Found | None = None) -> None:
        """Make ``path`` read-only in the box (if it is in a writable folder). ``make``:
        False leave it missing, None make a folder, bytes make a file with them.
        ``found``: what :func:`beneath.find` says is there, when already asked."""
        where = beneath.relative(path, self.roots)
        if where is None:
            return  # outside every writable folder: the whole host is read-only
        root, rel = where
        if found is None:
            found = beneath.find(root, rel)
        if found.kind == "blocked":
            self._blocker(root, rel, why)
            return
        if found.kind == "link":
            self.links.append((path, found.target))
            real = os.path.realpath(path)
            if hops > 8:  # a loop of links: nothing git could read, nothing to follow
                raise GitLinkError(self._blocked(path, why))
            if beneath.relative(real, self.roots) is not None:
                self.protect(real, make, why, hops + 1)
            return
        if found.kind == "missing":
            if make is False:
                return
            self._make(root, rel, make)
        if self._add("protected", path):
            self._pin_above(root, rel)

    def _blocker(self, root: str, rel: str, why: str) -> None:
        """Something on the way to ``root/rel`` is not a folder. A link there (wherever
        it leads) could be re-pointed by the box at a file of its own: the session is
        refused. A file there is protected itself, so the box cannot put a folder in its
        place and the path in it."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            found = beneath.find(root, "/".join(parts[:i]))
            if found.kind == "link":
                raise GitLinkError(self._blocked(os.path.join(root, rel), why))
            if found.kind != "dir":
                self.protect(found.path)
                return
        raise GitLinkError(self._blocked(os.path.join(root, rel), why))

    def _make(self, root: str, rel: str, make: bytes | bool | None) -> None:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = os.path.join(root, *parts[:i])
            if d in self.seen["make_dirs"] or d in self.there:
                continue
            if beneath.find(root, os.path.join(*parts[:i])).kind == "missing":
                self._add("make_dirs", d)
            else:
                self.there.add(d)  # the folders above the next missing name are too
        path = os.path.join(root, rel)
        if make is None:
            self.make_dirs.append(path)
            self.seen["make_dirs"].add(path)
        elif isinstance(make, bytes):
            self.make_files.append((path, make))

    def _blocked(self, path: str, why: str) -> str:
        said = f" ({escape(why)})" if why else ""
        return (f"{escape(path)}{said} leads through a link in a folder the box can "
                "write, which could be re-pointed at the user's files; replace the link "
                "with the folder it names (or set [sandbox] protect = false)")

    def git_dir(self, path: str, *, linked_own: bool = False) -> None:
        if not self._add("git_dirs", path):
            return
        # The folder is reached once for all its names.
        where = beneath.relative(path, self.roots)
        names = tuple(name for name, _ in _NAMES)
        found: list[Found | None] = [None] * len(names)
        if where:
            found = [*beneath.find_in(*where, (*names, *_HOLDERS))]
            for held in found[len(names):]:
                if held is not None:
                    self.holders[held.path] = held
        for (name, make), there in zip(_NAMES, found[:len(names)], strict=True):
            # A linked worktree takes its hooks from the common dir: none is made.
            skip = linked_own and name == "hooks"
            self.protect(os.path.join(path, name), False if skip else make, found=there)

    def checkout(self, path: str) -> None:
        """A submodule's (or a staged nested repository's) ``.git`` in the work tree:
        host git goes into it, so a ``.git`` file is protected like the project's and a
        ``.git`` folder is a git folder of the project."""
        dotgit = os.path.join(path, ".git")
        where = beneath.relative(dotgit, self.roots)
        if where is None:
            return
        if path not in self.tops:
            self.tops.append(path)
        found = beneath.find(*where)
        if found.kind == "dir":
            self.git_dir(dotgit)
            self.modules(dotgit)
            self.worktrees(dotgit)
        elif found.kind in ("file", "link"):
            self.protect(dotgit)

    def modules(self, gitdir: str, depth: int = 0) -> None:
        """Every module folder under ``gitdir/modules``, at any depth, no link followed
        (a link is recorded in ``skipped``, and reported if it is new)."""
        self._walk_modules(os.path.join(gitdir, "modules"), depth)

    def _found(self, path: str) -> Found | None:
        """What is at ``path`` (None outside every writable folder); looked at now
        unless its git folder was just looked at (:meth:`git_dir`)."""
        where = beneath.relative(path, self.roots)
        if where is None:
            return None
        return self.holders.pop(path, None) or beneath.find(*where)

    def _walk_modules(self, folder: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise GitLayoutError(f"the git folder {escape(folder)} nests more than "
                              f"{MAX_DEPTH} folders deep; remove it and try again")
        found = self._found(folder)
        if found is not None and found.kind == "link":
            self._module_link(found, depth)
            return
        if found is None or found.kind != "dir":
            return
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.is_symlink():
                self._walk_modules(e.path, depth + 1)  # as a link, above
            elif e.is_dir(follow_symlinks=False):
                self._module_or_folder(e.path, depth)

    def _module_or_folder(self, path: str, depth: int) -> None:
        if os.path.lexists(os.path.join(path, "HEAD")):
            self.git_dir(path)
            self.module_dirs.append(path)
            self.worktrees(path)
            self._walk_modules(os.path.join(path, "modules"), depth + 1)
        else:
            self._walk_modules(path, depth + 1)

    def _module_link(self, link: Found, depth: int) -> None:
        """A link among the module folders: what it leads to is walked when that lies in
        a writable folder and is reached there without links (host git would use its
        hooks), and the link is checked at the end; elsewhere it is only reported."""
        real = os.path.realpath(link.path)
        inside = beneath.relative(real, self.roots)
        if inside is None or beneath.find(*inside).kind != "dir":
            self.skipped.append(link.path)
            return
        self.links.append((link.path, link.target))
        self._module_or_folder(real, depth + 1)

    def worktrees(self, gitdir: str) -> None:
        """Each ``worktrees/<id>`` entry's files: another linked worktree's commondir
        could send host git in that worktree to a config the box wrote."""
        holder = os.path.join(gitdir, "worktrees")
        found = self._found(holder)
        if found is None or found.kind != "dir":
            return
        try:
            entries = sorted(os.scandir(holder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.is_symlink():
                self.skipped.append(e.path)
            elif e.is_dir(follow_symlinks=False):
                self.git_dirs.append(e.path)
                self.seen["git_dirs"].add(e.path)
                for name in _WORKTREE_NAMES:
                    make = b"" if name == "config.worktree" else False
                    self.protect(os.path.join(e.path, name), make)
                self._worktree_file(e.path)

    def _worktree_file(self, entry: str) -> None:
        """That worktree's own ``.git`` file, named by the entry's ``gitdir``: inside a
        writable folder it could be re-pointed like the project's."""
        where = beneath.relative(os.path.join(entry, "gitdir"), self.roots)
        data = beneath.read_beneath(*where, 4096) if where else None
        named = (data or b"").decode("utf-8", "replace").strip()
        if os.path.isabs(named) and os.path.basename(named) == ".git":
            self.protect(os.path.normpath(named))
            top = os.path.dirname(os.path.normpath(named))
            if top not in self.tops:
                self.tops.append(top)


def _static(project: str, roots: tuple[str, ...],
            linked: tuple[str, str] | None) -> tuple[_Finder, Found]:
    f = _Finder(roots)
    dotgit = os.path.join(project, ".git")
    dot = beneath.find(project, ".git")
    if dot.kind == "dir":
        f.git_dir(dotgit)
    elif dot.kind == "file":
        f.protect(dotgit)
        if linked is not None:
            f.git_dir(linked[0], linked_own=True)
            f.git_dir(linked[1])
        else:
            named = read_gitdir_file(project)
            inside = named and beneath.relative(named, (project,))
            if inside and beneath.find(*inside).kind == "dir":
                f.git_dir(named or "")
            elif named:
                f.skipped.append(named)
    elif dot.kind == "link":
        f.links.append((dotgit, dot.target))
        real = os.path.realpath(dotgit)
        inside = beneath.relative(real, roots)
        if inside and beneath.find(*inside).kind == "dir":
            f.git_dir(real)
    for g in list(f.git_dirs):
        f.modules(g)
        f.worktrees(g)
    return f, dot


def _from_host_git(f: _Finder, project: str, git: str, env: Mapping[str, str],
                   home: str) -> None:
    top, hooks, entries, links = gitconfig.ask_project(git, project, env)
    seen = {e.origin for e in entries if e.origin}
    wants = gitconfig.wanted(entries, top, home)
    if hooks:
        wants.append(gitconfig.Wanted(hooks, "hooks", "", True))
    # The other git folders' own configs (modules, other worktrees), when they hold a
    # key or an include worth asking about.
    for g in f.git_dirs:
        for name in ("config", "config.worktree"):
            p = os.path.join(g, name)
            where = beneath.relative(p, f.roots)
            data = beneath.read_beneath(*where) if where else None
            if p not in seen and data and gitconfig.worth_asking(data):
                seen.add(p)
                wants += gitconfig.wanted(gitconfig.ask_file(git, p, env), top, home)
    f.gitlinks = links
    for link in f.gitlinks:
        f.checkout(link)
    # What a relative hooks folder or program means in each other work tree: git
    # resolves it against the top of the one it runs in. Only the entries that name a
    # hooks folder or a program are read again for each (a repository with hundreds of
    # modules has hundreds of tops, and a config with an entry or two per module).
    named = gitconfig.naming(entries)
    for other in f.tops:
        if other != top and named:
            wants += gitconfig.wanted(named, other, home)
    _protect_wanted(f, wants, seen, lambda path: gitconfig.wanted(
        gitconfig.ask_file(git, path, env), top, home))


def _protect_wanted(f: _Finder, wants: list[gitconfig.Wanted], seen: set[str],
                    ask: Callable[[str], list[gitconfig.Wanted]]) -> None:
    """Protect each path host git reads or runs, once; an include this project's
    config files (``seen``) do not hold yet is asked about too (``ask``)."""
    done: set[str] = set()
    while wants:
        w = wants.pop(0)
        if w.path in done:
            continue
        done.add(w.path)
        f.protect(w.path, None if w.folder else b"", why=f"{w.key} = {w.value}")
        included = w.key.startswith("include") and w.path not in seen
        if included and beneath.relative(w.path, f.roots) and os.path.isfile(w.path):
            # An include whose condition is false today: what it would include too.
            seen.add(w.path)
            wants += ask(w.path)


def _under_any(path: str, folders: set[str]) -> bool:
    """``path`` is one of ``folders`` or inside one: its ancestors looked up, not every
    folder compared (a repository with hundreds of modules has thousands of each)."""
    while True:
        if path in folders:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def find_layout(project: str, *, env: Mapping[str, str] | None = None,
                home: str | None = None, writable: tuple[str, ...] = (),
                forbidden: tuple[str, ...] = (), ask_git: bool = True) -> GitLayout:
    """Everything the box must protect for ``project`` (canonical). ``writable``: the
    other folders the box can write (paths there are protected too); ``forbidden``:
    folders the host's git must not come from. ``ask_git`` False skips the host's git
    (what a session's end does to list git folders)."""
    env = os.environ if env is None else env
    home = home or env.get("HOME") or os.path.expanduser("~")
    linked = linked_common_dir(project)
    common = linked[1] if linked else None
    roots = tuple(dict.fromkeys((project, *((common,) if common else ()), *writable)))
    f, dot = _static(project, roots, linked)
    if ask_git:
        git = gitconfig.find_git(env, (*roots, *forbidden))
        if git is not None:
            _from_host_git(f, project, git, env, home)
    protected = set(f.protected)
    pinned = [d for d in f.pinned if d not in roots and not _under_any(d, protected)]
    return GitLayout(common, tuple(dict.fromkeys(f.git_dirs)), tuple(f.protected),
                     tuple(pinned), tuple(f.make_dirs), tuple(f.make_files),
                     tuple(f.links), dot, tuple(f.skipped), tuple(f.module_dirs),
                     tuple(f.gitlinks))
