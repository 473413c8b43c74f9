"""Other tools' project configs the box made, moved out of the project.

A row of :mod:`sandbox.policy.toolconfigs` missing at the session's open has no cover (a bind
needs a name that exists, and a name made for it would be a folder nobody made in the
user's project), so the box can make it. After each boxed run, once no other run is
going (the box's processes of that run have all ended), and again at the session's end
once the box is closed, each such row that exists is moved out of the project into the
user's data folder (``$XDG_DATA_HOME/harness/moved``, else
``~/.local/share/harness/moved``), in a folder of the session's own named by its start
time and its private folder's name. The session's warnings say, per row, which tool
would have run it, where it is now, and the one command that puts it back.

How a row is moved (no link followed; on another file system a copy, links as links)
is :mod:`sandbox.process.moving`'s; the session's manifest names the rows, so that the
watchdog, or the next session, moves what the box made when the harness died
(:func:`sandbox.process.made.clean_session`), with no one left to say it.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Mapping

from sandbox.policy.toolconfigs import guarded, on_the_way
from sandbox.process.moving import BEHIND, move_rows
from sandbox.text import escape


def data_folder(env: Mapping[str, str]) -> str:
    """Where what the box made is kept: ``$XDG_DATA_HOME/harness/moved``, else
    ``~/.local/share/harness/moved`` (a relative XDG_DATA_HOME is ignored, as for the
    trust store)."""
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        home = env.get("HOME") or os.path.expanduser("~")
        data_home = os.path.join(home, ".local", "share")
    return os.path.join(data_home, "harness", "moved")


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


class MoveOut:
    """The rows missing at the open, and moving out what is there after a run."""

    def __init__(self, project: str, allowed: tuple[str, ...], env: Mapping[str, str],
                 session: str) -> None:
        self.project = project
        self.rows = {t.name: t for t in guarded(allowed)
                     if not os.path.lexists(os.path.join(project, t.name))}
        # A link on the way to a missing row that was there at the open is the user's:
        # never followed, never moved.
        self.links = {q: text for name in self.rows for q in on_the_way(name)
                      if (text := _readlink(os.path.join(project, q))) is not None}
        self.base = os.path.join(data_folder(env),
                                 time.strftime("%Y%m%d-%H%M%S-") + session)
        self._lock = threading.Lock()
        self._live = 0
        self._unmoved: set[str] = set()
        # Rows a run made that could not be moved out: never taken as the host's.
        self._stuck: set[str] = set()

    def record(self) -> dict[str, object]:
        """What the session's manifest keeps, for a harness that dies
        (:func:`sandbox.process.made.clean_session`)."""
        return {"project": self.project, "rows": list(self.rows), "links": self.links,
                "base": self.base}

    def adopt(self) -> tuple[str, ...]:
        """The rows there now as a file or a folder reached without a link, made on the
        host while no run of any of the user's sessions was going (the user's editor made
        ``.idea``): no longer moved out, to be held as what was there at the open."""
        from sandbox.policy.toolconfigs import present

        with self._lock:
            if not self.rows:
                return ()
            # One listing of the top, not a look-up per row: this runs before a run.
            try:
                top = set(os.listdir(self.project))
            except OSError:
                return ()
            if not any(name.split("/", 1)[0] in top for name in self.rows):
                return ()
            here = set(present(self.project, ()))
            took = tuple(p for name in self.rows if name not in self._stuck
                         and (p := os.path.join(self.project, name)) in here)
            for p in took:
                del self.rows[os.path.relpath(p, self.project)]
            return took

    def run_starts(self) -> None:
        """A boxed run begins (it waits while a move is under way)."""
        with self._lock:
            self._live += 1

    def run_ended(self) -> list[str]:
        """A boxed run ended: when it was the last one going, what the box made is moved
        out; what to say."""
        with self._lock:
            self._live -= 1
            return self._sweep() if self._live == 0 else []

    def end(self) -> list[str]:
        """The session's end, its box closed: the last move; what to say."""
        with self._lock:
            return self._sweep()

    def _sweep(self) -> list[str]:
        if not self.rows:
            return []
        out = []
        for m in move_rows(self.project, self.rows, self.links, self.base):
            (self._stuck.add if m[4] else self._stuck.discard)(m[0])
            line = self._said(*m)
            if m[4]:  # not moved: said once, not after every run
                if line in self._unmoved:
                    continue
                self._unmoved.add(line)
            out.append(line)
        return out

    def _said(self, name: str, sub: str, dest: str, text: str | None, why: str) -> str:
        row = self.rows[name]
        src = os.path.join(self.project, sub)
        made = (f"the box made {escape(os.path.join(self.project, name))}, read by "
                f"{row.tool} ({row.why})")
        if why == BEHIND:
            return (f"{made}, through {escape(src)}, a link that was there at the start: "
                    "it is not moved (a link is not followed); check it before that tool "
                    "opens the project")
        if why:
            return (f"{made}, and it could not be moved out of the project "
                    f"({escape(why)}); check it before that tool opens the project")
        what = f" (a link to {escape(text)})" if text is not None else ""
        via = f" on the way to {escape(name)}" if sub != name else ""
        return (f"the box made {escape(src)}{what}{via}, read by {row.tool} ({row.why}); "
                f"it was moved out of the project to {escape(dest)}; to put it back once "
                f"you have checked it: {escape(put_back(dest, src))}")


def put_back(dest: str, src: str) -> str:
    """The one command that puts what was moved to ``dest`` back at ``src``: never over
    what is there now, never into a folder that is there now."""
    return f"mv -nT -- {shlex.quote(dest)} {shlex.quote(src)}"
