"""What other tools and the host read, looked at when a session opens and again at its
end: the project's tool configs (:mod:`sandbox.policy.toolconfigs`) and what the host reads in
a ``[sandbox] writable`` folder (:mod:`sandbox.policy.hostreads`).

The box cannot write one that exists. A project config it makes is moved out of the
project (:mod:`sandbox.session.moveout`). What it can still do is said at the end: make a
missing file the host reads that is not covered, or replace a name that was a link at
the open (a link is never bound: its target may be anywhere), a tool config's or one
on the way to it. Such a link is put back as it read, and what the box left in its
place is renamed aside, as for git's links (:func:`sandbox.fs.relink.restore_link`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sandbox.fs.relink import restore_link
from sandbox.policy import hostreads
from sandbox.policy.toolconfigs import guarded, on_the_way
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.policy import Policy


def _links(paths: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each of ``paths`` that is a link, with what it reads."""
    out = []
    for p in paths:
        try:
            out.append((p, os.readlink(p)))
        except OSError:
            continue  # not a link, or not there
    return tuple(out)


class Watched:
    """The names to look at again at the session's end, and what they were."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.reads = hostreads.inside(policy.writable, policy.env, policy.home)
        self.before = hostreads.present(self.reads)
        rows = tuple(dict.fromkeys(os.path.join(policy.project, q)
                                   for t in guarded(policy.allow_tool_configs)
                                   for q in (*on_the_way(t.name), t.name)))
        self.links = _links((*rows, *self.reads))

    def report(self) -> list[str]:
        """What the box made or replaced, each said once (names escaped); a replaced
        link is put back first."""
        linked = {p for p, _ in self.links}
        out = [f"the box made {escape(p)}, which the host reads to decide what to run "
                "(git, a shell, or this toolkit); check it before you use them"
                for p in self.reads
                if p not in self.before and p not in linked and os.path.lexists(p)]
        return out + [line for p, text in self.links if (line := _relinked(p, text))]


def _relinked(path: str, text: str) -> str:
    """The link ``path`` put back if the box changed it, and what to say ("" when it
    reads as it did)."""
    try:
        if os.readlink(path) == text:
            return ""
    except OSError:
        pass
    aside = restore_link(path, text)
    said = (f"{escape(path)} was a link to {escape(text)} at the start and was changed "
            "during the session")
    if aside is None:
        return said + "; check it before a tool reads it"
    put = f"; what the box put there is now {escape(aside)}" if aside else ""
    return said + f": the link is back{put}"
