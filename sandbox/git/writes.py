"""Which of git's config keys the box may set in the project's config: the allow-list.

The box writes a session copy of the project's ``.git/config``
(:mod:`sandbox.git.configcopy`); after each run the host takes from it only the changes
to keys this table allows, and says which others it refused. A key is allowed when it
names no program, no file git reads or runs, and no transport that starts one: what
host git does with it is ordinary work (who commits, which branch tracks which remote,
where a remote or a submodule is fetched from, how output is coloured). Everything
else is refused, whatever its value: ``core.*`` (``fsmonitor``, ``hooksPath``,
``sshCommand``, ``pager``, ``editor``, ``worktree``, ``bare``...), every ``*.helper``,
``filter.*``, ``diff.*``, ``merge.<driver>.*``, ``include*``, ``alias.*`` (a ``!``
alias is a shell command), ``credential.*``, ``protocol.*`` (``protocol.ext.allow``
turns on a transport that runs a shell), ``url.*.insteadOf`` (a URL re-written to one
of those), ``http.*`` (proxies, certificates, cookie files), ``gpg.*``,
``sequence.editor``, ``remote.<name>.uploadpack``/``receivepack``/``proxy``/``vcs``,
``submodule.<name>.update`` (``!command``), ``extensions.*`` and whatever git adds.

Families, and why each is safe:

- ``user.*``: the name, e-mail and signing key id written into commits; nothing runs.
  (``gpg.program``, which signs, is not here.)
- ``branch.<name>.remote|pushRemote|merge|rebase|description`` and the plain
  ``branch.autoSetupMerge|autoSetupRebase|sort``: what ``git branch
  --set-upstream-to``, ``git checkout -b --track`` and ``git branch -D`` write. A remote
  may be a URL, so it is checked as one (below).
- ``remote.<name>.url|pushurl|fetch|push|tagOpt|prune|pruneTags|mirror|
  skipDefaultUpdate|skipFetchAll`` and ``remote.pushDefault``: what ``git remote add``,
  ``set-url``, ``rename`` and ``remove`` write. Refspecs and switches run nothing; a URL
  is allowed when it starts no program (below).
- ``submodule.<name>.url|path|active|branch|shallow|fetchRecurseSubmodules|ignore`` and
  the plain ``submodule.recurse|fetchJobs|active``: what ``git submodule add``, ``init``
  and ``deinit`` write. Never ``update``, which may be ``!command``.
- ``init.defaultBranch``, ``pull.rebase|ff``, ``push.default|autoSetupRemote|
  followTags``, ``merge.ff|conflictStyle`` (the plain keys: a driver is
  ``merge.<name>.driver``), ``fetch.prune|pruneTags``, ``rebase.autoSquash|autoStash``:
  switches of ordinary commands.
- ``color.*`` and ``advice.*``: colours and hints.

A URL (a remote's, a branch's remote, a submodule's) is refused when git would start a
program for it: ``NAME::address`` runs the remote helper ``git-remote-NAME`` (``ext::``
runs a shell command, ``fd::`` talks to descriptors), and ``SCHEME://`` with a scheme
git does not know itself runs ``git-remote-SCHEME``. A value that starts with ``-`` is
refused (a host name read as an option has been a git bug more than once). A key with
no value (``[user]`` ``name`` alone) is refused: the command line cannot write it back.
"""

from __future__ import annotations

import re

from pathguard.records import NamedTuple
from sandbox.git import config as gitconfig


class Family(NamedTuple):
    """Keys of ``section`` that the box may set: with a subsection (``sub``, the
    ``<name>`` in ``branch.<name>.merge``) or without; ``names`` the variables allowed
    (lower case), or None for any; ``urls`` those whose value is checked as a URL."""

    section: str
    sub: bool
    names: frozenset[str] | None
    urls: frozenset[str] = frozenset()


def _f(section: str, sub: bool, names: str | None, urls: str = "") -> Family:
    return Family(section, sub, frozenset(names.split()) if names is not None else None,
                  frozenset(urls.split()))


ALLOWED: tuple[Family, ...] = (
    _f("user", False, None),
    _f("branch", True, "remote pushremote merge rebase description", "remote pushremote"),
    _f("branch", False, "autosetupmerge autosetuprebase sort"),
    _f("remote", True, "url pushurl fetch push tagopt prune prunetags mirror "
       "skipdefaultupdate skipfetchall", "url pushurl"),
    _f("remote", False, "pushdefault", "pushdefault"),
    _f("submodule", True, "url path active branch shallow fetchrecursesubmodules ignore",
       "url"),
    _f("submodule", False, "recurse fetchjobs active"),
    _f("init", False, "defaultbranch"),
    _f("pull", False, "rebase ff"),
    _f("push", False, "default autosetupremote followtags"),
    _f("merge", False, "ff conflictstyle"),
    _f("fetch", False, "prune prunetags"),
    _f("rebase", False, "autosquash autostash"),
    _f("color", False, None),
    _f("color", True, None),
    _f("advice", False, None),
)

# The schemes git handles itself (transport.c, remote-curl's http(s) and ftp(s)); any
# other ``SCHEME://`` runs ``git-remote-SCHEME``.
KNOWN_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ssh", "git", "file",
                           "git+ssh", "ssh+git"})
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def split(key: str) -> tuple[str, str | None, str]:
    """``key`` as git lists it (``branch.Topic.merge``) as (section, subsection or
    None, variable), section and variable in lower case."""
    section, _, rest = key.partition(".")
    sub, dot, name = rest.rpartition(".")
    return section.lower(), (sub if dot else None), name.lower()


def url_refusal(value: str) -> str | None:
    """Why the URL ``value`` may not be set, or None."""
    if _HELPER.match(value):
        return "a URL of the form NAME::... makes git start the program git-remote-NAME"
    scheme = _SCHEME.match(value)
    if scheme is not None and scheme.group(1).lower() not in KNOWN_SCHEMES:
        return (f"git starts the program git-remote-{scheme.group(1)} for a URL of that "
                "scheme")
    return None


def refusal(key: str, value: str | None) -> str | None:
    """Why the box may not set ``key`` (as git lists it) to ``value`` (None: the key
    alone, no ``=``), or None when it may."""
    section, sub, name = split(key)
    family = next((f for f in ALLOWED if f.section == section and f.sub == (sub is not None)
                   and (f.names is None or name in f.names)), None)
    if family is None or gitconfig.names_program(f"{section}.{name}") or \
            gitconfig.names_program(key.lower()):
        why = " (it can name a program git runs)" if _runs(key) else ""
        return f"not a key the box may set{why}"
    if value is None:
        return "a key with no value"
    if value.startswith("-"):
        return "a value that starts with '-'"
    return url_refusal(value) if name in family.urls else None


def _runs(key: str) -> bool:
    low = key.lower()
    section, _, name = split(key)
    return (gitconfig.names_program(low) or low == "core.hookspath"
            or section in ("include", "includeif", "alias", "filter", "protocol")
            or name in ("helper", "textconv", "driver", "update"))
