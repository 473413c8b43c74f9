"""What other tools and the host read, looked at when a session opens and again at its
end: the project's tool configs (:mod:`sandbox.policy.toolconfigs`) and what the host reads in
a ``[sandbox] writable`` folder (:mod:`sandbox.policy.hostreads`).

The box cannot write one that exists. A project config it makes is moved out of the
project (:mod:`sandbox.session.moveout`). What it can still do is said at the end: make a
missing file the host reads that is not covered, or replace a name that was a link at
the open (a link is never bound: its target may be anywhere), a tool config's or one
on the way to it. Such a link is put back as it read, and what the box left in its
place is renamed aside, as for git's links (:func:`sandbox.fs.relink.restore_link`).

Root's stand-in in the box gives other owners' files (``chown 1234``, ``tar -xp``) ids
of a range no account on the host has (:mod:`sandbox.linux.standin`): what root bare
does, but to ids nobody owns. The end looks for such files in the folders the box
writes (no link followed, at most :data:`MOST` entries) and says how many, one of
them, and the command that gives them back to the folder's owner.
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
        link is put back first; files given to ids no account has."""
        from sandbox.dispatch import box_name, given_ids

        p = self.policy
        ids = given_ids() if p.box != "landlock" and box_name() == "bwrap" else None
        given = given_away(tuple(r for r in p.read_write_paths() if r != p.private_tmp),
                           ids) if ids is not None else []
        return self._made() + given

    def _made(self) -> list[str]:
        linked = {p for p, _ in self.links}
        out = [f"the box made {escape(p)}, which the host reads to decide what to run "
                "(git, a shell, or this toolkit); check it before you use them"
                for p in self.reads
                if p not in self.before and p not in linked and os.path.lexists(p)]
        return out + [line for p, text in self.links if (line := _relinked(p, text))]


# The entries looked at for files given to ids no account has, at most.
MOST = 200_000


def given_away(roots: tuple[str, ...], ids: range) -> list[str]:
    """What to say of the files in ``roots`` owned by an id (or a group) of ``ids``."""
    out = []
    for root in dict.fromkeys(roots):
        found, first, seen = 0, "", 0
        stack = [root]
        while stack and seen < MOST:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for e in entries:
                seen += 1
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_uid in ids or st.st_gid in ids:
                    found += 1
                    first = first or e.path
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
        if found:
            out.append(_given_line(root, found, first, ids, seen >= MOST))
    return out


def _given_line(root: str, found: int, first: str, ids: range, more: bool) -> str:
    import shlex

    st = os.stat(root)
    low = ids.start - 1
    at_least = "at least " if more else ""
    fix = (f"find {shlex.quote(root)} '(' -uid +{low} -o -gid +{low} ')' -exec chown -h "
           f"{st.st_uid}:{st.st_gid} '{{}}' +")
    return (f"{at_least}{found} files in {escape(root)} were given other owners in the box "
            f"(chown, tar -xp as root), which root's stand-in maps to ids no account on "
            f"this host has ({ids.start} on: the box's id plus {low}), such as "
            f"{escape(first)}; to give them to the folder's owner: {escape(fix)}")


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
