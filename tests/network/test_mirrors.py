"""Mirrors: an allow-list entry marked private, and every refusal's fix applied as written.

Names are mapped here as a hosts file would (the proxy resolves in this process, through
``socket.getaddrinfo``); the origins are real servers on 127.0.0.1 and on an address of
this machine that is private or reserved (a mirror's kind). Each fix is taken from the
refusal's own words, written into a real config file, loaded as every command loads it,
and tried in a new session. Root and plain user alike.
"""

from __future__ import annotations

import functools
import http.server
import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from launchers import config
from launchers.errors import ConfigError
from sandbox.network import allow
from sandbox.network.box import PROXY_PORT
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(180)]

# Through the proxy even for 127.0.0.1, which NO_PROXY keeps for the box's own loopback.
CURL = ["curl", "-sS", "--max-time", "20", "-x", f"http://127.0.0.1:{PROXY_PORT}",
        "--noproxy", ""]
HELLO = b"hello from the mirror\n"
ADD = re.compile(r'add "([^"]+)" to \[sandbox\] network')
MARK = re.compile(r'write its entry as (\{ host = "([^"]+)", private = true \}) in '
                  r"\[sandbox\] network")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(root: Path, address: str) -> Iterator[int]:
    """Serve ``root`` over HTTP on ``address``; yields the port."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    server_class = type("Server", (http.server.ThreadingHTTPServer,),
                        {"address_family": family})
    server = server_class((address, 0), functools.partial(_Quiet, directory=str(root)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def private_own_address() -> str | None:
    """An address of this machine that is private or reserved and a name may lead to
    with the mark (not loopback, link-local, ...), IPv4 first; None on a machine that
    has none."""
    from sandbox.network.proxy import own_addresses

    found = [a for a in own_addresses() if not a.is_global and a not in allow.METADATA
             and not (a.is_loopback or a.is_link_local or a.is_multicast)]
    found.sort(key=lambda a: a.version)
    return str(found[0]) if found else None


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A hosts file for the proxy: a name put here resolves to its address alone."""
    table: dict[str, str] = {}
    real: Callable[..., Any] = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host in table:
            address = table[host]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            where = (address, int(port)) if family == socket.AF_INET else (address, int(port), 0, 0)
            return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", where)]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return table


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_bytes(HELLO)
    return root


def settings_from(tmp_path: Path, project: Path, entries: list[str]) -> Any:
    """The [sandbox] table of a real config file holding ``entries`` (TOML text)."""
    file = tmp_path / "home" / "config.toml"
    file.parent.mkdir(exist_ok=True)
    file.write_text("[sandbox]\nhide_defaults = false\nnetwork = ["
                    + ", ".join(entries) + "]\n")
    return config.load(str(file), project=str(project)).sandbox


def apply(entries: list[str], message: str) -> list[str]:
    """The fix a refusal's message gives, made to the list as the message writes it."""
    marked = MARK.search(message)
    if marked is not None:
        old = f'"{marked[2]}"'
        assert old in entries, (message, entries)
        return [marked[1] if e == old else e for e in entries]
    added = ADD.search(message)
    assert added is not None, f"no fix to apply in {message!r}"
    return [*entries, f'"{added[1]}"']


def fetch_until_reached(tmp_path: Path, project: Path, url: str, entries: list[str],
                        ) -> list[str]:
    """Fetch ``url`` in a new session per try, applying each refusal's fix (the 403's,
    the same as the session's end report) until it is reached; the refusals' reasons."""
    whys: list[str] = []
    for _ in range(4):
        with Session.open(str(project), settings_from(tmp_path, project, entries)) as s:
            r: RunResult = s.run([*CURL, url])
        if r.returncode == 0 and r.stdout == HELLO:
            return whys
        body = r.stdout.decode(errors="replace")
        assert "403" not in body or body.startswith("harness-sandbox: the box may not"), body
        assert len(r.refused) == 1, (entries, r.returncode, body, r.stderr)
        (_, _, why), = r.refused
        whys.append(why)
        report = [w for w in s.warnings if w.startswith("network:")]
        assert len(report) == 1, s.warnings
        assert apply(entries, report[0]) == apply(entries, body), (report, body)
        entries = apply(entries, body)
    raise AssertionError(f"still refused after the fixes: {whys}")


# -- each refusal's fix, applied and retried -----------------------------------------


def test_a_mirror_on_a_private_address_is_reached_by_following_the_fixes(
        tmp_path: Path, project: Path, site: Path, names: dict[str, str]) -> None:
    address = private_own_address()
    if address is None:
        pytest.skip("this machine has no private or reserved address to serve a mirror on")
    names["mirror.corp.test"] = address
    with serving(site, address) as port:
        whys = fetch_until_reached(tmp_path, project, f"http://mirror.corp.test:{port}/"
                                   "hello.txt", ['"pypi.org"'])
    assert whys[0] == "not on the [sandbox] network list"
    assert whys[1] in (f"its address {address} is an address of this machine",
                       f"its address {address} is a private or reserved address")
    assert len(whys) == 2


def test_an_address_not_listed_is_reached_by_following_the_fix(
        tmp_path: Path, project: Path, site: Path) -> None:
    with serving(site, "127.0.0.1") as port:
        whys = fetch_until_reached(tmp_path, project, f"http://127.0.0.1:{port}/hello.txt",
                                   ['"pypi.org"'])
    assert whys == ["not on the [sandbox] network list"]


def test_a_name_for_loopback_is_reached_by_following_the_fixes(
        tmp_path: Path, project: Path, site: Path, names: dict[str, str]) -> None:
    names["here.corp.test"] = "127.0.0.1"
    with serving(site, "127.0.0.1") as port:
        whys = fetch_until_reached(tmp_path, project, f"http://here.corp.test:{port}/"
                                   "hello.txt", ['"pypi.org"'])
    # The mark does not open loopback: its fix is the address itself.
    assert whys == ["not on the [sandbox] network list",
                    "its address 127.0.0.1 is a loopback address"]


def test_a_marked_name_still_does_not_reach_loopback(
        tmp_path: Path, project: Path, site: Path, names: dict[str, str]) -> None:
    names["here.corp.test"] = "127.0.0.1"
    with serving(site, "127.0.0.1") as port:
        entries = [f'{{ host = "here.corp.test:{port}", private = true }}']
        with Session.open(str(project), settings_from(tmp_path, project, entries)) as s:
            r = s.run([*CURL, f"http://here.corp.test:{port}/hello.txt"])
    assert HELLO not in r.stdout
    assert r.refused == (("here.corp.test", port, "its address 127.0.0.1 is a loopback "
                          "address"),)
    assert f'add "127.0.0.1:{port}" to [sandbox] network' in r.stdout.decode()


# A tunnel to 127.0.0.1:PORT whose TLS hello names the server argv[2]; prints the
# origin's status line, or how the tunnel ended.
TLS_CLIENT = f"""
import socket, ssl, sys
s = socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=20)
s.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % sys.argv[1].encode())
head = b""
while not head.endswith(b"\\r\\n\\r\\n"):
    head += s.recv(1)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    t = ctx.wrap_socket(s, server_hostname=sys.argv[2])
    t.sendall(b"GET /hello.txt HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    print(t.recv(4096).split(b"\\r\\n")[0].decode())
except (OSError, ssl.SSLError) as err:
    print("ended:", type(err).__name__)
"""


def test_a_name_in_a_tls_hello_is_reached_by_following_the_fix(
        tmp_path: Path, project: Path, site: Path) -> None:
    from helpers.origin import serving_tls

    keys = tmp_path / "keys"
    keys.mkdir()
    with serving_tls(site, keys) as tls:
        entries = [f'"127.0.0.1:{tls.port}"']
        ran = []
        for _ in range(2):
            settings = settings_from(tmp_path, project, entries)
            with Session.open(str(project), settings) as s:
                ran.append(s.run(["/usr/bin/python3", "-I", "-c", TLS_CLIENT,
                                  str(tls.port), "mirror.corp.test"]))
            report = [w for w in s.warnings if w.startswith("network:")]
            if report:
                entries = apply(entries, report[0])
    assert ran[0].stdout.startswith(b"ended:"), ran[0]
    assert ran[0].refused[0][:2] == ("mirror.corp.test", tls.port)
    assert ran[1].stdout == b"HTTP/1.0 200 OK\n", ran[1]
    assert ran[1].refused == ()


# -- the mark, as the list decides ---------------------------------------------------


@pytest.mark.parametrize("address", ["10.1.2.3", "192.168.0.1", "172.16.0.1", "100.64.0.1",
                                     "203.0.113.7", "192.0.2.9", "fd00::1"])
def test_a_marked_name_reaches_private_and_reserved_addresses(address: str) -> None:
    a = ipaddress.ip_address(address)
    assert allow.forbidden(a, allow.parse("npm.corp.test"), ()) is not None
    assert allow.forbidden(a, allow.parse("npm.corp.test (private)"), (a,)) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1",
                                     "169.254.169.254", "fd00:ec2::254", "fe80::1",
                                     "0.0.0.0", "::", "224.0.0.1"])
def test_the_mark_never_opens_loopback_metadata_or_link_local(address: str) -> None:
    a = ipaddress.ip_address(address)
    assert allow.forbidden(a, allow.parse("npm.corp.test (private)"), ()) is not None
    assert "private = true" not in allow.fix(a, allow.parse("npm.corp.test"), 443)


def test_the_machines_own_global_address_stays_refused_with_the_mark() -> None:
    own = ipaddress.ip_address("8.8.4.4")
    assert allow.forbidden(own, allow.parse("npm.corp.test (private)"), (own,)) == \
        "8.8.4.4 is an address of this machine"


def test_a_listed_address_lets_a_name_for_it_through_on_its_port_only() -> None:
    a = ipaddress.ip_address("127.0.0.1")
    listed = allow.parse_all(["here.test:8080", "127.0.0.1:8080"])
    assert allow.forbidden(a, listed[0], (), listed=listed, port=8080) is None
    assert allow.forbidden(a, listed[0], (), listed=listed, port=8081) is not None


# -- the config's form and its errors ------------------------------------------------


def test_the_table_form_loads_beside_plain_strings(tmp_path: Path, project: Path) -> None:
    s = settings_from(tmp_path, project, ['"pypi.org"', '{ host = "npm.corp.test:4873", '
                                          'private = true }', '{ host = "a.test" }'])
    assert s.network == ("pypi.org", "npm.corp.test:4873 (private)", "a.test")
    assert [allow.parse(e).private for e in s.network] == [False, True, False]


@pytest.mark.parametrize(("entry", "said", "fixed"), [
    ('"npm.corp.test (private)"', 'write "npm.corp.test (private)" as '
     '{ host = "npm.corp.test", private = true }', '{ host = "npm.corp.test", private = true }'),
    ('{ host = "10.0.0.5", private = true }', "list it as a plain string", '"10.0.0.5"'),
])
def test_a_config_error_names_the_key_and_its_fix_works(
        tmp_path: Path, project: Path, entry: str, said: str, fixed: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from(tmp_path, project, ['"pypi.org"', entry])
    assert '[sandbox]: key "network": element 2' in str(err.value)
    assert said in str(err.value)
    assert settings_from(tmp_path, project, ['"pypi.org"', fixed]).network[1] != entry


@pytest.mark.parametrize(("entry", "said"), [
    ('{ host = "a.test", privat = true }', 'unknown key "privat"'),
    ('{ private = true }', '"host" must be a host name or *.name (missing)'),
    ('{ host = "a.test", private = "yes" }', '"private" must be true or false'),
    ('{ host = "http://a.test", private = true }', "'http://a.test' is a URL or a path"),
    ("3", "element 1 must be a string, not an integer"),
])
def test_a_malformed_table_entry_is_refused(tmp_path: Path, project: Path, entry: str,
                                            said: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from(tmp_path, project, [entry])
    assert said in str(err.value), str(err.value)
