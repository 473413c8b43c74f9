"""The ``[sandbox]`` table as data. A leaf: imports nothing of ours but the records' base
(:mod:`pathguard.records`).

Every entry point (``run``, ``hook``, ``hook --openharness``, ``audit`` on both fronts,
an embedding harness's :class:`~sandbox.session.Session`) builds its policy from one of
these through :meth:`sandbox.policy.Policy.from_settings`, the one mapping.
"""

from __future__ import annotations

from pathguard.records import NamedTuple


class SandboxSettings(NamedTuple):
    """The ``[sandbox]`` table: paths as written (``~`` expanded by the policy)."""

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    hide_defaults: bool = True
    protect: bool = True
    # false, true, or an allow-list of hosts reached through the session's proxy
    # (sandbox/network/allow.py), checked at load.
    network: bool | tuple[str, ...] = False
    enabled: bool = True
    # More environment names (or * patterns) kept from hooks and boxed commands, beside
    # the provider keys that always go.
    scrub: tuple[str, ...] = ()
    # The box's bounds (sandbox/policy/limits.py): processes, and sizes as written (bytes,
    # 512M / 8G, or a percentage of the machine's memory).
    processes: int = 4096
    memory: int | str = "50%"
    tmp_size: int | str = "25%"
    shm_size: int | str = "25%"
    # Unix sockets (or folders of them) the box may connect to; none by default.
    allow_unix_sockets: tuple[str, ...] = ()
    # Rows of sandbox/policy/toolconfigs.py released from the box's read-only set, by name.
    allow_tool_configs: tuple[str, ...] = ()
    # Which Linux box: "auto" (the namespace box, or where a fresh /proc is refused the
    # container's /proc in a Landlock domain), or "landlock" (no namespaces at all: for
    # places that refuse them; weaker, see sandbox/linux/kind.py).
    box: str = "auto"
