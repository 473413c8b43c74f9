"""Package caches warm from the host's: the host's cache read-only below, the box's
writes above it, never written back.

The project's cache folder (:mod:`sandbox.policy.caches`) starts empty, so the box's
first ``npm ci`` fetches everything the host fetched long ago. Where the session's
stage is made (:mod:`sandbox.linux.stage`), each tool's folder there is instead an
*overlay* in the stage's namespace: the host's cache (``~/.npm``) is its lower layer,
read only; the box's writes go to an upper folder of the project's own, beside the
project's cache folder (``NAME-HASH.layered/SLOT/upper/TOOL``), where the host's
tools never look. A file the box changes is copied up first: the host's stays as it
was. What the box removes is hidden above (a whiteout), not removed below.

The stage alone sees the overlay: the host sees the project's plain folder, and so
does a box made without a stage (the Landlock box; a plain user's box when the kernel
refuses it a namespace), whose cache starts from the project's own; ``doctor`` says
which is in force and why. Two sessions of one project at once take two *slots*
(an upper folder is the kernel's to one overlay at a time); each slot stays warm for
the next session that takes it.

A host cache is laid under the box's only where the box reads it as it is anyway: a
real folder, not one the box writes (it would change under the overlay), and neither
inside nor holding a hidden path (the overlay would show it where the box's covers do
not reach). Every path the stage mounts with is opened without following a link and
checked against what was seen here (:func:`sandbox.linux.stagebinds.mount_layers`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pathguard.records import NamedTuple
from sandbox.fs.beneath import create_beneath
from sandbox.policy.caches import BOX_OWN, LAYERED, TABLE, Row, folder_for, made
from sandbox.text import escape

if TYPE_CHECKING:
    from sandbox.policy import Policy

# Sessions of one project at once with a warm cache each; more start from the
# project's own folder (said by the stage).
SLOTS = 4


class Layer(NamedTuple):
    """One overlay of the stage: on ``target`` (the tool's folder in the project's cache
    folder ``top``), the host's cache ``lower`` (its real path, ``lower_id`` its device
    and inode) below ``upper``, with the kernel's ``work`` folder beside it. ``upper``
    and ``work`` are relative to ``slot``, the folder of the project's slots, once
    :func:`take` has given the layer one (``N/upper/TOOL``)."""

    tool: str
    top: str
    target: str
    lower: str
    lower_id: tuple[int, int]
    slot: str
    upper: str
    work: str


def host_cache(row: Row, env: Mapping[str, str], home: str) -> str:
    """Where the host keeps ``row``'s cache: its variable in the session's environment
    when that is absolute, else the usual place under ``home``."""
    set_to = env.get(row.variable, "") if row.variable else ""
    if os.path.isabs(set_to):
        return set_to
    return os.path.join(home, row.host[2:]) if row.host.startswith("~/") else row.host


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def why_not(lower: str, policy: Policy) -> str:
    """Why the host cache at ``lower`` (a real path) cannot be laid under the box's, or
    ``""`` when it can."""
    said = escape(lower)
    if not os.path.lexists(lower):
        return f"{said} is not there"
    if not os.path.isdir(lower) or os.path.islink(lower):
        return f"{said} is not a folder"
    if lower.split("/")[1] in BOX_OWN | {"tmp"}:
        return f"{said} is in one of the box's own folders (the host's is not seen there)"
    writes = (*policy.read_write_paths(), policy.private_tmp)
    if any(_under(lower, w) or _under(w, lower) for w in writes):
        return f"{said} is in a folder the box writes (or holds one)"
    # By name and by where it leads: the box hides both.
    hid = next((h for h in policy.hidden for at in {h, os.path.realpath(h)}
                if _under(at, lower) or _under(lower, at)), None)
    if hid is not None:
        return f"the hidden path {escape(hid)} is in it (or holds it)"
    with contextlib.suppress(OSError), os.scandir(lower) as it:
        if next(it, None) is None:
            return f"{said} is empty"
    return ""


def plan(policy: Policy, *, ahead: bool = False) -> tuple[list[Layer], list[tuple[str, str]]]:
    """The layers a stage of ``policy``'s session would make (no slot yet: see
    :func:`take`), and (tool, why not) for each tool that gets none. None at all
    where the project's cache folder is not made (``ahead``: where it could not be,
    for ``doctor`` before any session), or the box is not Linux's."""
    if not policy.platform.startswith("linux"):
        return [], [("every tool", "only the Linux box lays the host's caches under")]
    top = made(policy.project, policy.env, policy.home)
    if top is None and ahead:
        top = folder_for(policy.project, policy.env, policy.home)
        top = None if top.split("/")[1] in BOX_OWN else top
    if top is None:
        return [], [("every tool", "the project's cache folder is not made")]
    home = os.path.realpath(policy.home)
    out: list[Layer] = []
    nots: list[tuple[str, str]] = []
    for row in TABLE:
        target = os.path.join(top, row.folder)
        lower = os.path.realpath(host_cache(row, policy.env, home))
        why = why_not(lower, policy)
        try:
            st = os.stat(lower)
        except OSError as err:  # gone since
            why = why or f"{escape(lower)}: {err.strerror}"
        if why:
            nots.append((row.tool, why))
            continue
        out.append(Layer(row.tool, top, target, lower, (st.st_dev, st.st_ino), "",
                         os.path.join("upper", row.folder), os.path.join("work", row.folder)))
    return out, nots


def layered_home(top: str) -> str:
    """The folder of ``top``'s (the project's cache folder) slots."""
    return top + LAYERED


# Said when layers were wanted and no slot could be taken.
NO_SLOT = ("the package caches start from the project's own, not warm from the host's: "
           "every slot of the project's warm caches is taken by a session going, or one "
           "could not be made")


def take(layers: list[Layer], said: list[str]) -> tuple[list[Layer], int]:
    """``layers`` given the first free slot, its upper and work folders made (mode
    0700), and the descriptor of the slot's lock, held by the stage until it closes;
    ``([], -1)`` when there are none, or every slot is taken or one cannot be made (the
    stage's box then starts from the project's folder, and :data:`NO_SLOT` is added
    to ``said``)."""
    if not layers:
        return [], -1
    taken, fd = _take(layers)
    if fd < 0:
        said.append(NO_SLOT)
    return taken, fd


def refused(why: str) -> str:
    """A layer the kernel refused (``tool: why``, from the stage), as the session says it."""
    tool, _, cause = why.partition(": ")
    return (f"the host's cache of {tool} is not laid under the box's: {cause}; the box's "
            "starts from the project's own")


def _take(layers: list[Layer]) -> tuple[list[Layer], int]:
    home = layered_home(layers[0].top)
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        if os.path.realpath(home) != home or os.lstat(home).st_uid != os.getuid():
            return [], -1
    except OSError:
        return [], -1
    for n in range(SLOTS):
        try:
            fd = os.open(os.path.join(home, f"{n}.lock"), os.O_RDWR | os.O_CREAT
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken = [layer._replace(slot=home, upper=f"{n}/{layer.upper}",
                                    work=f"{n}/{layer.work}") for layer in layers]
            for rel in dict.fromkeys(p for t in taken for w in (t.upper, t.work)
                                     for p in _and_above(w)):
                create_beneath(home, rel, folder=True)  # never through a link
        except OSError:
            os.close(fd)
            continue
        return taken, fd
    return [], -1


def _and_above(rel: str) -> list[str]:
    """``a``, ``a/b``, ``a/b/c`` for ``a/b/c``: the folders to make, shallowest first."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def lines(policy: Policy) -> list[str]:
    """Which host caches a Linux box of ``policy``'s session starts warm from
    (``doctor``), one line a tool."""
    layers, nots = plan(policy, ahead=True)
    out = [f"cache {layer.tool}: warm from {escape(layer.lower)} (read only below the box's "
           "writes), where the box is staged" for layer in layers]
    out += [f"cache {tool}: starts from the project's own: {why}" for tool, why in nots]
    return out
