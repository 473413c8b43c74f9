"""macOS: ``(Policy, argv) -> LaunchPlan`` running ``argv`` under ``sandbox-exec``.

The profile is the fixed text of ``seatbelt_base.sbpl`` plus rules built from the
*shape* of the policy: how many writable folders, hidden paths, protected paths. Each
rule names its path as ``(param "WRITABLE_ROOT_0")`` and the value travels as a separate
``-DWRITABLE_ROOT_0=/path`` argument, so no path, whatever characters it holds, can
change the profile. Two policies whose paths differ only in spelling give byte-identical
profiles.

The rules, in the order Seatbelt needs them (the last rule that matches wins):

1. the base: deny by default, read everything, fork and exec, a few services;
2. write below each writable root: the project, a linked worktree's common directory,
   the private temp folder, the user temp folder, ``[sandbox] writable``;
3. no write to a protected path (``.git/hooks``, ``.git/config``) nor to a hidden one,
   and no read of a hidden one;
4. no unlink or rename of any folder above a hidden or protected path, so
   ``mv .git .git2`` cannot carry ``.git/hooks`` out from under its rule;
5. the network, only when the policy allows it.

``/usr/bin/sandbox-exec`` is named by its fixed path: it is never looked up on PATH,
where the agent might have planted another.
"""

from __future__ import annotations

import os
import shlex
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from sandbox.plan import BackendName, LaunchPlan, RunResult
from sandbox.platform import MACOS
from sandbox.policy import Policy
from sandbox.policy.startenv import box_env

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

# Files in the user temp folder (writable in the box, shared with the host) that host
# programs trust to decide what to run: xcrun's cache of where each developer tool lives
# (/usr/bin/git, cc, make are xcrun shims). The box's own xcrun keeps its cache in the
# box's TMPDIR, the private temp folder.
USER_TMP_PROTECTED = ("xcrun_db",)

# macOS keeps these three at the top only as links into /private. Seatbelt compares
# against where a path really is, so a rule for /tmp/x would never match anything.
_PRIVATE_LINKS = ("/tmp", "/var", "/etc")

# The rules that open the network (package data, like the base): used only when the
# session allows it.
NETWORK_PROFILE = "seatbelt_network.sbpl"


@cache
def base_profile() -> str:
    """The fixed part of every profile (package data ``seatbelt_base.sbpl``)."""
    return resources.files(__package__).joinpath("seatbelt_base.sbpl").read_text("utf-8")


@cache
def network_profile() -> str:
    """The fixed rules that open the network (package data ``seatbelt_network.sbpl``)."""
    return resources.files(__package__).joinpath(NETWORK_PROFILE).read_text("utf-8")


def canonical(path: str) -> str:
    """``path`` as Seatbelt sees it: absolute, ``/tmp``, ``/var`` and ``/etc`` under
    ``/private``, and on macOS every link resolved and every name in the case the disk
    stores it.

    Elsewhere nothing on disk is consulted (plans for macOS are built and checked on
    any machine); only the ``/private`` rules and lexical clean-up apply.
    Raises :class:`ValueError` for a relative path.
    """
    if not os.path.isabs(path):
        raise ValueError(f"the path {path} is not absolute")
    p = "/" + os.path.normpath(path).lstrip("/")
    p = _under_private(p)
    if MACOS:
        p = _stored_case(_under_private(os.path.realpath(p)))
    return p


def _under_private(p: str) -> str:
    for top in _PRIVATE_LINKS:
        if p == top or p.startswith(top + "/"):
            return "/private" + p
    return p


def _fold(name: str) -> str:
    # APFS and HFS+ as shipped ignore case and Unicode normalisation both.
    return unicodedata.normalize("NFD", name).casefold()


def _stored_case(p: str) -> str:
    """``p`` with each existing name spelled as its folder lists it.

    On a case-insensitive disk ``~/.SSH`` opens ``~/.ssh``, but Seatbelt matches the
    stored name byte for byte: a hidden path written in another case would hide
    nothing. A name that cannot be listed is kept as written.
    """
    out = "/"
    for name in p.strip("/").split("/"):
        if not name:
            continue
        try:
            entries = os.listdir(out)
        except OSError:
            entries = []
        if name not in entries:
            matches = [e for e in entries if _fold(e) == _fold(name)]
            if len(matches) == 1:
                name = matches[0]
        out = os.path.join(out, name)
    return out


def _where_name_lives(path: str) -> str:
    """The location of the name ``path`` itself (its folder resolved, not the name).

    For a link that is the link, which ``rm`` would remove; :func:`canonical` gives
    where it leads, which a write through it reaches.
    """
    parent, name = os.path.split(path)
    if not name:
        return canonical(path)
    p = os.path.join(canonical(parent), name)
    if MACOS:
        p = _stored_case(p)
    return p


def _unique(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out


def _ancestors(path: str) -> list[str]:
    """Every folder above ``path``, nearest first, ``/`` excluded."""
    out: list[str] = []
    p = os.path.dirname(path)
    while p not in ("/", ""):
        out.append(p)
        p = os.path.dirname(p)
    return out


@dataclass(frozen=True)
class Profile:
    """A profile and the values of the parameters it names, in argument order."""

    text: str
    params: tuple[tuple[str, str], ...]

    def definitions(self) -> tuple[str, ...]:
        return tuple(f"-D{name}={value}" for name, value in self.params)


def _rule(action: str, operations: str, filters: Sequence[str]) -> str:
    if not filters:
        # "(allow file-write*)" with no filter would open every path.
        raise ValueError(f"({action} {operations}) needs at least one filter")
    body = "\n".join(f"  {f}" for f in filters)
    return f"({action} {operations}\n{body})\n"


def writable_roots(policy: Policy) -> list[str]:
    """The folders the box may write below, canonical, in rule order."""
    roots = [policy.project]
    if policy.common_dir:
        roots.append(policy.common_dir)
    roots.append(policy.private_tmp)
    # The user temp folder is one the agent can write on macOS, as the guard assumes.
    roots.append(policy.tmpdir)
    roots += policy.writable
    return _unique(canonical(r) for r in roots)


def hidden_paths(policy: Policy) -> list[str]:
    """Hidden paths, canonical: each both where its name lives and where it leads."""
    return _unique(q for h in policy.hidden for q in (_where_name_lives(h), canonical(h)))


def protected_paths(policy: Policy) -> list[str]:
    """Protected paths, canonical, both spellings as for :func:`hidden_paths`: a link
    at ``.git/hooks`` must not be replaceable any more than the folder it leads to.
    A ``.git/hooks`` that does not exist yet is denied too, so it cannot be created;
    so are :data:`USER_TMP_PROTECTED`, every row of other tools' project configs
    (:mod:`sandbox.policy.toolconfigs`) and what the host reads in a writable folder
    (:mod:`sandbox.policy.hostreads`), there or not (``protect = false`` drops them all)."""
    from sandbox.policy.hostreads import inside
    from sandbox.policy.toolconfigs import guarded

    tools = (os.path.join(policy.project, t.name)
             for t in guarded(policy.allow_tool_configs) if policy.protect)
    reads = inside(policy.writable, policy.env, policy.home) if policy.protect else ()
    paths = (*policy.protected_paths(), *policy.missing_hook_dirs(), *tools, *reads,
             *(os.path.join(policy.tmpdir, n) for n in USER_TMP_PROTECTED if policy.protect))
    return _unique(q for p in paths for q in (_where_name_lives(p), canonical(p)))


def case_insensitive(path: str) -> bool:
    """Whether the volume that holds ``path`` ignores case, asked per path: the nearest
    existing name with a letter is looked up again with its case swapped. A question
    the disk cannot answer counts as yes: the folded rule is the stricter one."""
    p = path
    while not os.path.lexists(p):
        if os.path.dirname(p) == p:
            return True
        p = os.path.dirname(p)
    while p != "/":
        parent, name = os.path.split(p)
        # ASCII letters only: the same letters the folded rules fold.
        other = "".join(c.swapcase() if c.isascii() else c for c in name)
        if other != name:
            try:
                here, swapped = os.lstat(p), os.lstat(os.path.join(parent, other))
            except FileNotFoundError:
                return False
            except OSError:
                return True
            return (here.st_dev, here.st_ino) == (swapped.st_dev, swapped.st_ino)
        p = parent
    return True


_REGEX_SPECIAL = frozenset(".^$*+?()[]{}|\\")


def folded_regex(path: str, *, below: bool) -> str:
    """An anchored regex matching ``path`` in any case of its ASCII letters (and, with
    ``below``, everything under it). Seatbelt's literals compare bytes; on a volume that
    ignores case ``.git/HOOKS`` is ``.git/hooks`` to git but not to a literal."""
    out = []
    for ch in path:
        if ch.isascii() and ch.isalpha():
            out.append(f"[{ch.lower()}{ch.upper()}]")
        elif ch in _REGEX_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "^" + "".join(out) + ("(/.*)?$" if below else "$")


def _folds() -> Callable[[str], bool]:
    if MACOS:
        return cache(case_insensitive)
    # A plan for macOS built elsewhere: the disk to ask is not here, so assume macOS's
    # default volume, which ignores case.
    return lambda _p: True


def profile(policy: Policy, *, folds: Callable[[str], bool] | None = None) -> Profile:
    """The complete profile for ``policy`` and its parameter values.

    ``folds(path)`` says whether a path lies on a volume that ignores case (its rule is
    then a case-folded regex); by default asked of the disk on macOS, yes elsewhere.
    """
    fold = folds or _folds()
    params: list[tuple[str, str]] = []

    def param(prefix: str, values: Sequence[str]) -> list[str]:
        names: list[str] = []
        for i, value in enumerate(values):
            names.append(f"{prefix}_{i}")
            params.append((names[-1], value))
        return names

    def split(prefix: str, paths: Sequence[str], *, below: bool) -> list[str]:
        """The filters denying ``paths`` (and, with ``below``, what lies under them)."""
        exact = [p for p in paths if not fold(p)]
        folded = [folded_regex(p, below=below) for p in paths if fold(p)]
        names = param(prefix, exact)
        filters = [f'(literal (param "{n}"))' for n in names]
        if below:
            # The subpath as the literal: the rule must hold for the path itself
            # being made, not only for what lies below it.
            filters += [f'(subpath (param "{n}"))' for n in names]
        return filters + [f'(regex (param "{n}"))' for n in param(prefix + "_RX", folded)]

    writable = param("WRITABLE_ROOT", writable_roots(policy))
    hidden_values, protected_values = hidden_paths(policy), protected_paths(policy)
    hidden = split("HIDDEN", hidden_values, below=True)
    protected = split("PROTECTED", protected_values, below=True)
    ancestors = split("ANCESTOR", _unique(
        a for p in hidden_values + protected_values for a in _ancestors(p)), below=False)

    parts = [base_profile(), "\n; The session's rules.\n"]
    roots = [f'(subpath (param "{n}"))' for n in writable]
    parts.append(_rule("allow", "file-write*", roots))
    # No set-user-id or set-group-id mode where the box writes: a box started by root
    # is root on macOS, and would leave a set-id root program for any host user (the
    # Linux box refuses those modes in its system-call filter).
    parts.append(_rule("deny", "file-write-setugid", roots))
    if protected or hidden:
        parts.append(_rule("deny", "file-write*", protected + hidden))
    if hidden:
        parts.append(_rule("deny", "file-read*", hidden))
    if ancestors:
        # Only the folder itself: files beside it can still be removed.
        parts.append(_rule("deny", "file-write-unlink", ancestors))
    if policy.network:
        parts.append(network_profile())
    elif policy.network_allow is not None and policy.proxy_port:
        # The allow-list: the session's proxy on this machine's loopback, and nothing
        # else (it resolves names and connects for the box; sandbox/network/).
        parts.append(f'(allow network-outbound (remote ip "localhost:{policy.proxy_port}"))\n')
    parts.append(_socket_rules(policy, param))
    return Profile(text="".join(parts), params=tuple(params))


def _socket_rules(policy: Policy, param: Callable[[str, Sequence[str]], list[str]]) -> str:
    """Unix sockets, after the network rules so they win (the last match does): none but
    the box's own, below its private temp folder, and ``[sandbox] allow_unix_sockets``
    (connect only). With the network on, ``network-outbound`` would otherwise reach every
    listening socket: docker.sock, the ssh-agent, gpg-agent. DNS keeps its one socket."""
    (own,) = param("BOX_SOCKETS", [canonical(policy.private_tmp)])
    allowed = param("UNIX_SOCKET", _unique(canonical(s) for s in policy.allow_unix_sockets))
    out = ["(deny network-outbound (remote unix-socket))\n",
           "(deny network-bind (local unix-socket))\n"]
    if policy.network:
        out.append(_rule("allow", "network-outbound", [
            '(literal "/private/var/run/mDNSResponder")', '(literal "/var/run/mDNSResponder")']))
    out.append(f'(allow network-bind (local unix-socket (subpath (param "{own}"))))\n')
    out.append(_rule("allow", "network-outbound",
                     [f'(remote unix-socket (subpath (param "{n}")))' for n in [own, *allowed]]))
    return "".join(out)


def plan(
    policy: Policy,
    argv: Sequence[str],
    *,
    env_extra: Mapping[str, str] | None = None,
    prof: Profile | None = None,
) -> LaunchPlan:
    """The plan for running ``argv`` in the macOS box. Pure: builds data, starts nothing
    (on macOS it resolves links and name case of the policy's paths). ``prof`` is the
    session's profile when already built (:class:`SeatbeltBackend` builds it once).

    A bare ``argv[0]`` is looked up by sandbox-exec on the box's PATH, after the profile
    applies, from the project. Raises :class:`ValueError` for an empty command.
    """
    args = tuple(argv)
    if not args:
        raise ValueError("an empty command cannot run in the box")
    prof = prof or profile(policy)
    return LaunchPlan(
        backend="seatbelt",
        argv=(SANDBOX_EXEC, "-p", prof.text, *prof.definitions(), "--", *args),
        env=_with_proxy(policy, box_env(policy, env_extra,
                                        tmpdir=canonical(policy.private_tmp))),
        cwd=policy.project,
        description=shlex.join(args),
    )


def _with_proxy(policy: Policy, env: dict[str, str]) -> dict[str, str]:
    """The box's environment, pointed at the session's proxy when there is one."""
    if policy.network_allow is None or not policy.proxy_port:
        return env
    from sandbox.network.box import proxy_env

    return {**env, **proxy_env(policy.network_allow, port=policy.proxy_port,
                               token=policy.proxy_token)}


class SeatbeltBackend:
    """The macOS box of one session: ``/usr/bin/sandbox-exec``, always that path."""

    name: BackendName = "seatbelt"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._profile: Profile | None = None

    def check(self) -> None:
        """Once, at session start: ``/usr/bin/sandbox-exec`` is there, and this process
        is not already inside a Seatbelt sandbox, where no profile can be applied and
        every command would fail (see :mod:`sandbox.macos.darwin`)."""
        from sandbox.macos.darwin import require_seatbelt

        require_seatbelt()

    def plan(self, argv: Sequence[str], env_extra: Mapping[str, str] | None = None
             ) -> LaunchPlan:
        # The profile once per session, as bwrap's mounts: where each path leads, how
        # the disk spells it and whether it ignores case are taken at the first run, so
        # a link the box makes later cannot move a rule.
        if self._profile is None:
            self._profile = profile(self.policy)
        return plan(self.policy, argv, env_extra=env_extra, prof=self._profile)

    def read(self, result: RunResult) -> RunResult:
        return result
