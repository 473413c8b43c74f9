"""Fixtures of the workload tests (:mod:`helpers.workloads`): the fixture projects,
made once per test session (``plain``: sources, a Makefile, a Python package with its
wheel, a Node package, an archive of another owner; ``repo``: the same, a git
repository with two commits), a server on the host's loopback for the network boundary,
and :func:`compare`, which runs a workload bare once and boxed through an entry point."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.workloads import Ran, Workload, base_env, check, run_in

C_MAIN = """#include <stdio.h>
#include "util.h"
int main(void) { printf("hello from C: %d\\n", add(40, 2)); return 0; }
"""
C_UTIL = "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n"
MAKEFILE = """CFLAGS = -O2 -Wall
OBJS = build/main.o build/util.o
hello: $(OBJS)
\t$(CC) -o $@ $(OBJS)
build/%.o: src/%.c src/util.h | build
\t$(CC) $(CFLAGS) -c -o $@ $<
build:
\tmkdir -p build
clean:
\trm -rf build hello
.PHONY: clean
"""
PY_INIT = 'def greet():\n    return "hello from a wheel"\n'
SETUP = 'from setuptools import setup\nsetup(name="hello", version="1.0", packages=["hello"])\n'
UNIT = """import unittest

class Sums(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(1 + 1, 2)

    def test_joins(self):
        self.assertEqual("-".join("ab"), "a-b")
"""
# A loopback HTTP server of the run's own: its port in port.txt once it listens.
SERVER = """import http.server, socketserver
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
with socketserver.TCPServer(("127.0.0.1", 0), Quiet) as s:
    with open("port.tmp", "w") as f:
        f.write(str(s.server_address[1]))
    import os
    os.rename("port.tmp", "port.txt")
    s.serve_forever()
"""
NODE_PKG = '{"name": "nodepkg", "version": "1.0.0", "main": "index.js"}\n'
NODE_APP = '{"name": "app", "version": "1.0.0", "private": true}\n'
NOTES = "alpha foo\nbeta\nfoo gamma\n# TODO: tidy\n"
DATE = "2020-01-01T00:00:00Z"


def _wheel(path: Path) -> None:
    """``hello-1.0-py3-none-any.whl``, byte for byte the same each time."""
    files = {
        "hello/__init__.py": PY_INIT.encode(),
        "hello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: hello\nVersion: 1.0\n",
        "hello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\n"
                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.write(f"{name},sha256={digest.decode()},{len(data)}\n")
    record.write("hello-1.0.dist-info/RECORD,,\n")
    files["hello-1.0.dist-info/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)


def _owned_archive(path: Path) -> None:
    """``owned.tar``: a folder and a file of uid and gid 1234 (nobody's here)."""
    with tarfile.open(path, "w") as t:
        for name, kind in (("owned", tarfile.DIRTYPE), ("owned/f.txt", tarfile.REGTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.uid, info.gid, info.mtime = kind, 1234, 1234, 1577836800
            info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
            data = b"owned by 1234\n" if kind == tarfile.REGTYPE else b""
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def _plain(root: Path) -> None:
    files = {
        "notes.txt": NOTES, "src/main.c": C_MAIN, "src/util.c": C_UTIL,
        "src/util.h": "int add(int a, int b);\n", "Makefile": MAKEFILE,
        "pkgsrc/setup.py": SETUP, "pkgsrc/hello/__init__.py": PY_INIT,
        "checks/test_sums.py": UNIT, "server.py": SERVER,
        "nodepkg/package.json": NODE_PKG,
        "nodepkg/index.js": "module.exports = () => 'hello from node';\n",
        "app/package.json": NODE_APP, ".gitignore": "build/\n*.o\nhello\n",
        "docs/guide.md": "# Guide\nfoo bar\nTODO: write\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "dist").mkdir()
    _wheel(root / "dist" / "hello-1.0-py3-none-any.whl")
    _owned_archive(root / "owned.tar")


def _repo(root: Path, env: dict[str, str]) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, env=env, check=True,
                       capture_output=True)

    _plain(root)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "first")
    with open(root / "notes.txt", "a") as f:
        f.write("delta\n")
    git("commit", "-q", "-am", "second")


@pytest.fixture(scope="session")
def workplace() -> Iterator[Path]:
    """Where the workloads run, outside /tmp: the box's /tmp is its own, so a home or a
    folder beside the project there would not be the host's in the box."""
    d = Path(os.path.realpath(tempfile.mkdtemp(prefix="hs-workloads-", dir="/var/tmp")))
    d.chmod(0o755)
    try:
        yield d
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(d)], check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def templates(workplace: Path) -> dict[str, Path]:
    base = workplace / "templates"
    home = base / "home"
    home.mkdir(parents=True)
    made = {"plain": base / "plain", "repo": base / "repo"}
    for path in made.values():
        path.mkdir()
    _plain(made["plain"])
    _repo(made["repo"], base_env(home, {}))
    return made


@pytest.fixture(scope="session")
def host_port() -> Iterator[int]:
    """A TCP server on the host's loopback that answers ``pong``: reached bare, and
    out of the box's reach (its network is its own)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"pong\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join()
    server.close()


_BARE: dict[str, Ran] = {}


@pytest.fixture(scope="session")
def compare(workplace: Path, templates: dict[str, Path],
            host_port: int) -> Callable[[Workload, str], None]:
    """``compare(work, entry)``: the workload bare (once per test session) and boxed
    through ``entry``, in the same place, and :func:`helpers.workloads.check`."""
    root = workplace / "runs"
    extra = {"HOST_PORT": str(host_port)}

    def compare(work: Workload, entry: str) -> None:
        place = root / work.name
        place.mkdir(parents=True, exist_ok=True)
        template = templates[work.project]
        if work.name not in _BARE:
            _BARE[work.name] = run_in(place, template, work, "bare", extra)
        boxed = run_in(place, template, work, entry, extra)
        check(work, entry, _BARE[work.name], boxed)

    return compare
