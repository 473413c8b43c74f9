"""With an allow-list, the box's own loopback is the box's: a server a run starts on
127.0.0.1 is reached by its clients in the same run, not sent to the proxy (which
would refuse it: the box's 127.0.0.1 is not the host's). Real box, real clients."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from sandbox.network.box import proxy_env
from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(180)]

LISTED = SandboxSettings(network=("example.org",), hide_defaults=False)

# Starts a static server on the box's own 127.0.0.1, waits for it, runs the clients.
SERVE = """
cd "$1" && python3 -m http.server "$2" --bind 127.0.0.1 >/dev/null 2>&1 &
for i in $(seq 100); do
  python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $2), 1)" \
    2>/dev/null && break
  sleep 0.1
done
shift 2
"$@"
"""


def out(r: RunResult) -> str:
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def _served(tmp: Path) -> Path:
    site = tmp / "site"
    (site / "demo-pkg").mkdir(parents=True)
    (site / "hello.txt").write_text("hello from the box's own server\n")
    info = "demo_pkg-1.0.dist-info"
    with zipfile.ZipFile(site / "demo-pkg" / "demo_pkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr("demo_pkg/__init__.py", "")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return site


def _in_box(project: Path, *client: str, port: int) -> RunResult:
    site = _served(project)
    with Session.open(str(project), LISTED) as s:
        return s.run(["sh", "-c", SERVE, "serve", str(site), str(port), *client],
                     timeout=120)


def test_curl_reaches_a_server_the_run_started_on_the_box_s_loopback(project: Path) -> None:
    r = _in_box(project, "curl", "-sS", "--max-time", "20",
                "http://127.0.0.1:18731/hello.txt", port=18731)
    assert r.returncode == 0, out(r)
    assert r.stdout == b"hello from the box's own server\n"


def test_python_reaches_it_by_localhost_through_the_proxy_variables(project: Path) -> None:
    r = _in_box(project, "python3", "-c",
                "import urllib.request as u;"
                "print(u.urlopen('http://localhost:18732/hello.txt', timeout=20).read())",
                port=18732)
    assert r.returncode == 0, out(r)
    assert b"hello from the box's own server" in r.stdout


def test_pip_downloads_from_an_index_the_run_serves_on_its_loopback(project: Path) -> None:
    # pip's own proxy setting (PIP_PROXY) would send every request to the proxy,
    # loopback too: the usual variables, with NO_PROXY, are what pip reads.
    r = _in_box(project, "env", "PIP_CONFIG_FILE=/dev/null", "/usr/bin/python3", "-m",
                "pip", "download", "--no-deps", "-q", "-d", "/tmp/got", "--index-url",
                "http://127.0.0.1:18733/", "demo-pkg", port=18733)
    assert r.returncode == 0, out(r)


def test_no_client_variable_sends_the_loopback_to_the_proxy() -> None:
    env = proxy_env(("example.org",))
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"
    assert env["npm_config_noproxy"] == env["NO_PROXY"]
    # A variable whose client ignores NO_PROXY has no place here.
    assert "PIP_PROXY" not in env
