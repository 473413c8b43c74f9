"""A request's head as the box's proxy reads it (:mod:`.proxy`): its target, the
headers sent on to the origin, its body's length and its proxy password."""

from __future__ import annotations

from pathguard.records import NamedTuple

# Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: not sent to the origin.
DROPPED = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                     "proxy-authenticate", "te", "trailer", "upgrade", "host"})


class Request(NamedTuple):
    host: str
    port: int
    tunnel: bool
    head: bytes  # what to send the origin first (empty for a tunnel)
    body: int = 0  # how many bytes follow the head (its Content-Length); no more go on
    auth: str = ""  # its first Proxy-Authorization's value


class Chunked(ValueError):
    """A plain request whose body has no length said ahead (``Transfer-Encoding``)."""


def parse(raw: bytes) -> Request:
    """The request's target from its head. Raises ValueError."""
    lines = raw[:-4].decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(version)
    named = [(h.split(":", 1)[0].strip().lower(), h) for h in lines[1:]]
    auth = next((h.partition(":")[2].strip() for name, h in named
                 if name == "proxy-authorization"), "")
    if method == "CONNECT":
        host, port = _authority(target, None)
        return Request(host, port, True, b"", auth=auth)
    if not target.lower().startswith("http://"):
        raise ValueError(target)
    authority, slash, path = target[7:].partition("/")
    host, port = _authority(authority.rpartition("@")[2], 80)
    if any(name == "transfer-encoding" for name, _ in named):
        raise Chunked(target)
    lengths = {h.split(":", 1)[1].strip() if ":" in h else "" for name, h in named
               if name == "content-length"}
    if len(lengths) > 1 or not all(n.isascii() and n.isdigit() for n in lengths):
        raise ValueError(target)
    headers = [h for name, h in named if name not in DROPPED]
    head = "\r\n".join([f"{method} {slash}{path or ''} {version}",
                        f"Host: {authority.rpartition('@')[2]}", *headers,
                        "Connection: close", "", ""])
    return Request(host, port, False, head.encode("latin-1"),
                    int(lengths.pop()) if lengths else 0, auth)


def _authority(text: str, default: int | None) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host or (not port and default is None):
        raise ValueError(text)
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(text)
    return host, int(port) if port else (default or 0)


def authorized(auth: str, token: bytes) -> bool:
    """Whether a ``Proxy-Authorization`` value carries ``token`` as its Basic password."""
    import base64
    import hmac

    scheme, _, encoded = auth.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except ValueError:
        return False
    return hmac.compare_digest(given.partition(":")[2].encode(), token)
