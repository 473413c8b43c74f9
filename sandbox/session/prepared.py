"""What a session finds and makes before its box: the project's git layout (asking the
host's git, with the writable folders that are repositories of their own merged in),
the names it covers, and the manifest that lists them, so that whoever cleans up (the
session's end, the watchdog, the next session) finds them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import sandbox.session.leftovers as _leftovers
from sandbox.dispatch import box_name
from sandbox.git.config import find_git
from sandbox.git.dirs import GitLayout, find_layout
from sandbox.git.layouts import merged, unmade
from sandbox.policy import hostreads
from sandbox.session.moveout import MoveOut


def git_layout(project: str, named: tuple[str, ...], env: Mapping[str, str] | None,
                home: str, private_root: str) -> tuple[GitLayout, tuple[str, ...]]:
    """The project's git layout, asking the host's git, and the folders it may make
    things in (the writable roots, the project first). ``named`` is ``[sandbox]
    writable`` as :func:`~sandbox.policy.writable_roots` reads it."""
    real = os.path.realpath(project)
    writable = tuple(os.path.realpath(w) for w in named if os.path.exists(w))
    layout = find_layout(real, env=env, home=home, writable=writable,
                         forbidden=(private_root,))
    for w in writable:
        # A writable folder that is a repository of its own: its git inputs are held
        # as the project's are (one inside the project is the project's nested one).
        if w != real and not w.startswith(real + "/") and \
                os.path.lexists(os.path.join(w, ".git")):
            others = tuple(x for x in (real, *writable) if x != w)
            layout = merged(layout, find_layout(w, env=env, home=home, writable=others,
                                                forbidden=(private_root,)))
    roots = (real, *((layout.common_dir,) if layout.common_dir else ()), *writable)
    return layout, roots


def with_views(layout: GitLayout, roots: tuple[str, ...], env: Mapping[str, str],
                tmp: str) -> GitLayout:
    """``layout`` with its module configs' views (:mod:`sandbox.git.views`)."""
    from sandbox.git.views import module_views, views_folder

    return layout._replace(views=module_views(layout, roots, find_git(env, roots), env,
                                              views_folder(tmp, roots)))


def make_missing(layout: GitLayout, manifest: str, roots: tuple[str, ...], *, tmp: str,
                  named: Sequence[str], env: Mapping[str, str], moves: MoveOut | None,
                  landlock: bool = False) -> GitLayout:
    """Make what is missing before the box, listed in ``manifest``: what the host reads
    in a writable folder (made empty, bound read-only like the rest:
    sandbox/policy/hostreads.py), but for the Landlock box (``landlock``: no bind would
    cover it; its keeper puts back what a run changed). git's protected names are not
    made: a bind covers a name that exists, so the Linux boxes keep them instead
    (:func:`unmade`, moved out after a run that made them), and Seatbelt's rules deny
    names, there or not. Other tools' project configs are moved out too
    (sandbox/session/moveout.py). Returns ``layout`` with its module configs' views
    (none in the Landlock box). ``env``: the session's, scrubbed; its home is the
    session's."""
    from sandbox.policy import session_home

    home = session_home(env)
    linux = box_name() == "bwrap"
    binds = linux and not landlock
    reads = hostreads.covers(named, env, home) if binds else hostreads.Covers()
    if linux:
        layout = unmade(layout)
    bound = map(hostreads.as_bound, hostreads.candidates(env, home)) if binds else ()
    _leftovers.make(manifest, tmp, roots, dirs=reads.folders, kept=_kept(layout, roots, env, tmp),
                    files=tuple((f, b"") for f in reads.files),
                    protected=(*layout.protected, *bound),
                    moves=moves.record() if moves else None)
    return layout if landlock else with_views(layout, roots, env, tmp)


def _kept(layout: GitLayout, roots: tuple[str, ...], env: Mapping[str, str], tmp: str
          ) -> dict[str, object] | None:
    """The manifest's record of git's names the session keeps (not made)."""
    from sandbox.session.moveout import data_folder

    base = os.path.join(data_folder(env), f"{os.path.basename(tmp)}-after-the-harness")
    return _leftovers.kept_record(layout.kept, roots, base)
