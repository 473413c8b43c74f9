"""The writable folders under other names: mounts that show them, hard links into them.

:class:`Aliases` answers, for the locations a walk passed and the file it reached:

- is a location shown by a mount whose source lies in a writable folder (a bind mount
  of the project at ``/opt/alias``)? The device and file-system path of each location
  (:mod:`pathguard.mounts`) are compared with each writable folder's;
- is the file a regular file with other hard links that may lie in a writable folder
  (:func:`pathguard.identity.other_names_possible`)?

Built once per guard; the mount table is read at the first question, and every answer
is remembered, as the guard's walks are.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from . import mounts as m
from .identity import other_names_possible
from .records import NamedTuple
from .walk import Lookup, Walk, walk
from .zones import Zone


class AliasHit(NamedTuple):
    """``location`` is ``same_as`` (in ``zone``) through the mount at ``mount``."""

    location: str
    zone: Zone
    same_as: str
    mount: str


class LinkHit(NamedTuple):
    """``location`` has ``links`` names and lies on the device of ``zone``."""

    location: str
    zone: Zone
    links: int


class _ZonePlace(NamedTuple):
    place: m.Place
    canonical: str
    zone: Zone


class Aliases:
    """Alias questions against the writable folders ``zones``."""

    def __init__(self, zones: Sequence[Zone], lookup: Lookup, *,
                 linux: bool = sys.platform.startswith("linux")) -> None:
        self.zones = tuple(zones)
        self.linux = linux
        self._lookup = lookup
        self._canonical: tuple[tuple[str, Zone], ...] | None = None
        self._mounts: m.Mounts | None = None
        self._places: tuple[_ZonePlace, ...] | None = None
        self._devices: dict[int, Zone] | None = None
        self._hits: dict[tuple[str, bool], AliasHit | None] = {}

    def _zone_paths(self) -> tuple[tuple[str, Zone], ...]:
        if self._canonical is None:
            out: list[tuple[str, Zone]] = []
            for zone in self.zones:
                w = walk(zone.path, "/", lookup=self._lookup)
                if w.status in ("ok", "missing", "notdir"):
                    out.append((w.leads_to(), zone))
            self._canonical = tuple(out)
        return self._canonical

    def _zone_places(self) -> tuple[_ZonePlace, ...]:
        """Raises :class:`pathguard.mounts.MountsUnreadable`."""
        if self._places is None:
            self._mounts = m.load()
            out: list[_ZonePlace] = []
            for path, zone in self._zone_paths():
                place = self._mounts.place(path)
                if place is not None:
                    out.append(_ZonePlace(place, path, zone))
            self._places = tuple(out)
        return self._places

    def _hit(self, location: str, strict: bool, depth: int = 0) -> AliasHit | None:
        key = (location, strict)
        if key in self._hits:
            return self._hits[key]
        zones = self._zone_places()
        assert self._mounts is not None
        found: AliasHit | None = None
        place = self._mounts.place(location)
        if place is not None:
            for z in zones:
                rest = m.same_or_inside(place, z.place, strict=strict)
                if rest is not None:
                    same = z.canonical if not rest else z.canonical.rstrip("/") + "/" + rest
                    found = AliasHit(location, z.zone, same, place.mount.point)
                    break
            if found is None and place.mount.layers and depth < 8:
                found = self._layer_hit(location, place, strict, depth)
        self._hits[key] = found
        return found

    def _layer_hit(self, location: str, place: m.Place, strict: bool,
                   depth: int) -> AliasHit | None:
        """An overlay shows its layers' files as its own: ``location`` is an alias when
        the same name in a layer is one."""
        for layer in place.mount.layers:
            base = os.path.realpath(layer)
            inner = base if place.fs_path == "/" else base.rstrip("/") + place.fs_path
            hit = self._hit(inner, strict, depth + 1)
            if hit is not None:
                return AliasHit(location, hit.zone, hit.same_as, place.mount.point)
        return None

    def alias(self, w: Walk) -> AliasHit | None:
        """The first location of ``w`` that is a writable folder's content under
        another name: a folder or link on the way strictly inside one, a missing
        location or the final one equal to or inside one. Raises
        :class:`pathguard.mounts.MountsUnreadable`."""
        if not self.linux or not self.zones:
            return None
        if w.status == "ok":
            # The file itself first: the message then names it, not a folder above it.
            hit = self._hit(w.final, strict=False)
            if hit is not None:
                return hit
        for visit in w.visits:
            hit = self._hit(visit.location, strict=visit.kind != "missing")
            if hit is not None:
                return hit
        return None

    def hard_link(self, location: str, st: os.stat_result) -> LinkHit | None:
        """Whether file ``location`` may have another name in a writable folder."""
        if self._devices is None:
            devices: dict[int, Zone] = {}
            for path, zone in self._zone_paths():
                try:
                    devices.setdefault(os.stat(path).st_dev, zone)
                except OSError:
                    continue
            self._devices = devices
        if other_names_possible(location, st, frozenset(self._devices), os.geteuid()):
            return LinkHit(location, self._devices[st.st_dev], st.st_nlink)
        return None
