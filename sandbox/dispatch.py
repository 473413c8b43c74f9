"""The one dispatch: which platform's box a session gets, the kind in force, and root's
stand-in; the only module (with the doctor's probe and the hardening's filter) that
imports a platform's folder (:mod:`sandbox.linux`, :mod:`sandbox.macos`), and only when
a session asks, so that neither platform's code loads on the other.

- :func:`choose` makes a session's box: :class:`~sandbox.linux.linuxbox.LinuxBox`
  (bwrap's), :class:`~sandbox.linux.landlockbox.LandlockBox` (``[sandbox] box =
  "landlock"``) or :class:`~sandbox.macos.macbox.MacBox`; :func:`host_backend` the host
  runner of ``sandbox = false`` hooks (:mod:`sandbox.box.host`);
- :func:`here` says the kind a policy gets on this machine, :func:`weaker_line` the
  banner's line when it is weaker (:mod:`sandbox.box.kind`).

Nothing else names a backend to decide something: the supervisor reads what the plan
says (watched or not, drain times), the session asks :func:`choose`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sandbox.box.kind import LANDLOCK, SEATBELT, BoxKind
from sandbox.plan import BackendName
from sandbox.platform import PLATFORM

if TYPE_CHECKING:
    from sandbox.box.base import Backend, Box
    from sandbox.policy import Policy


def box_name(platform: str = PLATFORM) -> BackendName:
    """The backend that builds the box on ``platform``."""
    return "seatbelt" if platform == "darwin" else "bwrap"


def choose(policy: Policy, *, bwrap: str | None = None,
           features: Collection[str] | None = None) -> Box:
    """The box of a session whose commands are boxed (``policy.boxed``): the platform's
    own. The one place the platform is chosen; its modules are imported only here."""
    if not policy.boxed:
        raise ValueError("a session with no box has no box to choose")
    if box_name(policy.platform) == "seatbelt":
        from sandbox.macos.macbox import MacBox

        return MacBox(policy)
    if policy.box == "landlock":
        from sandbox.linux.landlockbox import LandlockBox

        return LandlockBox(policy)
    from sandbox.linux.linuxbox import LinuxBox

    return LinuxBox(policy, bwrap=bwrap, features=features)


def stands_in() -> bool:
    """Whether this process's boxes run as a stand-in for root (the Linux box started by
    the host's root: :mod:`sandbox.linux.standin`); never on macOS."""
    if PLATFORM != "linux":
        return False
    from sandbox.linux.standin import needed

    return needed()


def given_ids() -> range | None:
    """The host ids that root's stand-in gives other owners' files (the box's 1 on: ids
    no account has, :mod:`sandbox.linux.standin`), or None where no box stands in."""
    if not stands_in():
        return None
    from sandbox.linux.standin import COUNT, UID

    return range(UID + 1, UID + COUNT)


def host_backend(policy: Policy) -> Backend:
    """The backend for host commands (``sandbox = false`` hooks, ``run --host``)."""
    from sandbox.box.host import HostBackend

    return HostBackend(policy)


def here(policy: Policy) -> BoxKind | None:
    """The box a session of ``policy`` gets on this machine (None: its commands run on
    the host). macOS has one box, Seatbelt."""
    if not policy.boxed:
        return None
    if policy.platform != "linux":
        return BoxKind(SEATBELT)
    from sandbox.linux.kind import LANDLOCK_GIVES_UP, choose

    if policy.box == "landlock":
        return BoxKind(LANDLOCK, LANDLOCK_GIVES_UP)
    return choose()


def weaker_line(box: str = "auto") -> str | None:
    """The banner's line for a Linux box that gives something up here (``box``: the
    ``[sandbox] box`` asked for), else None."""
    from sandbox.platform import PLATFORM

    if PLATFORM != "linux":
        return None
    from sandbox.linux.kind import LANDLOCK_GIVES_UP, choose

    kind = BoxKind(LANDLOCK, LANDLOCK_GIVES_UP) if box == "landlock" else choose()
    return kind.said() if kind.gives_up else None
