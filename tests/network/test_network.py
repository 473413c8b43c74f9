"""``[sandbox] network`` as an allow-list: the session's proxy, tried for real.

Every origin here is a real HTTP server the test starts on 127.0.0.1, listed by
address; the box reaches it only through the session's proxy (the box's own loopback is
another one). Root and plain user alike.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.origin import free_port, listening, serving, serving_tls

from sandbox.network import allow
from sandbox.network.box import BOX_SOCKET, PROXY_PORT, no_proxy, proxy_env
from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(120)]

CURL = ["curl", "-sS", "--max-time", "20"]
# pip reads only the index the test names (not the machine's pip.conf).
ALONE = {"PIP_CONFIG_FILE": "/dev/null"}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the origin\n")
    with serving(root) as port:
        yield root, port


def listed(*entries: str) -> SandboxSettings:
    return SandboxSettings(network=tuple(entries), hide_defaults=False)


def out(r: RunResult) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


# -- the list as written -------------------------------------------------------------


@pytest.mark.parametrize(("text", "host", "suffix", "ports"), [
    ("pypi.org", "pypi.org", False, (80, 443)),
    ("PyPI.org.", "pypi.org", False, (80, 443)),
    ("*.npmjs.org", "npmjs.org", True, (80, 443)),
    ("github.com:443", "github.com", False, (443,)),
    ("127.0.0.1:8080", "127.0.0.1", False, (8080,)),
    ("[::1]:8080", "::1", False, (8080,)),
])
def test_entries_parse(text: str, host: str, suffix: bool, ports: tuple[int, ...]) -> None:
    e = allow.parse(text)
    assert (e.host, e.suffix, e.ports) == (host, suffix, ports)


@pytest.mark.parametrize("text", ["", "pypi.org:0", "pypi.org:99999", "::1", "[::1",
                                  "*.127.0.0.1", "-bad.org", "a..b", "http://x.org",
                                  "[127.0.0.1]", "1.2.3"])
def test_malformed_entries_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        allow.parse(text)


def test_a_suffix_matches_names_below_it_only() -> None:
    entries = allow.parse_all(["*.npmjs.org", "pypi.org:443"])
    assert allow.match(entries, "registry.npmjs.org", 443) is not None
    assert allow.match(entries, "npmjs.org", 443) is None
    assert allow.match(entries, "evilnpmjs.org", 443) is None
    assert allow.match(entries, "pypi.org", 443) is not None
    assert allow.match(entries, "pypi.org", 80) is None
    assert allow.match(entries, "files.pypi.org", 443) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.0.1",
                                     "169.254.169.254", "::1", "fd00::1", "fe80::1",
                                     "::ffff:127.0.0.1", "0.0.0.0", "100.64.0.1"])
def test_addresses_that_are_not_global_need_a_literal_entry(address: str) -> None:
    import ipaddress

    named = allow.parse("example.org")
    assert allow.forbidden(ipaddress.ip_address(address), named, ()) is not None
    literal = allow.parse(f"[{address}]" if ":" in address else address)
    assert allow.forbidden(ipaddress.ip_address(address), literal, ()) is None


def test_the_machines_own_address_needs_a_literal_entry() -> None:
    import ipaddress

    own = (ipaddress.ip_address("8.8.4.4"),)
    assert allow.forbidden(own[0], allow.parse("example.org"), own) == \
        "8.8.4.4 is an address of this machine"


def test_the_box_environment_points_every_client_at_the_proxy() -> None:
    env = proxy_env(("127.0.0.1:9", "pypi.org"))
    url = f"http://127.0.0.1:{PROXY_PORT}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy", "npm_config_proxy", "npm_config_https_proxy"):
        assert env[name] == url
    # A listed loopback address is the host's: it goes to the proxy, not around it.
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,::1"
    assert no_proxy(()) == "localhost,127.0.0.1,::1"


# -- through the proxy, for real -----------------------------------------------------


def test_a_listed_origin_is_reached_and_another_port_refused(
        project: Path, site: tuple[Path, int]) -> None:
    _, port = site
    other = free_port()
    with Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        ok = s.run([*CURL, f"http://127.0.0.1:{port}/hello.txt"])
        refused = s.run([*CURL, "-w", "%{http_code}", f"http://127.0.0.1:{other}/"])
        again = s.run([*CURL, f"http://127.0.0.1:{other}/x"])
    assert ok.returncode == 0 and ok.stdout == b"hello from the origin\n", out(ok)
    assert ok.refused == ()
    body = refused.stdout.decode()
    assert body.endswith("403"), body
    assert f"the box may not reach 127.0.0.1 port {other}" in body
    assert "[sandbox] network" in body
    assert refused.refused == (("127.0.0.1", other, "not on the [sandbox] network list"),)
    assert again.refused == (("127.0.0.1", other, "not on the [sandbox] network list"),)
    # Said once per host at the end, however many times it was refused.
    lines = [w for w in s.warnings if w.startswith("network:")]
    assert lines == [f"network: the box was refused 127.0.0.1 (port {other}, 2 times): not "
                     "on the [sandbox] network list; to allow it, add "
                     f'"127.0.0.1:{other}" to [sandbox] network']


def test_https_goes_through_connect_to_listed_ports_only(
        project: Path, site: tuple[Path, int], tmp_path: Path) -> None:
    root, _ = site
    other = free_port()
    keys = tmp_path / "keys"
    keys.mkdir()
    with serving_tls(root, keys) as tls, \
            Session.open(str(project), listed(f"127.0.0.1:{tls.port}")) as s:
        tunnel = s.run([*CURL, "-k", f"https://127.0.0.1:{tls.port}/hello.txt"])
        shut = s.run([*CURL, "-k", f"https://127.0.0.1:{other}/"])
    assert tunnel.stdout == b"hello from the origin\n", out(tunnel)
    assert tls.names == [None]  # curl names no server for an address
    assert shut.returncode != 0
    assert "403" in out(shut)
    assert shut.refused == (("127.0.0.1", other, "not on the [sandbox] network list"),)


def test_a_listed_name_that_resolves_to_loopback_reaches_nothing(
        project: Path, site: tuple[Path, int]) -> None:
    _, port = site
    with Session.open(str(project), listed(f"localhost:{port}")) as s:
        r = s.run([*CURL, "-x", f"http://127.0.0.1:{PROXY_PORT}", "-w", "%{http_code}",
                   f"http://localhost:{port}/hello.txt"])
    assert r.stdout.decode().endswith("403"), out(r)
    assert "hello from the origin" not in out(r)
    (host, got_port, why), = r.refused
    assert (host, got_port) == ("localhost", port)
    assert "loopback address" in why


def test_nothing_leaves_the_box_around_the_proxy(project: Path,
                                                 site: tuple[Path, int]) -> None:
    _, port = site
    direct = (
        "import socket, sys\n"
        "def tcp(addr):\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=3).close(); return 'connected'\n"
        "    except OSError as e: return type(e).__name__\n"
        "def udp():\n"
        "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    try: s.sendto(b'x', ('1.1.1.1', 53)); return 'sent'\n"
        "    except OSError as e: return type(e).__name__\n"
        "def dns():\n"
        "    try: socket.getaddrinfo('pypi.org', 443); return 'resolved'\n"
        "    except OSError as e: return type(e).__name__\n"
        f"print(tcp(('127.0.0.1', {port})), tcp(('1.1.1.1', 443)), udp(), dns())\n"
    )
    with Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        ignoring = s.run([*CURL, "--noproxy", "*", f"http://127.0.0.1:{port}/hello.txt"])
        raw = s.run(["/usr/bin/python3", "-I", "-c", direct])
        links = s.run(["cat", "/proc/net/dev"])
    assert ignoring.returncode != 0 and b"hello" not in ignoring.stdout
    # The box's own loopback has no such server; nothing else is routed; no DNS.
    words = raw.stdout.decode().split()
    assert words[0] == "ConnectionRefusedError", out(raw)
    assert "connected" not in words and "sent" not in words and "resolved" not in words
    names = [line.split(":")[0].strip() for line in links.stdout.decode().splitlines()[2:]]
    assert names == ["lo"]


def test_the_proxy_socket_is_the_users_alone_and_ends_with_the_session(
        project: Path) -> None:
    with Session.open(str(project), listed("pypi.org")) as s:
        assert s.network is not None
        path = s.network.proxy.path
        folder = os.stat(os.path.dirname(path))
        sock = os.stat(path)
        assert stat.S_ISSOCK(sock.st_mode)
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
        assert stat.S_IMODE(sock.st_mode) == 0o600
        seen = s.run(["stat", "-c", "%F", BOX_SOCKET])
        assert seen.stdout.strip() == b"socket", out(seen)
        thread = s.network.proxy._thread
    assert not os.path.exists(os.path.dirname(path))
    assert not thread.is_alive()
    with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as c:
        c.connect(path)


def test_fifty_parallel_downloads_lose_nothing(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    digests = {}
    for i in range(5):
        data = os.urandom(256 * 1024 + i)
        (root / f"f{i}").write_bytes(data)
        digests[f"f{i}"] = hashlib.sha256(data).hexdigest()
    script = (
        "import hashlib, json, sys, urllib.request\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "base = sys.argv[1]\n"
        "def get(i):\n"
        "    name = f'f{i % 5}'\n"
        "    with urllib.request.urlopen(f'{base}/{name}', timeout=60) as r:\n"
        "        return name, hashlib.sha256(r.read()).hexdigest()\n"
        "with ThreadPoolExecutor(50) as pool:\n"
        "    print(json.dumps(list(pool.map(get, range(50)))))\n"
    )
    with serving(root) as port, Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["/usr/bin/python3", "-I", "-c", script, f"http://127.0.0.1:{port}"],
                  timeout=90)
    assert r.returncode == 0, out(r)
    got = json.loads(r.stdout)
    assert len(got) == 50
    assert all(digests[name] == digest for name, digest in got)


def _wheel(index: Path) -> None:
    """A package index with one small wheel, as a static folder."""
    name = "demo_pkg-1.0-py3-none-any.whl"
    info = "demo_pkg-1.0.dist-info"
    with zipfile.ZipFile(index / name, "w") as z:
        z.writestr("demo_pkg/__init__.py", "")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    page = index / "simple" / "demo-pkg"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<html><body><a href="../../{name}">{name}</a>'
                                     "</body></html>\n")


def test_pip_downloads_from_a_listed_index_and_not_from_another(
        project: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    _wheel(index)
    with serving(index) as port:
        pip = [sys.executable, "-I", "-m", "pip", "download", "--no-deps", "--no-cache-dir",
               "--disable-pip-version-check", "--retries", "0", "--timeout", "20",
               "--index-url", f"http://127.0.0.1:{port}/simple", "--trusted-host",
               "127.0.0.1", "-d", "/tmp/dl", "demo-pkg"]
        with Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
            got = s.run(pip, timeout=90, env_extra=ALONE)
            files = s.run(["ls", "/tmp/dl"])
        # The box's own 127.0.0.1 is reached directly (NO_PROXY); another loopback
        # address, unlisted, goes to the proxy, which refuses it.
        other = [a.replace("127.0.0.1", "127.0.0.2") for a in pip]
        with Session.open(str(project), listed("pypi.org")) as s:
            refused = s.run(other, timeout=90, env_extra=ALONE)
    assert got.returncode == 0, out(got)
    assert files.stdout == b"demo_pkg-1.0-py3-none-any.whl\n"
    assert refused.returncode != 0
    assert "No matching distribution found for demo-pkg" in out(refused), out(refused)
    assert refused.refused[0][:2] == ("127.0.0.2", port)
    assert any(w.startswith("network: the box was refused 127.0.0.2") for w in s.warnings)


def test_git_clones_through_the_proxy(project: Path, tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    work = tmp_path / "work"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "README").write_text("cloned through the proxy\n")
    subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(served / "repo.git")],
                   check=True)
    subprocess.run(["git", "-C", str(served / "repo.git"), "update-server-info"], check=True)
    with serving(served) as port, Session.open(str(project), listed(f"127.0.0.1:{port}")) as s:
        r = s.run(["sh", "-c", f"git clone -q http://127.0.0.1:{port}/repo.git /tmp/c && "
                   "cat /tmp/c/README"], timeout=90)
    assert r.returncode == 0, out(r)
    assert r.stdout == b"cloned through the proxy\n"


def test_without_a_list_the_box_has_no_proxy(project: Path) -> None:
    with Session.open(str(project), SandboxSettings(hide_defaults=False)) as s:
        assert s.network is None
        r = s.run(["sh", "-c", "echo ${HTTP_PROXY:-none}; test -e " + BOX_SOCKET
                   + " && echo socket || echo no-socket"])
    assert r.stdout == b"none\nno-socket\n"


# -- said by doctor and audit --------------------------------------------------------


def test_doctor_and_audit_say_the_network_mode(tmp_path: Path, project: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[sandbox]\nnetwork = ["pypi.org", "*.npmjs.org"]\n')
    env = {**os.environ, "HARNESS_HOME": str(tmp_path)}
    cli = [sys.executable, "-I", "-m", "launchers"]
    doctor = subprocess.run([*cli, "doctor", "--json"], capture_output=True, text=True,
                            env=env, cwd=project)
    assert json.loads(doctor.stdout)["network"] == {"mode": "allow-list",
                                                    "allow": ["pypi.org", "*.npmjs.org"]}
    text = subprocess.run([*cli, "doctor"], capture_output=True, text=True, env=env,
                          cwd=project)
    assert "network: allow-list through the session's proxy: pypi.org, *.npmjs.org\n" \
        in text.stderr
    audit = subprocess.run([*cli, "audit", "--json", "--config", str(cfg), "--project",
                            str(project)], capture_output=True, text=True, env=env)
    assert json.loads(audit.stdout)["network"]["mode"] == "allow-list", audit.stderr
    plain = tmp_path / "plain.toml"
    plain.write_text("")
    audit = subprocess.run([*cli, "audit", "--json", "--config", str(plain), "--project",
                            str(project)], capture_output=True, text=True, env=env)
    assert json.loads(audit.stdout)["network"] == {"mode": "none", "allow": None}


def test_a_platform_without_a_box_for_the_list_refuses_it(project: Path) -> None:
    from sandbox.dispatch import choose
    from sandbox.errors import SandboxUnavailable
    from sandbox.policy import Policy

    policy = Policy.from_settings(str(project), listed("pypi.org"), private_tmp="/nonexistent",
                                  platform="freebsd14")
    box = choose(policy)
    with pytest.raises(SandboxUnavailable, match="has no box on freebsd14"):
        box.proxy()
    assert box.network is None


# -- the macOS box: the proxy on 127.0.0.1, one port in its profile ------------------


def _recording(heads: list[bytes]) -> Callable[[socket.socket], None]:
    """An origin's answer to a connection: its request head kept in ``heads``."""
    def answer(conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and (got := conn.recv(4096)):
            head += got
        heads.append(head)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    return answer


def test_a_box_on_the_hosts_network_gets_the_proxy_on_a_loopback_port(
        project: Path, site: tuple[Path, int]) -> None:
    # The proxy itself is the same on every platform: tried for real here, from the
    # host, as the macOS box's clients reach it. The box's policy, and so its profile,
    # then names the proxy's port.
    from sandbox.dispatch import choose
    from sandbox.policy import Policy

    _, port = site
    heads: list[bytes] = []
    with listening(_recording(heads)) as seen:
        policy = Policy.from_settings(str(project),
                                      listed(f"127.0.0.1:{port}", f"127.0.0.1:{seen}"),
                                      private_tmp="/nonexistent", platform="darwin")
        box = choose(policy)
        net = box.proxy()
        assert net is not None and net.port > 0 and net.proxy.path == ""
        assert box.policy.proxy_port == net.port
        token = box.policy.proxy_token
        assert len(token) >= 24 and token == net.proxy.token
        proxy = f"http://box:{token}@127.0.0.1:{net.port}"
        assert box.backend.plan(["/usr/bin/true"]).env["HTTPS_PROXY"] == proxy
        other = free_port()
        try:
            ok = subprocess.run([*CURL, "-x", proxy, f"http://127.0.0.1:{port}/hello.txt"],
                                capture_output=True)
            passed = subprocess.run([*CURL, "-x", proxy, f"http://127.0.0.1:{seen}/x"],
                                    capture_output=True)
            tunnel = subprocess.run([*CURL, "-x", proxy, "-p",
                                     f"http://127.0.0.1:{port}/hello.txt"], capture_output=True)
            no = subprocess.run([*CURL, "-x", proxy, "-w", "%{http_code}",
                                 f"http://127.0.0.1:{other}/"], capture_output=True)
            # Another local user reaches the port, not the proxy: no password, a wrong one
            # (of the same length), another scheme, or a tunnel asked for without one.
            bare, wrong, bearer = (subprocess.run(
                [*CURL, "-x", f"http://127.0.0.1:{net.port}", *how, "-i",
                 f"http://127.0.0.1:{port}/hello.txt"], capture_output=True) for how in (
                    [], ["-U", f"box:{token[::-1]}"],
                    ["-H", f"Proxy-Authorization: Bearer {token}"]))
            connect = subprocess.run([*CURL, "-x", f"http://127.0.0.1:{net.port}", "-p", "-v",
                                      f"http://127.0.0.1:{port}/hello.txt"],
                                     capture_output=True)
        finally:
            net.close()  # each refusal recorded by then (after the answer it sent)
    report = net.report()
    assert ok.stdout == b"hello from the origin\n"
    # The password is the proxy's: the origin never sees it.
    assert passed.stdout == b"ok\n", passed
    assert len(heads) == 1 and b"proxy-authorization" not in heads[0].lower(), heads
    assert token.encode() not in heads[0]
    assert tunnel.returncode != 0  # clear HTTP in a tunnel: refused after the password
    assert no.stdout.endswith(b"403")
    for r in (bare, wrong, bearer):
        assert r.stdout.startswith(b"HTTP/1.1 407 Proxy Authentication Required\r\n"), r
        assert b'\r\nProxy-Authenticate: Basic realm="harness-sandbox"\r\n' in r.stdout
        assert r.stdout.endswith(b"\r\n\r\nharness-sandbox: the proxy asks for the "
                                 b"password in the box's proxy variables.\n"), r
    assert b"< HTTP/1.1 407 Proxy Authentication Required" in connect.stderr, connect
    # Said once for all the hosts they named, which another local user chooses.
    assert net.proxy.since(0) == (
        ("127.0.0.1", port, "clear HTTP inside a CONNECT tunnel"),
        ("127.0.0.1", other, "not on the [sandbox] network list"),
        *[("", 0, "asked without the proxy's password (by a client that ignores it, or "
           "by another local user)")] * 4)
    assert report[-1] == (
        "network: the proxy refused 4 requests without its password (from a client that "
        "ignores it, or from another local user); use a client that sends the user and "
        "password of the box's proxy URL (HTTPS_PROXY)")


def test_the_macos_profile_opens_only_the_proxys_port(project: Path, tmp_path: Path) -> None:
    from sandbox.macos.seatbelt import plan
    from sandbox.policy import Policy

    base = Policy.from_settings(str(project), listed("pypi.org"), private_tmp=str(tmp_path),
                                platform="darwin")
    with_proxy = plan(base._replace(proxy_port=40123), ["/usr/bin/true"])
    text = with_proxy.argv[2]
    assert '(allow network-outbound (remote ip "localhost:40123"))' in text
    assert "(allow network-outbound)\n" not in text  # not the whole network
    assert with_proxy.env["HTTPS_PROXY"] == with_proxy.env["http_proxy"] == \
        "http://127.0.0.1:40123"
    none = plan(Policy.from_settings(str(project), SandboxSettings(), private_tmp=str(tmp_path),
                                     platform="darwin"), ["/usr/bin/true"])
    assert "remote ip" not in none.argv[2] and "HTTPS_PROXY" not in none.env
