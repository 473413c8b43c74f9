"""A request's head as the box's proxy reads it (:mod:`.proxy`): its target, the
headers sent on to the origin, its body's length and its proxy password.

The head is taken only if it is exactly RFC 9112's grammar, read strictly: a request
line ``method SP request-target SP HTTP-version`` (a method of token characters, a
target of printable ASCII, ``HTTP/1.0`` or ``HTTP/1.1``), then field lines ``name ":"
OWS value OWS`` (a name of token characters, no space before the colon; a value of
printable ASCII, spaces and tabs), every line ended by CRLF and the head by an empty
one. Anything else raises :class:`Malformed`: a bare LF or CR, NUL or any other
control character, a byte above 0x7F (U+0085 and its kin end a line for some parsers),
a folded line, a space before a colon, an empty line first, a name that is a field
the proxy sets or drops once ``_`` is read as ``-`` (``Transfer_Encoding``). A parser
downstream that splits a line, or ends a head, somewhere else than this one would read
requests the proxy never saw (a second one, naming another ``Host``, to an origin that
routes by it): what this grammar takes, every parser splits the same way. What goes on is not
the box's bytes but the head made again from what was read: the line, ``Host`` from the
URL, each field as ``name: value``, one ``Content-Length`` and ``Connection: close``.

A body goes on only with its length said once (``Content-Length``, digits only, a
single field); ``Transfer-Encoding`` is never sent on: alone and ending in
``chunked`` it gets a 411 (:class:`Chunked`), beside a ``Content-Length`` or ending in
another coding, a 400.
"""

from __future__ import annotations

import re

from pathguard.records import NamedTuple

# Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: not sent to the origin.
DROPPED = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                     "proxy-authenticate", "te", "trailer", "upgrade", "host",
                     "content-length", "transfer-encoding"})

# RFC 9110 5.6.2: tchar.
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) (HTTP/1\.[01])")
# name ":" OWS value OWS, the value's ends not white (RFC 9112 5, RFC 9110 5.5).
_FIELD_LINE = re.compile(rb"(" + _TOKEN + rb"):[ \t]*((?:[\x21-\x7e](?:[\x21-\x7e \t]*"
                         rb"[\x21-\x7e])?)?)[ \t]*")
# A host in a URL: a DNS name (and _), or an IPv6 address in brackets; then a port.
_AUTHORITY = re.compile(r"([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?")
# How much of a line the box wrote a reason quotes.
QUOTED = 60


class Request(NamedTuple):
    host: str
    port: int
    tunnel: bool
    head: bytes  # what to send the origin first (empty for a tunnel)
    body: int = 0  # how many bytes follow the head (its Content-Length); no more go on
    auth: str = ""  # its first Proxy-Authorization's value


class Malformed(ValueError):
    """A head that is not RFC 9112's grammar, or asks what the proxy does not do;
    ``why`` says what, the box's own bytes in it escaped (printable as it is)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Chunked(Malformed):
    """A plain request whose body has no length said ahead (``Transfer-Encoding``)."""


def quoted(data: bytes) -> str:
    """``data`` (what the box wrote) for a reason: escaped, cut at :data:`QUOTED`."""
    from sandbox.text import escape

    text = escape(data[:QUOTED].decode("latin-1"))
    return f"'{text}{'...' if len(data) > QUOTED else ''}'"


def _line_fault(line: bytes) -> str:
    """Why a line the grammar did not take was refused, for the reason."""
    for byte, what in ((b"\n", "a bare LF"), (b"\r", "a bare CR"), (b"\0", "a NUL")):
        if byte in line:
            return what
    odd = next((b for b in line if (b < 0x20 and b != 0x09) or b >= 0x7F), None)
    if odd is not None:
        return f"the byte 0x{odd:02x}"
    if line[:1] in (b" ", b"\t"):
        return "a folded line (obs-fold)"
    if re.match(_TOKEN + rb"[ \t]+:", line):
        return "white space before the colon"
    return "no field name of token characters and colon"


def lines(raw: bytes) -> tuple[bytes, list[tuple[str, bytes, bytes]]]:
    """The request line and each field's lower-case name, its name as written and its
    value, from a head that ends with its empty line (CRLF CRLF). Raises
    :class:`Malformed`."""
    if not raw.endswith(b"\r\n\r\n"):
        raise Malformed("its head does not end with CRLF CRLF")
    first, *rest = raw[:-4].split(b"\r\n")
    if not _REQUEST_LINE.fullmatch(first):
        raise Malformed(f"its request line {quoted(first)} is not method SP target SP "
                        f"HTTP/1.0 or HTTP/1.1 ({_request_fault(first)})")
    fields: list[tuple[str, bytes, bytes]] = []
    for line in rest:
        m = _FIELD_LINE.fullmatch(line)
        if m is None:
            raise Malformed(f"its header line {quoted(line)} holds {_line_fault(line)}")
        name = m[1].decode("ascii").lower()
        if "_" in name and name.replace("_", "-") in DROPPED:
            raise Malformed(f"its field name {quoted(m[1])} is {name.replace('_', '-')} "
                            "to a server that reads _ as - (as CGI's names do)")
        fields.append((name, m[1], m[2]))
    return first, fields


def _request_fault(line: bytes) -> str:
    if not line:
        return "an empty line"
    parts = line.split(b" ")
    if len(parts) == 3 and re.fullmatch(_TOKEN, parts[0]) and re.fullmatch(
            rb"[\x21-\x7e]+", parts[1]):
        return "this HTTP version is not taken"
    if len(parts) != 3:
        return f"{len(parts)} words"
    return _line_fault(line) if re.search(rb"[^\x21-\x7e ]", line) else "not a method"


def parse(raw: bytes) -> Request:
    """The request from its head. Raises :class:`Malformed` (a ValueError)."""
    first, fields = lines(raw)
    method_b, target_b, version_b = first.split(b" ")
    method, target, version = (method_b.decode("ascii"), target_b.decode("ascii"),
                               version_b.decode("ascii"))
    auth = next((v.decode("ascii") for name, _, v in fields
                 if name == "proxy-authorization"), "")
    if method == "CONNECT":
        host, port = _authority(target, None)
        return Request(host, port, True, b"", auth=auth)
    if target[:7].lower() != "http://":
        raise Malformed(f"its target {quoted(target_b)} is not an absolute http:// URL "
                        "(or CONNECT host:port)")
    rest = target[7:]
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:end], rest[end:].partition("#")[0]
    if not path.startswith("/"):
        path = "/" + path
    authority = authority.rpartition("@")[2]
    host, port = _authority(authority, 80)
    length = _length(fields)
    out = [f"{method} {path} {version}".encode("ascii"), b"Host: " + authority.encode("ascii")]
    out += [written + (b": " + value if value else b":") for name, written, value in fields
            if name not in DROPPED]
    if length is not None:
        out.append(b"Content-Length: %d" % length)
    out += [b"Connection: close", b"", b""]
    return Request(host, port, False, b"\r\n".join(out), length or 0, auth)


def _length(fields: list[tuple[str, bytes, bytes]]) -> int | None:
    """The body's length: one ``Content-Length`` of digits, and no
    ``Transfer-Encoding``. Raises :class:`Malformed`."""
    lengths = [v for name, _, v in fields if name == "content-length"]
    codings = [v for name, _, v in fields if name == "transfer-encoding"]
    if codings:
        listed = [c.strip(b" \t").lower() for v in codings for c in v.split(b",")]
        if lengths:
            raise Malformed("it has both Content-Length and Transfer-Encoding")
        if listed[-1] != b"chunked":
            raise Malformed(f"its Transfer-Encoding {quoted(b', '.join(codings))} does "
                            "not end in chunked")
        raise Chunked("its body is chunked, without a length said ahead")
    if len(lengths) > 1:
        raise Malformed(f"it has {len(lengths)} Content-Length fields")
    if not lengths:
        return None
    if not re.fullmatch(rb"[0-9]{1,18}", lengths[0]):
        raise Malformed(f"its Content-Length {quoted(lengths[0])} is not a number")
    return int(lengths[0])


def _authority(text: str, default: int | None) -> tuple[str, int]:
    """The host (as written, brackets kept) and port of ``host[:port]``; ``default``
    None: the port must be there. Raises :class:`Malformed`."""
    m = _AUTHORITY.fullmatch(text)
    port = m[2] if m is not None else None
    if m is None or (port is None and default is None) or (
            port is not None and not 0 < int(port) < 65536):
        raise Malformed(f"its target's host and port {quoted(text.encode())} are not "
                        "host:port (a name, an IPv4 address, or an IPv6 one in brackets)")
    return m[1], int(port) if port is not None else (default or 0)


def any_auth(raw: bytes) -> str:
    """The first ``Proxy-Authorization`` value in a head :func:`lines` refused, its
    lines split at any line end: whether its sender has the password at all."""
    for line in re.split(rb"\r\n|\n|\r", raw):
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"proxy-authorization":
            return value.strip().decode("latin-1")
    return ""


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
