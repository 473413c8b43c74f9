"""The proxy of one session: started at its open when the policy has an allow-list,
its refusals said once per host at the end, everything it made removed."""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.network.proxy import Proxy, Refusal
    from sandbox.policy import Policy


class Network:
    """The session's allow-list in force: :meth:`open` returns None for a policy
    without one (``network`` false or true)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    @classmethod
    def open(cls, policy: Policy, *, loopback: bool) -> Network | None:
        """The session's proxy, started: on 127.0.0.1 at a port of its own for a box on
        the host's network (``loopback``: macOS, whose profile opens that one port,
        sandbox/macos/seatbelt.py), else on a Unix socket in the session's folder,
        which the box's forwarder reaches (sandbox/linux/warm/seat.py). The box says which
        (:meth:`~sandbox.box.Box.proxy`). Raises :class:`SandboxUnavailable`."""
        if policy.network_allow is None or not policy.boxed:
            return None
        from sandbox.errors import SandboxUnavailable
        from sandbox.network import allow
        from sandbox.network.box import host_socket
        from sandbox.network.proxy import Proxy

        entries = allow.parse_all(policy.network_allow)
        if loopback:
            try:
                return cls(Proxy.start(entries, port=0))
            except OSError as err:
                raise SandboxUnavailable(f"the session's network proxy could not start: "
                                         f"{err}", "check that 127.0.0.1 can be listened "
                                         "on") from err
        path = host_socket(policy)
        # What a killed session with this name left (the name holds a fresh folder).
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        try:
            return cls(Proxy.start(entries, path=path))
        except OSError as err:
            raise SandboxUnavailable(f"the session's network proxy could not start: {err}",
                                     "check that the temp folder is writable") from err

    @property
    def port(self) -> int:
        """The proxy's port on 127.0.0.1 (a box that shares the host's network), or 0."""
        return max(self.proxy.port, 0)

    def refusals(self) -> list[Refusal]:
        return self.proxy.refusals()

    def report(self) -> list[str]:
        """One line per host the box was refused."""
        from sandbox.network.proxy import NO_PASSWORD
        from sandbox.text import escape

        by_host: dict[str, list[Refusal]] = {}
        out, alone = [], []
        for r in self.refusals():
            if r.host:
                by_host.setdefault(r.host, []).append(r)
                continue
            asked = f"{r.times} request{'s' if r.times > 1 else ''}"
            if r.why == NO_PASSWORD:  # once for every host
                alone.append(f"network: the proxy refused {asked} without its password (from "
                             "a client that ignores it, or from another local user); "
                             f"{r.fix}")
            else:  # a head it would not read (its host unsaid: the line may be the fault)
                alone.append(f"network: the proxy refused {asked} whose head it does not "
                             f"take (the last: {r.why}); {r.fix}")
        for host, rs in by_host.items():
            n = sum(r.times for r in rs)
            ports = ", ".join(str(r.port) for r in rs)
            out.append(f"network: the box was refused {escape(host)} (port {ports}, "
                       f"{n} time{'s' if n > 1 else ''}): {rs[0].why}; {escape(rs[0].fix)}")
        return out + alone

    def close(self) -> None:
        self.proxy.close()
        if self.proxy.path:
            with contextlib.suppress(OSError):
                shutil.rmtree(os.path.dirname(self.proxy.path))


def mode(network: bool | tuple[str, ...], *, boxed: bool = True) -> dict[str, object]:
    """The network mode in force for ``[sandbox] network``, for doctor and audit --json:
    ``none`` (the box has only its loopback), ``allow-list`` (through the session's
    proxy, with the list), ``open`` (the host's network), or ``host`` (no box)."""
    if not boxed:
        return {"mode": "host", "allow": None}
    if isinstance(network, tuple):
        return {"mode": "allow-list", "allow": list(network)}
    return {"mode": "open" if network else "none", "allow": None}


def mode_line(network: bool | tuple[str, ...], *, boxed: bool = True) -> str:
    """:func:`mode` for people."""
    m = mode(network, boxed=boxed)
    if m["mode"] == "allow-list":
        return "network: allow-list through the session's proxy: " + ", ".join(
            network if isinstance(network, tuple) else ())
    return {"none": "network: none (the box has only its own loopback)",
            "open": "network: open (the box shares the host's network)",
            "host": "network: the host's (no box)"}[str(m["mode"])]
