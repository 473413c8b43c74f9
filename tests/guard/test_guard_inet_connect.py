"""The Unix-socket guard's fast path (sandbox/linux/warm/guardcore.c) makes a connect(2) on
a non-blocking Internet socket itself, as the supervisor makes it (the caller's socket
taken, its address copied, the call's result answered): a run's first TCP connection
no longer starts the Python supervisor. A blocking socket, an address that cannot be
read, and a Unix socket's call that needs judgement still go to the supervisor. Real
boxes on the host's network, a real server on the host's 127.0.0.1 (and ::1); each
answer as bare."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from network import test_unix_guard
from network.test_unix_guard import World

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable
# The compiled launcher's fast path, in a box per run and as a warm run's PID 1.
COMPILED = pytest.mark.parametrize("box", ("per-run", "warm"))
world = test_unix_guard.world  # a project, and beside it a folder of host services


def _kernel() -> tuple[int, int]:
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


class Served:
    """A TCP server on the host's loopback that says ``hello`` to each connection, and
    beside it a port that refuses (bound, not listening)."""

    def __init__(self, family: int, host: str) -> None:
        self.sock = socket.socket(family)
        self.sock.bind((host, 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.shut = socket.socket(family)
        self.shut.bind((host, 0))
        self.refused = self.shut.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"hello\n")

    def close(self) -> None:
        # A close alone does not wake an accept(2) that waits: a shutdown does.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(10)
        self.sock.close()
        self.shut.close()


@pytest.fixture
def served() -> Iterator[dict[str, Served]]:
    got = {"4": Served(socket.AF_INET, "127.0.0.1")}
    if _has_ipv6():
        got["6"] = Served(socket.AF_INET6, "::1")
    try:
        yield got
    finally:
        for s in got.values():
            s.close()


# What PID 1 is: still the compiled launcher, or the supervisor it became.
HELPERS = """
import ctypes, errno, select, socket, sys, threading
def pid1():
    cmd = open("/proc/1/cmdline", "rb").read().split(b"\\0")
    return "launcher" if cmd[0].startswith(b"/proc/self/fd/") else cmd[3].decode().rsplit("/")[-1]
def tcp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    rc = s.connect_ex((host, port))
    if rc == errno.EINPROGRESS:
        select.select([], [s], [], 10)
        rc = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if rc:
        return errno.errorcode[rc]
    s.setblocking(True)
    s.settimeout(10)
    return s.recv(16).decode().strip()
libc = ctypes.CDLL(None, use_errno=True)
def raw(family, addr, size):
    # connect(2) as a C program makes it: any pointer, any size.
    s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    rc = libc.connect(s.fileno(), addr, size)
    return "0" if rc == 0 else errno.errorcode[ctypes.get_errno()]
"""


def _boxed(world: World, code: str, box: str) -> str:
    r = world.run(HELPERS + code, box=box, network=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def _bare(code: str) -> str:
    bare = HELPERS + "\ndef pid1(): return '-'\n" + code
    r = subprocess.run([PY, "-c", bare], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


@COMPILED
def test_a_non_blocking_tcp_connect_is_made_by_the_launcher_as_bare(
        world: World, served: dict[str, Served], box: str) -> None:
    v4 = served["4"]
    code = f"""
got = [tcp("127.0.0.1", {v4.port}), tcp("127.0.0.1", {v4.refused})]
# A socket with a timeout is non-blocking underneath (Python's, and most clients').
got.append(socket.create_connection(("127.0.0.1", {v4.port}), timeout=10).recv(16).decode())
# A thread of the caller that is not its leader: its own pidfd (PIDFD_THREAD), or the
# supervisor where the kernel has none (before Linux 6.9).
t = threading.Thread(target=lambda: got.append(tcp("127.0.0.1", {v4.port})))
t.start()
t.join()
print(got, pid1())
"""
    bare = _bare(code)
    assert bare == "['hello', 'ECONNREFUSED', 'hello\\n', 'hello'] -\n"
    want = bare.replace(" -\n", " launcher\n")
    if _kernel() < (6, 9):
        want = bare.replace(" -\n", " guardmain.py\n")
    assert _boxed(world, code, box) == want


@COMPILED
def test_a_non_blocking_tcp6_connect_is_made_by_the_launcher_as_bare(
        world: World, served: dict[str, Served], box: str) -> None:
    if "6" not in served:
        pytest.skip("no IPv6 loopback here")
    v6 = served["6"]
    code = f"""
print([tcp("::1", {v6.port}, socket.AF_INET6), tcp("::1", {v6.refused}, socket.AF_INET6)],
      pid1())
"""
    bare = _bare(code)
    assert bare == "['hello', 'ECONNREFUSED'] -\n"
    assert _boxed(world, code, box) == bare.replace(" -\n", " launcher\n")


@COMPILED
def test_a_blocking_tcp_connect_still_starts_the_supervisor(
        world: World, served: dict[str, Served], box: str) -> None:
    # Its wait would stop the launcher's one loop: the supervisor waits in a thread.
    v4 = served["4"]
    code = f"""
s = socket.create_connection(("127.0.0.1", {v4.port}))
got = [s.recv(16).decode().strip(), pid1()]
# From then on the supervisor makes the non-blocking ones too.
got.append(tcp("127.0.0.1", {v4.port}))
try:
    socket.create_connection(("127.0.0.1", {v4.refused}))
except OSError as err:
    got.append(errno.errorcode[err.errno])
print(got)
"""
    assert _boxed(world, code, box) == \
        "['hello', 'guardmain.py', 'hello', 'ECONNREFUSED']\n"


@COMPILED
def test_the_kernel_s_refusals_are_answered_as_bare_and_an_unread_address_by_the_supervisor(
        world: World, served: dict[str, Served], box: str) -> None:
    v4 = served["4"]
    code = f"""
import struct
six = struct.pack("=HH20x", socket.AF_INET6, {v4.port})
four = struct.pack("=HH4s8x", socket.AF_INET, {v4.port}, socket.inet_aton("127.0.0.1"))
got = [raw(socket.AF_INET, six, len(six)),          # another family's address
       raw(socket.AF_INET, four, 8),                 # too short for its family
       raw(socket.AF_INET6, four, len(four))]        # too short for an IPv6 socket
got.append(pid1())
# An address the guard cannot read (EFAULT), or of no size it reads (0, past
# sockaddr_storage): the supervisor's, which answers as the kernel does.
got += [raw(socket.AF_INET, ctypes.c_void_p(8), 16), pid1()]
big = four + bytes(129 - len(four))
got += [raw(socket.AF_INET, big, 129), raw(socket.AF_INET, four, 0)]
print(got)
"""
    bare = _bare(code)
    assert bare == ("['EAFNOSUPPORT', 'EINVAL', 'EINVAL', '-', 'EFAULT', '-', "
                    "'EINVAL', 'EINVAL']\n")
    assert _boxed(world, code, box) == bare.replace("'-'", "'launcher'", 1).replace(
        "'-'", "'guardmain.py'", 1)


@COMPILED
def test_a_unix_socket_is_still_judged_after_a_tcp_connect(
        world: World, served: dict[str, Served], box: str) -> None:
    host = world.serve("agent.sock")
    v4 = served["4"]
    code = f"""
def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    try:
        s.connect(path)
        return "reached"
    except OSError as err:
        return errno.errorcode[err.errno]
got = [tcp("127.0.0.1", {v4.port}), unix("/run/nscd/socket"), pid1()]
got += [unix({host.path!r}), pid1(), tcp("127.0.0.1", {v4.port})]
print(got)
"""
    assert _boxed(world, code, box) == \
        "['hello', 'ENOENT', 'launcher', 'EACCES', 'guardmain.py', 'hello']\n"
    assert host.seen == 0
