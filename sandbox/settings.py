"""The ``[sandbox]`` table as data. A leaf: imports nothing of ours.

Every entry point (``run``, ``hook``, ``hook --openharness``, ``audit`` on both fronts,
an embedding harness's :class:`~sandbox.session.Session`) builds its policy from one of
these through :meth:`sandbox.policy.Policy.from_settings`, the one mapping.
"""

from __future__ import annotations

from typing import NamedTuple


class SandboxSettings(NamedTuple):
    """The ``[sandbox]`` table: paths as written (``~`` expanded by the policy)."""

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    hide_defaults: bool = True
    protect: bool = True
    network: bool = False
    enabled: bool = True
    # More environment names (or * patterns) kept from hooks and boxed commands, beside
    # the provider keys that always go.
    scrub: tuple[str, ...] = ()
    # Unix sockets (or folders of them) the box may connect to; none by default.
    allow_unix_sockets: tuple[str, ...] = ()
