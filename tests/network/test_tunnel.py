"""What the proxy reads of a ``CONNECT`` tunnel before anything goes on
(:mod:`sandbox.network.hello`): a TLS hello must name a listed server, clear HTTP is
refused, and anything else (a server that speaks first) goes on; and what a plain
request carries on: its body, nothing behind it. Tried for real: a TLS origin, a
banner server and a lenient origin on 127.0.0.1, the box's own client behind the
proxy."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.origin import TlsOrigin, listening, serving, serving_tls

from sandbox.network import hello
from sandbox.network.box import PROXY_PORT
from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(120)]

CURL = ["curl", "-sS", "--max-time", "20"]

# What the box's clients below share: a connection to the proxy, a tunnel through it
# (the proxy's answer read), what comes back until the end, and an argument's escapes.
_PRELUDE = """
import socket, ssl, sys, time
def proxy():
    return socket.create_connection(("127.0.0.1", THE_PROXY), timeout=20)
def tunnel(port):
    s = proxy()
    s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % port)
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        head += s.recv(1)
    return s, head
def drain(s):
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except OSError:
        pass
    return got
def unescaped(text):
    return text.encode().decode("unicode_escape").encode("latin-1")
""".replace("THE_PROXY", str(PROXY_PORT))


def _client(body: str) -> str:
    """A client the box runs with ``python3 -I -c``: the prelude, then ``body``."""
    return _PRELUDE + body


# TLS through a tunnel to 127.0.0.1:PORT, asking for the server named (none when
# empty), then one request; prints the proxy's answer and the origin's first line.
TLS_CLIENT = _client("""
s, head = tunnel(int(sys.argv[1]))
print(head.split(b"\\r\\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname=sys.argv[2] or None)
    t.sendall(b"GET /hello.txt HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    print(t.recv(4096).split(b"\\r\\n")[0].decode())
except (OSError, ssl.SSLError) as err:
    print("ended:", type(err).__name__)
""")

# Clear bytes through a tunnel: each argument sent as it is, one send each, a pause
# between; prints what came back.
RAW_CLIENT = _client("""
s, _ = tunnel(int(sys.argv[1]))
for part in sys.argv[2:]:
    s.sendall(unescaped(part))
    time.sleep(0.2)
print(repr(drain(s)))
""")


def listed(*entries: str) -> SandboxSettings:
    return SandboxSettings(network=tuple(entries), hide_defaults=False)


def out(r: RunResult) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the origin\n")
    return root


@pytest.fixture
def tls(site: Path, tmp_path: Path) -> Iterator[TlsOrigin]:
    keys = tmp_path / "keys"
    keys.mkdir()
    with serving_tls(site, keys) as origin:
        yield origin


def _tls_run(s: Session, port: int, name: str) -> RunResult:
    return s.run(["/usr/bin/python3", "-I", "-c", TLS_CLIENT, str(port), name])


# -- TLS: the name the hello asks for --------------------------------------------------


def test_a_hello_naming_a_server_off_the_list_never_reaches_the_origin(
        project: Path, tls: TlsOrigin) -> None:
    """The tunnel goes to a listed address; the hello inside asks that front for
    another site (domain fronting). It is refused before a byte goes on; a listed name
    and a hello that names none go through."""
    settings = listed(f"127.0.0.1:{tls.port}", f"good.example:{tls.port}")
    with Session.open(str(project), settings) as s:
        evil = _tls_run(s, tls.port, "evil.example")
        good = _tls_run(s, tls.port, "Good.Example")
        none = _tls_run(s, tls.port, "")
    assert evil.stdout.decode().splitlines()[0] == "HTTP/1.1 200 Connection established"
    assert evil.stdout.decode().splitlines()[1].startswith("ended:"), out(evil)
    assert evil.refused == (("evil.example", tls.port, "named by a TLS hello in a tunnel "
                             "to 127.0.0.1; not on the [sandbox] network list"),)
    assert good.stdout.decode().splitlines()[1] == "HTTP/1.0 200 OK", out(good)
    assert none.stdout.decode().splitlines()[1] == "HTTP/1.0 200 OK", out(none)
    assert good.refused == none.refused == ()
    assert tls.names == ["Good.Example", None]  # as the client wrote it
    assert [w for w in s.warnings if w.startswith("network:")] == [
        f"network: the box was refused evil.example (port {tls.port}, 1 time): named by a "
        "TLS hello in a tunnel to 127.0.0.1; not on the [sandbox] network list; to allow "
        f'it, add "evil.example:{tls.port}" to [sandbox] network']


def test_without_the_check_the_fronted_hello_reaches_the_origin(
        project: Path, tls: TlsOrigin, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check off (every first word taken for another protocol): the same attempt
    reaches the origin, which answers the site the list does not have."""
    monkeypatch.setattr(hello, "judge", lambda data, ended=False: (hello.OTHER, None))
    with Session.open(str(project), listed(f"127.0.0.1:{tls.port}")) as s:
        evil = _tls_run(s, tls.port, "evil.example")
    assert evil.stdout.decode().splitlines()[1] == "HTTP/1.0 200 OK", out(evil)
    assert tls.names == ["evil.example"]


# -- clear bytes -----------------------------------------------------------------------


@pytest.mark.parametrize("parts", [
    ["GET /hello.txt HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n"],
    # A byte at a time at first: the proxy waits until the line tells.
    ["G", "E", "T  /hello.txt", " HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n"],
    ["get /hello.txt http/1.0\\r\\n\\r\\n"],
], ids=["whole", "dribbled", "lower-case"])
def test_clear_http_in_a_tunnel_is_refused(project: Path, site: Path,
                                           parts: list[str]) -> None:
    with serving(site) as port, Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", RAW_CLIENT, str(port), *parts])
        curl = s.run([*CURL, "-p", f"http://127.0.0.1:{port}/hello.txt"])
        plain = s.run([*CURL, f"http://127.0.0.1:{port}/hello.txt"])
    assert r.stdout == b"b''\n", out(r)
    assert r.refused == (("127.0.0.1", port, "clear HTTP inside a CONNECT tunnel"),)
    assert curl.returncode != 0 and b"hello" not in curl.stdout
    # The same request sent to the proxy as it is goes through.
    assert plain.stdout == b"hello from the origin\n", out(plain)
    assert [w for w in s.warnings if w.startswith("network:")] == [
        f"network: the box was refused 127.0.0.1 (port {port}, 2 times): clear HTTP inside "
        "a CONNECT tunnel; send an http:// URL to the proxy as it is (not through a "
        "tunnel)"]


@pytest.fixture
def banner() -> Iterator[int]:
    """A server that speaks first (as SMTP or ssh do), then echoes one line."""
    def speak_first(conn: socket.socket) -> None:
        conn.sendall(b"220 hello\r\n")
        line = b""
        while not line.endswith(b"\n"):
            got = conn.recv(1)
            if not got:
                break
            line += got
        conn.sendall(b"250 " + line)

    with listening(speak_first) as port:
        yield port


def test_a_server_that_speaks_first_is_heard_and_answered(project: Path,
                                                          banner: int) -> None:
    with Session.open(str(project), listed(f"127.0.0.1:{banner}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", RAW_CLIENT, str(banner), "EHLO box\\r\\n"])
    assert r.stdout == b"b'220 hello\\r\\n250 EHLO box\\r\\n'\n", out(r)
    assert r.refused == ()


# -- the reading, on real hellos -------------------------------------------------------


def _hello(name: str | None) -> bytes:
    """The first flight of Python's TLS client asking for ``name``."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def _in_records(data: bytes, size: int) -> bytes:
    """The same handshake cut into records of ``size`` bytes (a hello may span them)."""
    message = data[5:5 + int.from_bytes(data[3:5])]
    out = b""
    for at in range(0, len(message), size):
        part = message[at:at + size]
        out += data[:3] + len(part).to_bytes(2) + part
    return out


def test_the_name_is_read_from_a_real_hello_whole_split_or_in_pieces() -> None:
    first = _hello("Pypi.org")
    assert hello.judge(first) == (hello.TLS, "pypi.org")
    assert hello.judge(_hello(None)) == (hello.TLS, None)
    split = _in_records(first, 100)
    assert hello.judge(split) == (hello.TLS, "pypi.org")
    for cut in (1, 4, 5, 50, len(split) - 1):
        assert hello.judge(split[:cut]) == (hello.MORE, None)
        with pytest.raises(ValueError, match="does not end"):
            hello.judge(split[:cut], ended=True)


@pytest.mark.parametrize("data", [
    b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00",  # a server's hello
    b"\x16\x03\x01\x00\x04\x01\x00\x00\x00",  # a client's hello with nothing in it
    b"\x16\x09\x01\x00\x04\x01\x00\x00\x00",  # not version 3
    b"\x16\x03\x01\x00\x00",  # an empty record
])
def test_a_hello_that_cannot_be_read_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        hello.judge(data)


def _built(*extensions: tuple[int, bytes]) -> bytes:
    """A client's hello made by hand, with ``extensions`` (kind, body)."""
    exts = b"".join(k.to_bytes(2) + len(b).to_bytes(2) + b for k, b in extensions)
    body = (b"\x03\x03" + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
            + len(exts).to_bytes(2) + exts)
    message = b"\x01" + len(body).to_bytes(3) + body
    return b"\x16\x03\x01" + len(message).to_bytes(2) + message


def _names(*names: bytes) -> bytes:
    entries = b"".join(b"\x00" + len(n).to_bytes(2) + n for n in names)
    return len(entries).to_bytes(2) + entries


def test_a_hand_made_hello_is_read_as_a_real_one() -> None:
    assert hello.judge(_built((0, _names(b"a.example")))) == (hello.TLS, "a.example")
    assert hello.judge(_built((16, b"\x00\x03\x02h2"))) == (hello.TLS, None)


@pytest.mark.parametrize(("extensions", "why"), [
    ([(0, _names(b"a.example", b"b.example"))], "two servers"),
    ([(0, _names(b"a.example")), (0, _names(b"b.example"))], "sent twice"),
    ([(0, _names("\u00e9.example".encode()))], "not ASCII"),
    ([(0, _names(b"a.example/x"))], "not a host name"),
    ([(0, _names(b""))], "not a host name"),
    ([(0, b"\x00\x09\x00\x00\x20")], "ends inside a field"),
])
def test_a_hello_naming_servers_in_a_way_of_its_own_is_refused(
        extensions: list[tuple[int, bytes]], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        hello.judge(_built(*extensions))


# A listed outer name, and the real one encrypted for the front: Encrypted Client Hello,
# one of its drafts, and the encrypted SNI before them.
@pytest.mark.parametrize("kind", [0xfe0d, 0xfe08, 0xffce])
def test_a_hello_that_hides_its_server_is_refused(kind: int) -> None:
    with pytest.raises(hello.Hidden, match="Encrypted Client Hello"):
        hello.judge(_built((0, _names(b"pypi.org")), (kind, b"\x00" * 8)))
    with pytest.raises(hello.Hidden):
        hello.judge(_built((kind, b"\x00" * 8), (0, _names(b"pypi.org"))))


def test_a_hidden_server_is_refused_in_the_tunnel_with_its_own_fix(
        project: Path, site: Path) -> None:
    # The hello names a listed server outside and hides the one it asks for: it never
    # reaches the origin, and the user is told what makes a browser send one.
    ech = _built((0xfe0d, b"\x00" * 8), (0, _names(b"pypi.org")))
    escaped = ech.decode("latin-1").encode("unicode_escape").decode("ascii")
    with serving(site) as port, Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", RAW_CLIENT, str(port), escaped])
    assert r.stdout == b"b''\n", out(r)
    assert r.refused == (("127.0.0.1", port, "its TLS hello in the tunnel hides the server "
                          "it asks for (Encrypted Client Hello)"),)
    assert [w for w in s.warnings if w.startswith("network:")] == [
        f"network: the box was refused 127.0.0.1 (port {port}, 1 time): its TLS hello in "
        "the tunnel hides the server it asks for (Encrypted Client Hello); the proxy reads "
        "the server a tunnel's hello asks for; start a Chromium browser with "
        "--disable-features=EncryptedClientHello"]


@pytest.mark.parametrize(("data", "ended", "kind"), [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False, hello.CLEAR_HTTP),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", False, hello.CLEAR_HTTP),
    (b"get\t/  Http/1.0\n", False, hello.CLEAR_HTTP),
    (b"GE", False, hello.MORE),
    (b"GET /x", False, hello.MORE),
    (b"GET /x", True, hello.CLEAR_HTTP),
    (b"GET /" + b"x" * 9000, False, hello.CLEAR_HTTP),
    (b"EHLO box\r\n", False, hello.OTHER),
    (b"SSH-2.0-OpenSSH_9.2\r\n", False, hello.OTHER),
    (b"\x00\x00\x00\x08\x04\xd2\x16\x2f", False, hello.OTHER),
    (b"", True, hello.OTHER),
])
def test_clear_words_are_told_apart(data: bytes, ended: bool, kind: str) -> None:
    assert hello.judge(data, ended=ended) == (kind, None)


# -- the plain path: one request, its body, nothing after it ---------------------------


@pytest.fixture
def lenient() -> Iterator[tuple[int, list[bytes]]]:
    """An origin that reads on after a request (as a lenient server serves what is sent
    behind one): it keeps everything each connection sent until a pause, then answers
    and closes. Yields its port and what each connection sent."""
    got: list[bytes] = []

    def read_on(conn: socket.socket) -> None:
        conn.settimeout(1.0)
        data = b""
        try:
            while chunk := conn.recv(4096):
                data += chunk
        except TimeoutError:
            pass
        got.append(data)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close"
                     b"\r\n\r\nok\n")

    with listening(read_on) as port:
        yield port, got


# The plain path: the argument sent to the proxy in one piece; prints the answer's
# first line.
PLAIN_CLIENT = _client("""
s = proxy()
s.sendall(unescaped(sys.argv[1]))
print(drain(s).split(b"\\r\\n")[0].decode())
""")


def test_a_request_sent_behind_the_first_never_reaches_the_origin(
        project: Path, lenient: tuple[int, list[bytes]]) -> None:
    """A body of the length the head says goes on, and nothing after it: a second
    request behind the first (to another host) would be read by a lenient origin."""
    port, got = lenient
    smuggled = (f"POST http://127.0.0.1:{port}/a HTTP/1.1\\r\\nHost: x\\r\\n"
                "Content-Length: 3\\r\\n\\r\\nabc"
                "GET http://evil.example/ HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n")
    chunked = (f"POST http://127.0.0.1:{port}/a HTTP/1.1\\r\\nHost: x\\r\\n"
               "Transfer-Encoding: chunked\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n\\r\\n")
    two = (f"POST http://127.0.0.1:{port}/a HTTP/1.1\\r\\nContent-Length: 1\\r\\n"
           "Content-Length: 40\\r\\n\\r\\nx")
    with Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", PLAIN_CLIENT, smuggled])
        c = s.run(["/usr/bin/python3", "-I", "-c", PLAIN_CLIENT, chunked])
        t = s.run(["/usr/bin/python3", "-I", "-c", PLAIN_CLIENT, two])
    assert r.stdout == b"HTTP/1.1 200 OK\n", out(r)
    assert c.stdout == b"HTTP/1.1 411 Length Required\n", out(c)
    assert t.stdout == b"HTTP/1.1 400 Bad Request\n", out(t)
    assert len(got) == 1
    head, _, body = got[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /a HTTP/1.1\r\nHost: 127.0.0.1:")
    assert body == b"abc"


# The box's client: N connections to the proxy held open without a word, then what
# each was told (a 503 line, or nothing yet).
HOARD = _client("""
held = [proxy() for _ in range(int(sys.argv[1]))]
time.sleep(1.0)
told = 0
for s in held:
    s.setblocking(False)
    try:
        told += s.recv(100).startswith(b"HTTP/1.1 503 ")
    except BlockingIOError:
        pass
print(told)
""")


def test_a_box_cannot_take_every_descriptor_of_the_harness(project: Path, site: Path) -> None:
    """Connections beyond the proxy's bound get a 503 at once (each held one costs the
    harness's process a descriptor); when they close, requests go through again."""
    from sandbox.network.proxy import MAX_CLIENTS

    with serving(site) as port, Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", HOARD, str(MAX_CLIENTS + 12)])
        after = s.run([*CURL, f"http://127.0.0.1:{port}/hello.txt"])
    assert r.stdout == b"12\n", out(r)
    assert after.stdout == b"hello from the origin\n", out(after)
