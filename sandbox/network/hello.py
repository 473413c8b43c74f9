"""What a box says first inside a ``CONNECT`` tunnel, read before any of it goes on.

The proxy connects a tunnel to the address it resolved and checked for the name the
box asked for. What answers there may serve many names: a CDN, a cloud's load
balancer, a shared host picks the site by the name the client's TLS hello carries
(Server Name Indication, RFC 6066), and in clear HTTP by the ``Host`` header. A tunnel
to a listed name that then asks the same front for another name reaches a site the
list does not have (domain fronting). So the proxy reads the box's first bytes:

- a TLS hello: the name it carries must be on the list for the tunnel's port; a hello
  that names no server goes on (nothing in it chooses a site), and one that cannot be
  read is refused;
- clear HTTP (a request line, read as a lenient server reads one): refused. Each
  request on a kept-alive connection may name another ``Host``; an ``http://`` URL is
  sent to the proxy as it is, which then sets ``Host`` from the URL and closes the
  connection after one answer. A first line that begins as a request's is waited for
  until it ends (8 KiB at most);
- anything else (what a box says after a server spoke first, ssh, a protocol of its
  own) goes on as it is.

A hello that hides the name it asks for (Encrypted Client Hello) is refused: its outer
name can be a listed site on the same front. What is encrypted stays unread: a ``Host``
inside TLS.
"""

from __future__ import annotations

import re

# A TLS record holds at most 2^14 bytes of handshake; a hello a few kilobytes (larger
# with post-quantum key shares). More than this before the hello is whole is refused.
HELLO_LIMIT = 64 * 1024
_HANDSHAKE = 0x16
_CLIENT_HELLO = 0x01
_SERVER_NAME = 0x0000
# Encrypted Client Hello (its final code point and those of its drafts 08 to 12), and
# the draft before it (encrypted SNI): the server asked for is inside, where only the
# front reads it; the outer name can be any name it serves.
_HIDDEN_NAME = frozenset({*range(0xfe08, 0xfe0e), 0xffce})
_HOST_NAME = 0x00
# A request line (RFC 9112 3): a method, then the target and the version. Read as a
# lenient server reads one: any letters for the method, blanks or tabs between, the
# version anywhere on the line. HTTP/2's preface ("PRI * HTTP/2.0") is one too.
_METHOD = re.compile(rb"[A-Za-z][A-Za-z_-]{0,19}")
_LINE_LIMIT = 8 * 1024

MORE, TLS, CLEAR_HTTP, OTHER = "more", "tls", "http", "other"


class Incomplete(ValueError):
    """More bytes are needed to read the hello."""


class Hidden(ValueError):
    """The hello hides the server it asks for (Encrypted Client Hello)."""


def judge(data: bytes, *, ended: bool = False) -> tuple[str, str | None]:
    """What the box's first bytes in a tunnel are: (:data:`MORE`, None) when they do not
    tell yet (and the box has not ``ended`` its sending), (:data:`TLS`, the name its
    hello asks for or None), (:data:`CLEAR_HTTP`, None) for a request line, or
    (:data:`OTHER`, None). Raises :class:`Hidden` for a TLS hello that hides the server
    it asks for, ValueError for one that cannot be read, or that does not end within
    :data:`HELLO_LIMIT` bytes."""
    if data[:1] == bytes([_HANDSHAKE]):
        try:
            return TLS, server_name(data)
        except Incomplete:
            if ended or len(data) > HELLO_LIMIT:
                raise ValueError("the hello does not end") from None
            return MORE, None
    line, ended_line, _ = data[:_LINE_LIMIT].partition(b"\n")
    method = _METHOD.match(line)
    rest = line[method.end():] if method is not None else b""
    if method is None or (rest and rest[:1] not in (b" ", b"\t")):
        return OTHER, None
    if ended_line:
        return (CLEAR_HTTP if b"HTTP/" in rest.upper() else OTHER), None
    if not ended and len(data) < _LINE_LIMIT:
        return MORE, None
    # A line begun as a request's that is not whole by the limit, or at the box's end of
    # sending: taken for one.
    return CLEAR_HTTP, None


def first_handshake(data: bytes) -> bytes:
    """The first handshake message carried by the TLS records at the start of
    ``data`` (a hello may span records). Raises :class:`Incomplete` when more bytes are
    needed, ValueError when these are not TLS handshake records."""
    message = bytearray()
    at = 0
    while True:
        if len(data) < at + 5:
            raise Incomplete
        kind, major, length = data[at], data[at + 1], int.from_bytes(data[at + 3:at + 5])
        if kind != _HANDSHAKE or major != 3 or not 0 < length <= 1 << 14:
            raise ValueError("not a TLS handshake record")
        if len(data) < at + 5 + length:
            raise Incomplete
        message += data[at + 5:at + 5 + length]
        at += 5 + length
        if len(message) >= 4:
            whole = 4 + int.from_bytes(message[1:4])
            if len(message) >= whole:
                return bytes(message[:whole])


def server_name(data: bytes) -> str | None:
    """The host name the TLS hello at the start of ``data`` asks for (lower-case, as
    sent), or None when it names none. Raises :class:`Incomplete` when more bytes are
    needed, :class:`Hidden` when it hides the server it asks for, ValueError when it is
    not a client's hello or cannot be read."""
    message = first_handshake(data)
    if message[0] != _CLIENT_HELLO:
        raise ValueError("the first handshake message is not a client's hello")
    r = _Reader(message[4:])
    r.take(2 + 32)  # the version and the random
    r.take(r.number(1))  # the session id
    r.take(r.number(2))  # the cipher suites
    r.take(r.number(1))  # the compression methods
    if r.left() == 0:
        return None  # no extensions at all
    extensions = _Reader(r.take(r.number(2)))
    found: str | None = None
    seen: set[int] = set()
    while extensions.left():
        kind, body = extensions.number(2), extensions.take(extensions.number(2))
        if kind in seen:
            raise ValueError("an extension is sent twice")
        seen.add(kind)
        if kind in _HIDDEN_NAME:
            raise Hidden("Encrypted Client Hello")
        if kind == _SERVER_NAME:
            found = _host_name(body)
    return found


def _host_name(body: bytes) -> str | None:
    names = _Reader(body)
    entries = _Reader(names.take(names.number(2)))
    found: str | None = None
    while entries.left():
        kind, name = entries.number(1), entries.take(entries.number(2))
        if kind != _HOST_NAME:
            continue
        if found is not None:
            raise ValueError("the hello names two servers")
        try:
            found = name.decode("ascii").lower()
        except UnicodeDecodeError:
            raise ValueError("the server name is not ASCII") from None
        if not found or any(c in found for c in "\0/\\ ") or not found.isprintable():
            raise ValueError("the server name is not a host name")
    return found


class _Reader:
    """Reads a TLS structure front to back; running past its end raises ValueError."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def left(self) -> int:
        return len(self._data) - self._at

    def take(self, n: int) -> bytes:
        if n > self.left():
            raise ValueError("the hello ends inside a field")
        out = self._data[self._at:self._at + n]
        self._at += n
        return out

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size))
