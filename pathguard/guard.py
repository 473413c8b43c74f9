"""The guard: is a path somewhere the agent could change (W) or the box hides (H)?

A path is checked as written and where it leads. Where it leads is the kernel's walk
(:mod:`pathguard.walk`): every folder and link on the way counts, since the agent could
replace a folder or re-point a link that sits in a folder it can write, and a missing
component counts, since the agent could create it (as a link to anywhere).

Rules, for W (folders the agent can write):

- the path as written is equal to or inside a zone (as written or where it leads);
- a location on the way is *strictly* inside a zone (the zone folder itself cannot be
  replaced by the agent, what is in it can);
- a missing location is equal to or inside a zone (it could be created there);
- the final location is equal to or inside a zone.

For H (what a sandboxed hook cannot read): the path as written, or any location on the
way, equal to or inside a zone.

A walk that cannot be finished (a link loop, more than 40 links, permission denied) is
refused with the reason: the guard fails closed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

from .aliases import Aliases
from .identity import Identity, of_stat
from .mounts import MountsUnreadable
from .records import NamedTuple
from .walk import Lookup, Status, Walk, walk
from .zones import Zone

FIX_WRITABLE = (
    "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks."
)
FIX_HIDDEN = "Move it, or set sandbox = false for this hook."
FIX_ALIAS = (
    "Copy it outside (for example to ~/.local/share/harness/hooks/) instead of mounting "
    "it, or start with --no-hooks."
)
FIX_HARD_LINK = (
    "Copy it (cp, not ln) so that it is a file of its own, or start with --no-hooks."
)
CHANGED_WHILE_CHECKED = "it changed while it was checked"

Problem = Literal["", "alias", "hard-link"]


class Verdict(NamedTuple):
    """The guard's answer for one path.

    ``path`` is the path as given to :meth:`Guard.check`. On a refusal ``zone`` names the
    zone and ``location`` the place (as written or on the way) that fell in it, or
    ``reason`` says why the path could not be checked. ``status`` is the walk's status
    ("ok" when the path exists and could be traced). ``problem`` is "alias" when
    ``location`` is ``same_as`` (in ``zone``) through the mount at ``mount``, and
    "hard-link" when the file has ``links`` names on the device of ``zone``.
    ``identity`` is what an accepted, existing path led to at the check.
    """

    path: str
    ok: bool
    status: Status = "ok"
    zone: Zone | None = None
    location: str | None = None
    reason: str = ""
    problem: Problem = ""
    same_as: str = ""
    mount: str = ""
    links: int = 0
    identity: Identity | None = None

    def refusal(self, hook: str) -> str:
        """The one-line message refusing hook ``hook`` for this path."""
        if self.ok:
            raise ValueError(f"{self.path} was not refused")
        head = f"hook {hook}: {self.path}"
        zone = self.zone
        if zone is None:
            return f"{head} cannot be checked: {self.reason}, so the hook is refused."
        where = zone.label if zone.kind == "project" else f"{zone.label} ({zone.path})"
        if self.problem == "alias":
            by_way = "" if self.location == self.path else f" (by way of {self.location})"
            return (f"{head}{by_way} is the same as {self.same_as} through the mount at "
                    f"{self.mount}, which is in {where}, so the agent could change it. "
                    f"{FIX_ALIAS}")
        if self.problem == "hard-link":
            return (f"{head} has {self.links} hard links and lies on the file system of "
                    f"{where}, so another of its names may be there and the agent could "
                    f"change it through that name. {FIX_HARD_LINK}")
        if zone.kind == "hidden":
            return f"{head} is in {where}, so the hook could not read it. {FIX_HIDDEN}"
        return f"{head} is in {where}, so the agent could change it. {FIX_WRITABLE}"


class _Form(NamedTuple):
    """One comparable form of a zone: ``key`` is a normalised absolute path."""

    key: str
    inside: str  # key + "/" (just "/" for the root), the prefix of what lies inside
    zone: Zone


# For one location: the first zone strictly containing it, the first equal to or
# containing it.
_Hit = tuple[Zone | None, Zone | None]


class Guard:
    """Check paths against the writable set W and the hidden set H.

    Each zone is compared as written and where it leads (walked once, here). The guard
    remembers every ``lstat``/``readlink`` answer, every walk and every verdict, so a
    config's hooks are checked against one picture of the file system, quickly.
    ``casefold`` compares case-insensitively, for macOS's default volumes.
    """

    def __init__(self, writable: Sequence[Zone], hidden: Sequence[Zone], *,
                 casefold: bool = False) -> None:
        self.writable = tuple(writable)
        self.hidden = tuple(hidden)
        self.casefold = casefold
        self._lookup = Lookup()
        self._w = self._forms(self.writable)
        self._h = self._forms(self.hidden)
        self._w_hits: dict[str, _Hit] = {}
        self._h_hits: dict[str, Zone | None] = {}
        self._verdicts: dict[tuple[str, str, bool], Verdict] = {}
        self._aliases = Aliases(self.writable, self._lookup)

    @property
    def lookups(self) -> int:
        """How many locations were examined on disk so far (each at most once)."""
        return self._lookup.calls

    def walk(self, path: str, cwd: str) -> Walk:
        """The kernel-like walk of ``path``, through this guard's remembered answers."""
        return walk(path, cwd, lookup=self._lookup)

    def check(self, path: str, cwd: str, *, check_hidden: bool = True) -> Verdict:
        """Check ``path`` (relative ones from ``cwd``) against W, and H unless
        ``check_hidden`` is False (for something that does not exist yet, which no
        sandbox hides)."""
        # An absolute path does not depend on the working directory.
        memo = (path, "" if path.startswith("/") else cwd, check_hidden)
        verdict = self._verdicts.get(memo)
        if verdict is None:
            verdict = self._check(path, cwd, check_hidden)
            self._verdicts[memo] = verdict
        return verdict

    # -- internals --------------------------------------------------------------------

    def _key(self, location: str) -> str:
        return location.casefold() if self.casefold else location

    def _forms(self, zones: Sequence[Zone]) -> tuple[_Form, ...]:
        out: list[_Form] = []
        for zone in zones:
            if not zone.path.startswith("/"):
                raise ValueError(f"the zone {zone.path} is not an absolute path")
            keys = [_as_written(zone.path, "/")]
            w = walk(zone.path, "/", lookup=self._lookup)
            if w.status in ("ok", "missing", "notdir"):
                # A zone that does not exist yet (the private temp folder before a
                # session) still counts where it would be.
                keys.append(w.leads_to())
            for key in dict.fromkeys(self._key(k) for k in keys):
                out.append(_Form(key, "/" if key == "/" else key + "/", zone))
        return tuple(out)

    def _w_hit(self, location: str) -> _Hit:
        hit = self._w_hits.get(location)
        if hit is None:
            key = self._key(location)
            strict: Zone | None = None
            within: Zone | None = None
            for f in self._w:
                if key.startswith(f.inside):
                    if strict is None and key != f.key:
                        strict = f.zone
                    if within is None:
                        within = f.zone
                elif within is None and key == f.key:
                    within = f.zone
            hit = (strict, within)
            self._w_hits[location] = hit
        return hit

    def _h_hit(self, location: str) -> Zone | None:
        if location in self._h_hits:
            return self._h_hits[location]
        key = self._key(location)
        found: Zone | None = None
        for f in self._h:
            if key == f.key or key.startswith(f.inside):
                found = f.zone
                break
        self._h_hits[location] = found
        return found

    def _check(self, path: str, cwd: str, check_hidden: bool) -> Verdict:
        w = self.walk(path, cwd)
        written = _as_written(path, cwd)
        hit = self._writable_on_the_way(w, written)
        if hit is None and check_hidden and self._h:
            hit = self._hidden_on_the_way(w, written)
        if hit is not None:
            zone, location = hit
            return Verdict(path, False, w.status, zone, location)
        if w.status in ("loop", "unreadable"):
            return Verdict(path, False, w.status, None, w.final, w.reason)
        return self._check_identity(path, w)

    def _writable_on_the_way(self, w: Walk, written: str) -> tuple[Zone, str] | None:
        """The first location, as written, on the walk or where it ends, that a W zone
        holds (a missing one: that a W zone holds or is), with that zone."""
        zone = self._w_hit(written)[1]
        if zone is not None:
            return zone, written
        for visit in w.visits:
            strict, within = self._w_hit(visit.location)
            if strict is not None:
                return strict, visit.location
            if visit.kind == "missing" and within is not None:
                return within, visit.location
        if w.status == "ok":
            zone = self._w_hit(w.final)[1]
            if zone is not None:
                return zone, w.final
        return None

    def _hidden_on_the_way(self, w: Walk, written: str) -> tuple[Zone, str] | None:
        """The first location, as written, on the walk or where it ends, in an H zone."""
        for location in (written, *(v.location for v in w.visits), w.final):
            hidden = self._h_hit(location)
            if hidden is not None:
                return hidden, location
        return None

    def _check_identity(self, path: str, w: Walk) -> Verdict:
        """The checks by identity, once the spelling passed: mounts and hard links."""
        try:
            alias = self._aliases.alias(w)
        except MountsUnreadable as err:
            return Verdict(path, False, w.status, None, w.final, str(err))
        if alias is not None:
            return Verdict(path, False, w.status, alias.zone, alias.location,
                           problem="alias", same_as=alias.same_as, mount=alias.mount)
        if w.status != "ok":
            return Verdict(path, True, w.status)
        try:
            st = os.lstat(w.final)
        except OSError:
            return Verdict(path, False, "unreadable", None, w.final, CHANGED_WHILE_CHECKED)
        link = self._aliases.hard_link(w.final, st)
        if link is not None:
            return Verdict(path, False, w.status, link.zone, w.final, problem="hard-link",
                           links=link.links)
        return Verdict(path, True, w.status, identity=of_stat(st))


def _as_written(path: str, cwd: str) -> str:
    """The absolute path as written: ``.`` and empty components dropped, ``..`` kept (a
    lexical ``..`` would guess where the kernel goes; the walk knows)."""
    text = path if path.startswith("/") else cwd + "/" + path
    parts = [p for p in text.split("/") if p and p != "."]
    return "/" + "/".join(parts)
