"""The toolkit's own files lie where the box cannot change them.

The user config decides which hooks run on the host and how wide the box is; a record
file is appended to by the host and read back by a replay or a resume. One that lies in
a folder the box can write -- the project, a linked worktree's common directory, the
private temp folder, a ``[sandbox] writable`` folder -- is the agent's to rewrite (a
``sandbox = false`` hook appended to the config runs on the host at the next session;
a record file swapped for a link makes the host append to whatever it leads to). So
each is checked against the session's policy, whichever way it was named (``--config``,
``serve``'s ``open``, ``HARNESS_HOME``, ``XDG_CONFIG_HOME``, the home folder), and
refused there. The one exception: a path the box itself binds read-only with every
folder above it held (:mod:`sandbox.policy.hostreads` does so for the toolkit's config and data
folders inside a writable home), reached through no link the box could re-point. A
session with no box at all protects nothing, so only the project's rule holds there.

The trust store is checked the same way by :func:`launchers.openharness.trust.
refuse_store_in_box`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from launchers.errors import ConfigError
from sandbox.fs.beneath import link_on_the_way
from sandbox.text import escape

if TYPE_CHECKING:
    from launchers.config import Config, Source
    from sandbox.policy import Policy

_FOUND: dict[str, str] = {
    "HARNESS_HOME": "HARNESS_HOME names its folder",
    "XDG_CONFIG_HOME": "it was found through XDG_CONFIG_HOME",
    "HOME": "it was found under your home folder",
    "--config": "--config names it",
}


def writable_place(path: str, policy: Policy) -> str | None:
    """How a folder the box can write reaches ``path`` (it lies there as written, on the
    way or where it leads; or has another name there), as the predicate of a sentence
    about it; None when none does, or when the box binds it read-only. A
    session with no box writes wherever the user can: only the project's rule
    (:func:`launchers.config.load`) applies there."""
    if not policy.boxed:
        return None
    from sandbox.policy import private_tmp_root

    # Every session's private temp folder, not only this one's: another session's box
    # writes its own.
    shared = os.path.realpath(private_tmp_root())
    real = os.path.realpath(path)
    if real == shared or real.startswith(shared + "/"):
        return f"lies in the private temp folder ({escape(shared)})"
    verdict = policy.guard(boxed=False).check(path, "/", check_hidden=False)
    if verdict.ok:
        return None
    zone = verdict.zone
    if zone is None:
        # Fail closed: a path that cannot be traced cannot be shown outside the box.
        return f"lies in a place that cannot be checked ({verdict.reason})"
    if _bound_read_only(path, policy):
        return None
    where = zone.label if zone.kind == "project" else f"{zone.label} ({escape(zone.path)})"
    # Said as pathguard says them for a hook: the file is not in that folder, but the box
    # can reach it there by another name.
    if verdict.problem == "hard-link":
        return (f"has {verdict.links} hard links on the file system of {where} (another "
                "of its names may be there; copy it to a file of its own)")
    if verdict.problem == "alias":
        return f"lies in {where} too, through the mount at {escape(verdict.mount)}"
    return f"lies in {where}"


def _bound_read_only(path: str, policy: Policy) -> bool:
    """``path`` is, or lies in, a path the box binds read-only, and neither it nor any
    folder on the way is a link in a folder the box can write."""
    if os.path.islink(path):
        return False
    roots = (*(os.path.realpath(r) for r in policy.read_write_paths()), policy.private_tmp)
    if link_on_the_way(os.path.abspath(path), roots) is not None:
        return False
    real = os.path.realpath(path)
    return any(real == p or real.startswith(p.rstrip("/") + "/")
               for p in policy.protected_paths())


def check_config(config: Config, policy: Policy, source: Source | None = None) -> None:
    """Refuse a user config the box could change. Raises :class:`ConfigError`."""
    if config.path is None:
        return
    where = writable_place(config.path, policy)
    if where is None:
        return
    how = _FOUND.get(source or "")
    raise ConfigError(
        config.path,
        f"this config {where}, which the box can write{f' ({how})' if how else ''}"
        ", so the agent could change it; its hooks and sandbox settings are refused. "
        "Keep the user config outside every folder the box can write (or leave its "
        "folder out of [sandbox] writable)")


def check_records(path: str, policy: Policy, what: str = "records") -> None:
    """Refuse a record file (written, replayed or resumed from) the box could change.
    Raises :class:`ConfigError` naming it."""
    where = writable_place(path, policy)
    if where is not None:
        raise ConfigError(
            os.path.abspath(path),
            f"the {what} file {where}, which the box can write, so the agent "
            "could change it (or make it a link the host then writes through); keep "
            "record files outside every folder the box can write")
