"""Requests smuggled into a request's head (issue 38): the proxy takes a head only as
RFC 9112 writes it (:mod:`sandbox.network.head`), so nothing reaches an origin that
splits a head where the proxy did not.

Tried for real: the session's proxy on a Unix socket (as Linux runs it) and on a
loopback port with its password (as macOS runs it), and a real origin on 127.0.0.1
that routes each request by its ``Host``, as a CDN's front does, and parses leniently,
as many servers do: it ends a line at a bare LF, a bare CR, NUL and the other line ends
of Python's ``str.splitlines`` (VT, FF, FS, GS, RS, NEL), unfolds folded lines, takes a
field's name as written up to its colon (with ``_`` as ``-``, as CGI's names have it),
the first ``Host``, a chunked body whenever
``Transfer-Encoding`` names chunked, and reads on after each request, whatever
``Connection`` says. What it reads for any host but the listed one goes to its
forbidden log, which must stay empty.
"""

from __future__ import annotations

import base64
import contextlib
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.origin import listening

from sandbox.network import allow
from sandbox.network.box import PROXY_PORT
from sandbox.network.proxy import Proxy
from sandbox.network.session import Network
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.timeout(120)]

FORBIDDEN = b"forbidden.example"
# A request for the forbidden host, as the smuggler writes it after its own.
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: forbidden.example\r\n\r\n"
_LINE_END = re.compile(rb"\r\n|[\n\r\x00\x0b\x0c\x1c-\x1e\x85]")


class Seen:
    """What the origin read: each request's line, its ``Host`` and body, by the site it
    was routed to."""

    def __init__(self, allowed: bytes) -> None:
        self.allowed_host = allowed
        self.allowed: list[tuple[bytes, bytes | None, bytes]] = []
        self.forbidden: list[tuple[bytes, bytes | None, bytes]] = []
        self.raw: list[bytes] = []


def _line(data: bytes, pos: int) -> tuple[bytes, int] | None:
    m = _LINE_END.search(data, pos)
    return None if m is None else (data[pos:m.start()], m.end())


def _chunked(data: bytes, pos: int) -> tuple[bytes, int] | None:
    body = b""
    while (got := _line(data, pos)) is not None:
        size_text, pos = got
        size = int(size_text.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            end = _line(data, pos)  # the empty line after the last chunk
            return body, (end[1] if end is not None else len(data))
        body += data[pos:pos + size]
        after = _line(data, pos + size)
        if after is None:
            return None
        pos = after[1]
    return None


def lenient(data: bytes) -> list[tuple[bytes, bytes | None, bytes]]:
    """Every request in what one connection sent, read as the module's docstring says:
    its request line, first ``Host`` and body."""
    out: list[tuple[bytes, bytes | None, bytes]] = []
    pos = 0
    while pos < len(data):
        lines: list[bytes] = []
        while (got := _line(data, pos)) is not None:
            line, pos = got
            if not line:
                if lines:
                    break
                continue
            if line[:1] in (b" ", b"\t") and len(lines) > 1:
                lines[-1] += b" " + line.strip()  # obs-fold, unfolded
            else:
                lines.append(line)
        else:
            return out
        fields = [(name.lower().replace(b"_", b"-"), value.strip()) for name, _, value in
                  (f.partition(b":") for f in lines[1:])]
        host = next((v for n, v in fields if n == b"host"), None)
        if any(n == b"transfer-encoding" and b"chunked" in v.lower() for n, v in fields):
            got_body = _chunked(data, pos)
            if got_body is None:
                return out
            body, pos = got_body
        else:
            length = next((v for n, v in fields if n == b"content-length"), b"0")
            size = int(length) if length.isdigit() else 0
            body, pos = data[pos:pos + size], pos + size
        out.append((lines[0], host, body))
    return out


@pytest.fixture
def origin() -> Iterator[tuple[int, Seen]]:
    """The routing origin: yields its port and what it read."""
    seen = Seen(b"")

    def serve(conn: socket.socket) -> None:
        conn.settimeout(1.0)  # what one connection sends, until a pause
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except TimeoutError:
            pass
        seen.raw.append(data)
        answers = b""
        for request in lenient(data):
            line, host, _ = request
            ours = host is None or host == seen.allowed_host  # no Host: the default site
            (seen.allowed if ours else seen.forbidden).append(request)
            text = b"allowed site\n" if ours else b"forbidden site: " + line + b"\n"
            answers += b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text)
        conn.sendall(answers)

    with listening(serve) as port:
        seen.allowed_host = b"127.0.0.1:%d" % port
        yield port, seen


@pytest.fixture
def proxy(origin: tuple[int, Seen]) -> Iterator[Proxy]:
    """The proxy on a Unix socket (in a short folder: a socket's path is bounded),
    listing the origin's address and port alone."""
    folder = tempfile.mkdtemp(prefix="hs-smuggle-")
    p = Proxy.start(allow.parse_all([f"127.0.0.1:{origin[0]}"]),
                    path=f"{folder}/net/proxy.sock")
    try:
        yield p
    finally:
        p.close()
        shutil.rmtree(folder, ignore_errors=True)


def ask(proxy: Proxy, raw: bytes) -> bytes:
    """``raw`` sent to the proxy in one piece; everything it answers, until it closes."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(20)
        s.connect(proxy.path)
        s.sendall(raw)
        got = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                got += chunk
        return got


# Each attempt, given the listed authority (127.0.0.1:PORT): the bytes the box sends.
def _post(fields: bytes, body: bytes) -> Callable[[bytes], bytes]:
    return lambda a: (b"POST http://" + a + b"/upload HTTP/1.1\r\nHost: " + a + b"\r\n"
                      + fields + b"\r\n" + body)


def _value(value: bytes) -> Callable[[bytes], bytes]:
    return lambda a: (b"GET http://" + a + b"/ HTTP/1.1\r\nHost: " + a + b"\r\nX-Note: "
                      + value + b"\r\nAccept: */*\r\n\r\n")


def _line_of(line: bytes) -> Callable[[bytes], bytes]:
    return lambda a: line.replace(b"@", a) + b"\r\nAccept: */*\r\n\r\n"


TAIL = b"0\r\n\r\n" + SMUGGLED  # a chunked body's end, then the request behind it
ATTEMPTS: dict[str, Callable[[bytes], bytes]] = {
    "bare LF in a value": _value(b"a\n\nGET /smuggled HTTP/1.1\nHost: forbidden.example\n"),
    "bare CR in a value": _value(b"a\r\rGET /smuggled HTTP/1.1\rHost: forbidden.example\r"),
    "NUL in a value": _value(b"a\0\0GET /smuggled HTTP/1.1\0Host: forbidden.example\0"),
    "a control character (VT) in a value": _value(
        b"a\x0b\x0bGET /smuggled HTTP/1.1\x0bHost: forbidden.example\x0b"),
    "NEL (obs-text 0x85) in a value": _value(
        b"a\x85\x85GET /smuggled HTTP/1.1\x85Host: forbidden.example\x85"),
    "obs-fold hiding Content-Length": _post(
        b"X-Note: a\r\n Content-Length: %d\r\n" % len(SMUGGLED), SMUGGLED),
    "space before the colon": _post(b"Content-Length : %d\r\n" % len(SMUGGLED), SMUGGLED),
    "tab before the colon": _post(b"Content-Length\t: %d\r\n" % len(SMUGGLED), SMUGGLED),
    "Transfer-Encoding behind a bare LF": _post(
        b"X-Note: a\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(TAIL), TAIL),
    "Transfer_Encoding with an underscore": _post(
        b"Transfer_Encoding: chunked\r\nContent-Length: %d\r\n" % len(TAIL), TAIL),
    "Content-Length and Transfer-Encoding": _post(
        b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(TAIL), TAIL),
    "two Content-Length fields": _post(
        b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(SMUGGLED), len(SMUGGLED)),
        SMUGGLED),
    "Transfer-Encoding: chunked, identity": _post(
        b"Transfer-Encoding: chunked, identity\r\n", TAIL),
    "a space in the target": _line_of(b"GET http://@/a GET /smuggled HTTP/1.1"),
    "a bare LF in the target": _line_of(
        b"GET http://@/a\n\nGET\t/smuggled\tHTTP/1.1\nHost:forbidden.example\nX: HTTP/1.1"),
    "a bare LF after the version": _line_of(
        b"GET http://@/ HTTP/1.1\n\nGET\t/smuggled\tHTTP/1.1\nHost:forbidden.example\n"),
    "HTTP/0.9 (no version)": _line_of(b"GET http://@/"),
    "HTTP/2.0": _line_of(b"GET http://@/ HTTP/2.0"),
    "HTTP/1.2": _line_of(b"GET http://@/ HTTP/1.2"),
    "an empty line first": lambda a: b"\r\n" + _value(b"a")(a),
}


@pytest.mark.parametrize("name", list(ATTEMPTS))
def test_a_smuggling_head_is_refused_and_never_reaches_the_origin(
        name: str, origin: tuple[int, Seen], proxy: Proxy) -> None:
    port, seen = origin
    answer = ask(proxy, ATTEMPTS[name](b"127.0.0.1:%d" % port))
    proxy.close()  # every refusal recorded by then
    assert seen.forbidden == [], seen.raw
    assert seen.raw == [], "nothing of a refused head goes on"
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"harness-sandbox: the box's proxy refused the request: " in answer
    # Said once, without a host (the line that would name it may be what is wrong),
    # the box's own bytes escaped: printable as they are.
    (host, p, why), = proxy.since(0)
    assert (host, p) == ("", 0) and why.isprintable() and why, why


def test_the_reason_names_the_fault_and_escapes_the_boxs_bytes(
        origin: tuple[int, Seen], proxy: Proxy) -> None:
    a = b"127.0.0.1:%d" % origin[0]
    ask(proxy, _value(b"a\n\x1b]52;c;evil\x07")(a))
    ask(proxy, _post(b"X-Note: a\r\n Content-Length: 3\r\n", b"abc")(a))
    ask(proxy, _line_of(b"GET http://@/ HTTP/2.0")(a))
    proxy.close()
    whys = [why for _, _, why in proxy.since(0)]
    assert whys == [
        "its header line 'X-Note: a\\x0a\\x1b]52;c;evil\\x07' holds a bare LF",
        "its header line ' Content-Length: 3' holds a folded line (obs-fold)",
        f"its request line 'GET http://127.0.0.1:{origin[0]}/ HTTP/2.0' is not method SP "
        "target SP HTTP/1.0 or HTTP/1.1 (this HTTP version is not taken)"]
    report = Network(proxy).report()
    assert report == [
        "network: the proxy refused 3 requests whose head it does not take (the last: "
        f"{whys[-1]}); the proxy takes CONNECT host:port or an absolute http:// URL, "
        "with a head written as RFC 9112 writes it (CRLF line ends, printable ASCII, no "
        "folded lines, one Content-Length)"]


def test_a_clean_request_reaches_the_listed_origin_made_again(
        origin: tuple[int, Seen], proxy: Proxy) -> None:
    """What goes on is the head the proxy read, written again: one ``Host`` from the
    URL, each field as ``name: value``, ``Connection: close``; the body its length
    says, and nothing the box sent behind it."""
    port, seen = origin
    a = b"127.0.0.1:%d" % port
    answer = ask(proxy, b"POST http://" + a + b"/up?x=1 HTTP/1.1\r\nHost: forbidden.example"
                 b"\r\nUser-Agent:  probe/1.0 \t\r\nX-Empty:\r\nContent-Length: 3\r\n"
                 b"Connection: keep-alive\r\n\r\nabc" + SMUGGLED)
    answer += ask(proxy, b"GET http://" + a + b"/ HTTP/1.0\r\n\r\n")
    proxy.close()
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2 and b"forbidden" not in answer
    assert seen.forbidden == []
    assert seen.raw == [
        b"POST /up?x=1 HTTP/1.1\r\nHost: " + a + b"\r\nUser-Agent: probe/1.0\r\n"
        b"X-Empty:\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
        b"GET / HTTP/1.0\r\nHost: " + a + b"\r\nConnection: close\r\n\r\n"]
    assert seen.allowed == [(b"POST /up?x=1 HTTP/1.1", a, b"abc"),
                            (b"GET / HTTP/1.0", a, b"")]
    assert proxy.since(0) == ()


def test_a_chunked_body_gets_a_411(origin: tuple[int, Seen], proxy: Proxy) -> None:
    a = b"127.0.0.1:%d" % origin[0]
    answer = ask(proxy, _post(b"Transfer-Encoding: chunked\r\n", TAIL)(a))
    proxy.close()
    assert answer.startswith(b"HTTP/1.1 411 Length Required\r\n")
    assert origin[1].raw == []
    assert Network(proxy).report() == [
        "network: the proxy refused 1 request whose head it does not take (the last: its "
        "body is chunked, without a length said ahead); send the body with a "
        "Content-Length (the proxy does not send chunked bodies on)"]


def test_on_a_loopback_port_a_malformed_head_without_the_password_gets_a_407(
        origin: tuple[int, Seen]) -> None:
    """Another local user's bytes are not read further than its missing password:
    said in the password's line, not with the reason its head would have had."""
    port, seen = origin
    p = Proxy.start(allow.parse_all([f"127.0.0.1:{port}"]), port=0)
    a = b"127.0.0.1:%d" % port
    good = b"Proxy-Authorization: Basic " + base64.b64encode(f"box:{p.token}".encode())
    bad = _value(b"a\n\nGET /smuggled HTTP/1.1\nHost: forbidden.example\n")(a)
    answers = []
    try:
        for extra in (b"", good + b"\r\n"):
            raw = bad.replace(b"\r\nX-Note", b"\r\n" + extra + b"X-Note", 1)
            with socket.create_connection(("127.0.0.1", p.port), timeout=20) as s:
                s.sendall(raw)
                answers.append(s.makefile("rb").read())
    finally:
        p.close()
    assert answers[0].startswith(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
    assert answers[1].startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert seen.raw == []
    assert [why[:20] for _, _, why in p.since(0)] == [
        "asked without the pr", "its header line 'X-N"]


# -- from inside the real box ----------------------------------------------------------

# The box's client: the argument (its escapes undone) sent to the proxy's forwarder in
# one piece; prints the answer's first line.
BOXED = """
import socket, sys
s = socket.create_connection(("127.0.0.1", THE_PROXY), timeout=20)
s.sendall(sys.argv[1].encode().decode("unicode_escape").encode("latin-1"))
got = b""
try:
    while chunk := s.recv(4096):
        got += chunk
except OSError:
    pass
print(got.split(b"\\r\\n")[0].decode())
""".replace("THE_PROXY", str(PROXY_PORT))


@pytest.mark.isolation
def test_a_smuggling_head_from_inside_the_box_never_reaches_the_origin(
        project: Path, origin: tuple[int, Seen]) -> None:
    port, seen = origin
    a = b"127.0.0.1:%d" % port
    sent = [ATTEMPTS[n](a).decode("latin-1").encode("unicode_escape").decode("ascii")
            for n in ("bare LF in a value", "Transfer-Encoding behind a bare LF")]
    settings = SandboxSettings(network=(f"127.0.0.1:{port}",), hide_defaults=False)
    with Session.open(str(project), settings) as s:
        runs = [s.run(["/usr/bin/python3", "-I", "-c", BOXED, text]) for text in sent]
        clean = s.run(["/usr/bin/python3", "-I", "-c", BOXED,
                       f"GET http://127.0.0.1:{port}/ HTTP/1.1\\r\\n\\r\\n"])
    for r in runs:
        assert r.stdout == b"HTTP/1.1 400 Bad Request\n", r
        assert [why[:18] for _, _, why in r.refused] == ["its header line 'X"], r.refused
    assert clean.stdout == b"HTTP/1.1 200 OK\n", clean
    assert seen.forbidden == []
    assert seen.allowed == [(b"GET / HTTP/1.1", a, b"")]
