"""``[sandbox] allow_unix_sockets`` in the Linux box: a real bwrap box, a real listening
socket under /run, and the variable that names it.

/run is an empty tmpfs in the box (test_isolation.py shows a socket there cannot be
reached); an allowed socket is shown again, and ``SSH_AUTH_SOCK`` reaches the box only
then. /run itself is root's; /run/lock is open to every user, so both users run these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.unix_server import UnixServer

from launchers.config import SandboxSettings
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = pytest.mark.isolation

PY = sys.executable


class Server(UnixServer):
    """A Unix socket under /run that answers ``hello`` to each connection."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(dir="/run" if os.geteuid() == 0 else "/run/lock",
                                         prefix="hs-sock-"))
        super().__init__(self.dir / "agent.sock")

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


CONNECT = ("import os, socket\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "s.connect(os.environ.get('SSH_AUTH_SOCK') or {path!r})\n"
           "print(s.recv(6).decode(), end='')\n")


def run_in_box(tmp_path: Path, server: Server, allowed: tuple[str, ...],
               code: str | None = None) -> RunResult:
    project = tmp_path / "p"
    project.mkdir(exist_ok=True)
    env = dict(os.environ, SSH_AUTH_SOCK=server.path)
    settings = SandboxSettings(hide_defaults=False, allow_unix_sockets=allowed)
    with Session.open(str(project), settings, env=env) as session:
        return session.run([PY, "-c", code or CONNECT.format(path=server.path)], timeout=30)


NAMED = "import os; print(os.environ.get('SSH_AUTH_SOCK'), end='')"


def test_an_allowed_socket_under_run_is_reached_and_named(tmp_path: Path,
                                                          server: Server) -> None:
    r = run_in_box(tmp_path, server, (server.path,))
    assert r.ok, r
    assert r.stdout == b"hello\n"
    assert server.seen == 1
    assert run_in_box(tmp_path, server, (server.path,), NAMED).stdout == server.path.encode()


def test_an_allowed_folder_of_sockets_under_run_is_reached(tmp_path: Path,
                                                           server: Server) -> None:
    r = run_in_box(tmp_path, server, (str(server.dir),))
    assert r.ok, r
    assert r.stdout == b"hello\n"


def test_a_socket_not_allowed_is_neither_named_nor_reached(tmp_path: Path,
                                                           server: Server) -> None:
    # The same program: SSH_AUTH_SOCK is gone, and the path itself is not there.
    r = run_in_box(tmp_path, server, ())
    assert r.returncode != 0, r
    assert b"FileNotFoundError" in r.stderr
    assert server.seen == 0
    assert run_in_box(tmp_path, server, (), NAMED).stdout == b"None"


def test_an_allowed_socket_cannot_be_replaced_from_the_box(tmp_path: Path,
                                                           server: Server) -> None:
    project = tmp_path / "p"
    project.mkdir()
    settings = SandboxSettings(hide_defaults=False, allow_unix_sockets=(str(server.dir),))
    with Session.open(str(project), settings) as session:
        r = session.run(["sh", "-c", f"rm -f {server.path}; touch {server.dir}/planted"],
                        timeout=30)
    assert r.returncode != 0, r
    assert os.path.exists(server.path)
    assert not os.path.exists(server.dir / "planted")
    # Host side: the service still answers.
    out = subprocess.run([PY, "-c", CONNECT.format(path=server.path)], capture_output=True,
                         env=dict(os.environ, SSH_AUTH_SOCK=server.path), timeout=30)
    assert out.stdout == b"hello\n"
