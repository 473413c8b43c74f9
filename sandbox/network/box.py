"""What the box needs for the proxy: where its socket is, the forwarder's command line,
and the environment that points clients at it. Pure: no I/O."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.policy import Policy

# In the box: the forwarder's port on 127.0.0.1 (the box's own loopback, in its own
# network namespace), and where the proxy's socket is bound (under the box's /run tmpfs).
PROXY_PORT = 3128
BOX_SOCKET = "/run/harness-sandbox/proxy.sock"
FORWARDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forwarder.py")
# The box's own servers are reached directly, not through the proxy.
NO_PROXY = "localhost,127.0.0.1,::1"


def host_socket(policy: Policy) -> str:
    """The proxy's socket on the host: beside the session's private temp folder (which
    the box sees as /tmp), in a folder of mode 0700, never inside a folder the box can
    write."""
    return policy.private_tmp + ".net/proxy.sock"


def interpreter() -> str:
    """The Python the forwarder runs on: this one, where it leads (a virtual
    environment's link is not needed with ``-I -S``)."""
    return os.path.realpath(sys.executable)


def wrap(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` started by the forwarder."""
    return (interpreter(), "-I", "-S", FORWARDER, BOX_SOCKET, str(PROXY_PORT), "--", *argv)


def no_proxy(listed: Sequence[str] = ()) -> str:
    """The box's own loopback, reached directly: ``localhost``, ``127.0.0.1`` and ``::1``,
    less an address the list names literally (that entry means the host's loopback, so
    requests for it go to the proxy)."""
    from sandbox.network.allow import parse

    named = {parse(e).host for e in listed}
    return ",".join(h for h in NO_PROXY.split(",") if h not in named)


def proxy_env(listed: Sequence[str] = (), port: int = PROXY_PORT,
              token: str = "") -> dict[str, str]:
    """The variables that point HTTP clients at the proxy: the usual names in both
    cases (curl and git read the lower-case ``http_proxy`` only), and the ones of npm,
    yarn and cargo that do not read those (pip reads the usual ones: its own
    ``PIP_PROXY`` would send the box's loopback to the proxy too, past ``NO_PROXY``);
    with ``token``, the proxy's password in the URL (clients send it as ``Proxy-Authorization``)."""
    url = f"http://box:{token}@127.0.0.1:{port}" if token else f"http://127.0.0.1:{port}"
    skip = no_proxy(listed)
    out: dict[str, str] = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        out[name] = out[name.lower()] = url
    out["NO_PROXY"] = out["no_proxy"] = skip
    out.update({
        "npm_config_proxy": url, "npm_config_https_proxy": url,
        "npm_config_noproxy": skip,
        "YARN_HTTP_PROXY": url, "YARN_HTTPS_PROXY": url,
        "CARGO_HTTP_PROXY": url,
    })
    return out
