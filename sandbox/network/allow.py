"""The allow-list: its entries as written, checked, and what a request is matched to.

An entry is a host name (``pypi.org``), a suffix (``*.npmjs.org``: the names below it,
not the name itself), or an address written literally (``127.0.0.1``, ``[::1]``), each
with an optional ``:port``; without one, ports 80 and 443. Names compare without case
and without a final dot.

An address that is not global (loopback, link-local, private, unique-local, shared,
reserved, multicast) or is one of this machine's own is reached only through an entry
that names that address literally: a listed name that resolves to 127.0.0.1 reaches
nothing (DNS rebinding), and neither does a listed suffix under which the agent controls
a name.

An entry marked private (``{ host = "npm.corp.internal", private = true }`` in TOML,
``"npm.corp.internal (private)"`` as the library's text) lets its names resolve to a
private or reserved address too (a company's mirror on 10.x): never to a loopback,
link-local, unspecified or multicast one, nor to a cloud's metadata address, which only
an entry naming the address reaches.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from pathguard.records import NamedTuple

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS: tuple[int, ...] = (80, 443)
# The library's text of a private entry: "name (private)".
PRIVATE = " (private)"
# A cloud's metadata service (AWS's IPv6 one is unique-local, not link-local).
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"),
                      ipaddress.ip_address("fd00:ec2::254")})
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")


class Entry(NamedTuple):
    """One entry: ``host`` lower-case (a name, or an address's text), ``suffix`` for
    ``*.``, the ports it opens, and the address when written literally."""

    written: str
    host: str
    suffix: bool
    ports: tuple[int, ...]
    address: IPAddress | None
    # Its names may resolve to a private or reserved address (see the module).
    private: bool = False


def parse(text: str) -> Entry:
    """One entry as written in the config. Raises ValueError saying what is wrong."""
    if not isinstance(text, str) or not text:
        raise ValueError("an entry must be a host name, *.name or an address")
    if text.endswith(PRIVATE):
        entry = parse(text[:-len(PRIVATE)])
        if entry.address is not None:
            raise ValueError(f"{entry.written!r} is an address, which needs no private "
                             "mark; list it as a plain string")
        return entry._replace(written=text, private=True)
    if "://" in text or "/" in text:
        raise ValueError(f"{text!r} is a URL or a path; write the host name alone")
    host, ports = _split_port(text)
    suffix = host.startswith("*.")
    if suffix:
        host = host[2:]
    host = host.lower().rstrip(".") if not host.startswith("[") else host
    address = _literal(host)
    if address is not None:
        if suffix:
            raise ValueError(f"{text!r}: *. goes before a name, not an address")
        return Entry(text, str(address), False, ports, address)
    if len(host) > 253 or not _NAME.fullmatch(host) or host.replace(".", "").isdigit():
        raise ValueError(f"{text!r} is not a host name (letters, digits, - and dots), "
                         "*.name, or an address")
    return Entry(text, host, suffix, ports, None)


def _split_port(text: str) -> tuple[str, tuple[int, ...]]:
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f"{text!r}: an IPv6 address is written [address] or [address]:port")
        host, rest = text[:close + 1], text[close + 1:]
        if not rest:
            return host, DEFAULT_PORTS
        if not rest.startswith(":"):
            raise ValueError(f"{text!r}: only :port may follow [address]")
        return host, (_port(text, rest[1:]),)
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, (_port(text, port),)
    if ":" in text:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [address]:port")
    return text, DEFAULT_PORTS


def _port(text: str, port: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return int(port)


def _literal(host: str) -> IPAddress | None:
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(inner)
    except ValueError:
        if host.startswith("["):
            raise ValueError(f"{host!r} is not an IPv6 address") from None
        return None
    if host.startswith("[") != (address.version == 6):
        raise ValueError(f"{host!r}: brackets go around an IPv6 address only")
    return address


def parse_all(entries: Iterable[str]) -> tuple[Entry, ...]:
    return tuple(parse(e) for e in entries)


def host_of(authority: str) -> str:
    """A request's host, as the list compares it (lower-case, no final dot, an IPv6
    address without its brackets)."""
    host = authority.lower().rstrip(".")
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def match(entries: Sequence[Entry], host: str, port: int) -> Entry | None:
    """The entry that lets ``host`` (see :func:`host_of`) be reached on ``port``."""
    address = _address(host)
    for e in entries:
        if port not in e.ports:
            continue
        if e.address is not None:
            if address is not None and _plain(address) == _plain(e.address):
                return e
        elif address is None and (host.endswith("." + e.host) if e.suffix else host == e.host):
            return e
    return None


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def forbidden(address: IPAddress, entry: Entry, own: Iterable[IPAddress], *,
              listed: Sequence[Entry] = (), port: int = 0) -> str | None:
    """Why ``address`` may not be reached through ``entry``, or None. One that is not
    global or is this machine's is reached through an entry naming it (``entry``, or
    one of ``listed`` with ``port``), or, if private or reserved and not the machine's
    loopback, through a private entry."""
    a = _plain(address)
    if _named(a, entry, listed, port):
        return None
    never = _never_by_name(a)
    if never is not None:
        return never
    if entry.private and not a.is_global:
        return None
    if a in {_plain(o) for o in own}:
        return f"{a} is an address of this machine"
    if not a.is_global:
        return f"{a} is a private or reserved address"
    return None


def _never_by_name(a: IPAddress) -> str | None:
    """Why no name reaches ``a``, private or not: the machine's loopback (its own
    services, not a mirror), a metadata service, link-local, multicast, unspecified
    (0.0.0.0 connects to the machine itself)."""
    if a.is_loopback:
        return f"{a} is a loopback address"
    if a in METADATA:
        return f"{a} is a cloud's metadata address"
    if a.is_link_local:
        return f"{a} is a link-local address"
    if a.is_multicast or a.is_unspecified:
        return f"{a} is a multicast or unspecified address"
    return None


def _named(a: IPAddress, entry: Entry, listed: Sequence[Entry], port: int) -> bool:
    """Whether an entry names ``a`` itself: ``entry``, or one of ``listed`` on ``port``
    (the box could ask for the address anyway, so a name for it reaches nothing more)."""
    if entry.address is not None and _plain(entry.address) == a:
        return True
    return any(e.address is not None and _plain(e.address) == a and port in e.ports
               for e in listed)


def fix(address: IPAddress, entry: Entry, port: int) -> str:
    """What makes :func:`forbidden`'s refusal of ``address`` through ``entry`` go, as
    the user would write it: the private mark where it would do, else the address."""
    a = _plain(address)
    if not a.is_global and _never_by_name(a) is None:
        return (f'to allow it, write its entry as {{ host = "{entry.written}", '
                "private = true } in [sandbox] network")
    return add(str(a), port)


def add(host: str, port: int) -> str:
    """The fix for a host that is not on the list: the entry to add, as written."""
    text = f"[{host}]" if ":" in host else host
    if port not in DEFAULT_PORTS:
        text += f":{port}"
    try:
        parse(text)
    except ValueError as err:
        return f"it cannot be listed: {err}"
    return f'to allow it, add "{text}" to [sandbox] network'
