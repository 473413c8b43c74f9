"""The box in force, and what it gives up where it is weaker than the full box: said by
the banner, ``doctor``, ``audit --json``, ``serve``'s ``open`` and ``Session.box_kind``,
never silent. The kinds themselves are the platforms' (:mod:`sandbox.linux.kind`); this
is the data every layer names them by, and the one place a session's kind is asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pathguard.records import NamedTuple

if TYPE_CHECKING:
    pass

# The kinds' names.
NAMESPACES = "namespaces"
LANDLOCK = "landlock, no namespaces"
BOUND_PROC = "namespaces, the container's /proc"
SEATBELT = "seatbelt"


class BoxKind(NamedTuple):
    """The box in force: its name, what it does not do that the full box does, and the
    covered parts of ``/proc`` that chose it."""

    name: str = NAMESPACES
    gives_up: tuple[str, ...] = ()
    covered: tuple[str, ...] = ()

    @property
    def bound_proc(self) -> bool:
        return self.name == BOUND_PROC

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "gives_up": list(self.gives_up)}

    def said(self) -> str:
        """One line for people: the box, and what it gives up here."""
        if not self.gives_up:
            return f"box: {self.name}"
        return f"box: {self.name} (weaker here: {'; '.join(self.gives_up)})"
