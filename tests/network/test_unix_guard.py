"""The Unix-socket guard (sandbox/linux/warm/unixguard.py): a real box, real host servers on
pathname sockets in a folder the box can read but not write, and real attempts from
inside, in the warm box and in a box per run (by either launcher), as root and as a plain user.

A read-only mount does not stop ``connect(2)``: without the guard each of these
attempts reaches the host's server (the last tests show it). With it, a socket outside
the box's own folders is reached only when ``[sandbox] allow_unix_sockets`` lists it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.launchers import BOXES, EACH_BOX, launcher

from sandbox.box import harden
from sandbox.errors import SandboxUnavailable
from sandbox.linux.warm import guardparts
from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable
BOTH = EACH_BOX


class Server:
    """A host service on a pathname socket: a stream one answers ``hello`` to each
    connection, a datagram one keeps what it is sent. ``seen`` counts both."""

    def __init__(self, path: str, kind: int = socket.SOCK_STREAM) -> None:
        self.path = path
        self.kind = kind
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(path)
        os.chmod(path, 0o777)  # the mode bits are not what stops the box
        if kind == socket.SOCK_STREAM:
            self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.seen = 0
        self.got: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                if self.kind == socket.SOCK_STREAM:
                    conn, _ = self.sock.accept()
                    self.seen += 1
                    with conn:
                        conn.sendall(b"hello\n")
                else:
                    self.got.append(self.sock.recv(4096))
                    self.seen += 1
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class World:
    """A project, and beside it a folder of host services the box can read."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.project = base / "project"
        self.project.mkdir()
        self.host = base / "host"
        self.host.mkdir()
        self.servers: list[Server] = []

    def serve(self, name: str, kind: int = socket.SOCK_STREAM) -> Server:
        s = Server(str(self.host / name), kind)
        self.servers.append(s)
        return s

    def run(self, code: str, *, box: str = "warm", allowed: tuple[str, ...] = (),
            timeout: float = 60, network: bool = False) -> RunResult:
        settings = SandboxSettings(hide_defaults=False, allow_unix_sockets=allowed,
                                   network=network)
        with launcher(box) as warm, Session.open(str(self.project), settings,
                                                 warm=warm) as session:
            return session.run([PY, "-c", code], timeout=timeout)


@pytest.fixture
def world() -> Iterator[World]:
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="hs-guard-", dir="/var/tmp")))
    os.chmod(base, 0o755)
    w = World(base)
    try:
        yield w
    finally:
        for s in w.servers:
            s.close()
        shutil.rmtree(base, ignore_errors=True)


CONNECT = """
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({path!r})
    print("reached", s.recv(6).decode().strip())
except OSError as err:
    print("refused", err.errno)
"""

SEND = """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for how in ("sendto", "sendmsg"):
    try:
        if how == "sendto":
            s.sendto(b"ping", {path!r})
        else:
            s.sendmsg([b"pi", b"ng"], [], 0, {path!r})
        print(how, "sent")
    except OSError as err:
        print(how, "refused", err.errno)
"""


def out(r: RunResult) -> str:
    assert r.outcome == "exited", r
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


@BOTH
def test_a_host_socket_outside_the_box_is_refused_a_connect(world: World, box: str) -> None:
    server = world.serve("agent.sock")
    assert out(world.run(CONNECT.format(path=server.path), box=box)) == "refused 13\n"
    assert server.seen == 0
    # Host side: the service is there and answers.
    probe = socket.socket(socket.AF_UNIX)
    probe.connect(server.path)
    assert probe.recv(6) == b"hello\n"
    probe.close()


@BOTH
def test_a_datagram_to_a_host_socket_is_refused(world: World, box: str) -> None:
    server = world.serve("log.sock", socket.SOCK_DGRAM)
    got = out(world.run(SEND.format(path=server.path), box=box))
    assert got == "sendto refused 13\nsendmsg refused 13\n"
    assert server.seen == 0


class AbstractServer(Server):
    """A host service on an abstract address, in the host's network namespace (an X
    server's ``@/tmp/.X11-unix/X0``, a D-Bus bus)."""

    def __init__(self, kind: int = socket.SOCK_STREAM) -> None:
        name = f"\0hs-host-service-{os.getpid()}-{next(_abstract_names)}"
        self.path = name
        self.kind = kind
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(name)
        if kind == socket.SOCK_STREAM:
            self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.seen = 0
        self.got = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()


_abstract_names = itertools.count()

# sendmmsg(2) of one datagram to an address (no binding in Python: ctypes).
SENDMMSG = """
import ctypes, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
name = struct.pack("=H", socket.AF_UNIX) + {name!r}.encode()
addr = ctypes.create_string_buffer(name, len(name))
buf = ctypes.create_string_buffer(b"x", 1)
iov = ctypes.create_string_buffer(struct.pack("=QQ", ctypes.addressof(buf), 1), 16)
vec = ctypes.create_string_buffer(struct.pack("=QI4xQQQQI4x", ctypes.addressof(addr),
                                              len(name), ctypes.addressof(iov), 1, 0, 0, 0)
                                  + bytes(8), 64)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n = libc.sendmmsg(s.fileno(), vec, 1, 0)
print("sendmmsg", n, ctypes.get_errno() if n < 0 else "sent")
"""

OWN_ABSTRACT = """
import socket
l = socket.socket(socket.AF_UNIX)
try:
    l.bind("\\0hs-own-abstract"); l.listen()
except OSError as err:
    print("bind refused", err.errno)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0hs-own-abstract")
    print("reached")
except OSError as err:
    print("refused", err.errno)
"""


@BOTH
def test_a_host_abstract_socket_is_refused_when_the_box_shares_the_host_network(
        world: World, box: str) -> None:
    # With network = true the box is in the host's network namespace, where abstract
    # addresses name the host's services: reaching an X server's is typing into the
    # user's terminals.
    stream, dgram = AbstractServer(), AbstractServer(socket.SOCK_DGRAM)
    world.servers += [stream, dgram]
    got = out(world.run(CONNECT.format(path=stream.path) + SEND.format(path=dgram.path)
                        + SENDMMSG.format(name=dgram.path), box=box, network=True))
    assert got == "refused 13\nsendto refused 13\nsendmsg refused 13\nsendmmsg -1 13\n"
    assert stream.seen == 0 and dgram.seen == 0
    # So is the box's own there: the guard cannot tell it from the host's, and the
    # name it would bind is the host's too.
    assert out(world.run(OWN_ABSTRACT, box=box, network=True)) == \
        "bind refused 13\nrefused 13\n"
    # In a network namespace of its own the box's abstract addresses are its own.
    assert out(world.run(OWN_ABSTRACT, box=box)) == "reached\n"
    # Host side: the services are there and answer.
    probe = socket.socket(socket.AF_UNIX)
    probe.connect(stream.path)
    assert probe.recv(6) == b"hello\n"
    probe.close()


# A box on the host's network takes an abstract name a host program will connect to
# (a D-Bus bus or an X server not running yet), and waits.
SQUAT = """
import socket, sys
l = socket.socket(socket.AF_UNIX)
try:
    l.bind({name!r})
except OSError as err:
    print("bind refused", err.errno)
    sys.exit()
l.listen()
l.settimeout(20)
c, _ = l.accept()
c.sendall(b"the box answers\\n")
print("a host program came")
"""


def _squatted(world: World, box: str) -> tuple[str, bytes]:
    """The box's attempt, and what a host program that connects to the name meanwhile
    gets (the host side, for real)."""
    name = f"\0hs-squat-{os.getpid()}-{next(_abstract_names)}"
    said: list[str] = []
    attempt = threading.Thread(target=lambda: said.append(
        out(world.run(SQUAT.format(name=name), box=box, network=True))))
    attempt.start()
    got = b""
    while attempt.is_alive() and not got:
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(name)
            probe.settimeout(5)
            got = probe.recv(64)
        except OSError:
            time.sleep(0.02)
        finally:
            probe.close()
    attempt.join(30)
    return said[0], got


@BOTH
def test_a_box_on_the_host_network_cannot_take_an_abstract_name(world: World,
                                                                box: str) -> None:
    assert _squatted(world, box) == ("bind refused 13\n", b"")


def test_with_binds_let_through_a_host_program_reaches_the_box(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # The attempt above is real: with the guard's filter of a box on its own network,
    # the box takes the name and the host program talks to it.
    from sandbox.linux import seccomp

    monkeypatch.setattr(seccomp, "UNIX_GUARD_BIND", seccomp.UNIX_GUARD)
    assert _squatted(world, "per-run") == ("a host program came\n", b"the box answers\n")


# Every other bind the guard makes for the box, as the kernel would have: a relative
# name in the command's folder (and named so), an absolute one, the command's umask,
# a name taken, a folder missing, and a port.
BINDS = """
import errno, os, socket, stat
os.umask(0o027)
for where in ("rel.sock", os.path.join(os.getcwd(), "abs.sock"), "/tmp/t.sock"):
    l = socket.socket(socket.AF_UNIX)
    l.bind(where)
    l.listen()
    c = socket.socket(socket.AF_UNIX)
    c.connect(where)
    mode = stat.S_IMODE(os.stat(where).st_mode)
    print(where.rsplit("/", 1)[-1], l.getsockname() == where, oct(mode))
long = "s" * 107  # the most Python binds (sun_path less its NUL)
l = socket.socket(socket.AF_UNIX)
l.bind(long)
print("long", l.getsockname() == long, os.path.exists(long))
for where, what in (("rel.sock", "taken"), ("missing/x.sock", "missing")):
    try:
        socket.socket(socket.AF_UNIX).bind(where)
    except OSError as err:
        print(what, errno.errorcode[err.errno])
t = socket.socket()
t.bind(("127.0.0.1", 0))
t.listen()
print("port", t.getsockname()[1] > 0)
a = socket.socket(socket.AF_UNIX)
a.bind("")
print("autobind", len(a.getsockname()) == 6 and a.getsockname()[:1] == b"\\0")
"""


@BOTH
def test_the_binds_the_guard_makes_behave_as_the_kernel_s(world: World, box: str) -> None:
    got = out(world.run(BINDS, box=box, network=True))
    assert got == ("rel.sock True 0o750\nabs.sock True 0o750\nt.sock True 0o750\n"
                   "long True True\ntaken EADDRINUSE\nmissing ENOENT\n"
                   "port True\nautobind True\n"), got
    assert (world.project / "rel.sock").is_socket()


def test_with_abstract_addresses_allowed_the_host_s_is_reached(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # The attempt above is real: let abstract addresses through and it reaches the host.
    from sandbox.linux import sockets

    real = sockets.guard_allowed
    monkeypatch.setattr(sockets, "guard_allowed",
                        lambda policy: (*real(policy), sockets.ABSTRACT))
    stream, dgram = AbstractServer(), AbstractServer(socket.SOCK_DGRAM)
    world.servers += [stream, dgram]
    got = out(world.run(CONNECT.format(path=stream.path) + SENDMMSG.format(name=dgram.path),
                        box="per-run", network=True))
    assert got == "reached hello\nsendmmsg 1 sent\n"
    deadline = time.monotonic() + 2
    while dgram.seen == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stream.seen == 1 and dgram.seen == 1


@BOTH
def test_a_listed_socket_is_reached(world: World, box: str) -> None:
    stream = world.serve("agent.sock")
    dgram = world.serve("log.sock", socket.SOCK_DGRAM)
    assert out(world.run(CONNECT.format(path=stream.path), box=box,
                         allowed=(stream.path,))) == "reached hello\n"
    assert stream.seen == 1
    got = out(world.run(SEND.format(path=dgram.path), box=box, allowed=(str(world.host),)))
    assert got == "sendto sent\nsendmsg sent\n"
    assert dgram.got == [b"ping", b"ping"]


OWN = """
import os, socket, subprocess, sys
servers = []
for path in ("/tmp/own.sock", os.path.join(os.getcwd(), "own.sock")):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(4)
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d.bind(path + ".dgram")
    servers.append((path, s, d))
client = '''
import socket, sys
for path in sys.argv[1:]:
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    c.sendall(b"hi")
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"dg", path + ".dgram")
'''
# Another process of the same run, by a relative path too.
subprocess.run([sys.executable, "-c", client, "/tmp/own.sock", "own.sock"], check=True)
for path, s, d in servers:
    conn, _ = s.accept()
    print(path.rsplit("/", 1)[-1], conn.recv(2).decode(), d.recv(2).decode())
"""


@BOTH
def test_the_box_s_own_servers_in_tmp_and_the_project_are_reached(world: World,
                                                                 box: str) -> None:
    assert out(world.run(OWN, box=box)) == "own.sock hi dg\nown.sock hi dg\n"


@BOTH
def test_a_link_in_the_project_to_a_host_socket_is_refused(world: World, box: str) -> None:
    server = world.serve("agent.sock")
    code = (f"import os\nos.symlink({server.path!r}, 'made.sock')\n"
            + CONNECT.format(path="made.sock") + CONNECT.format(path="./made.sock"))
    assert out(world.run(code, box=box)) == "refused 13\nrefused 13\n"
    # A link the host left in the project, and a folder link on the way.
    (world.project / "left.sock").symlink_to(server.path)
    (world.project / "hostdir").symlink_to(world.host)
    code = (CONNECT.format(path=str(world.project / "left.sock"))
            + CONNECT.format(path="hostdir/agent.sock"))
    assert out(world.run(code, box=box)) == "refused 13\nrefused 13\n"
    assert server.seen == 0


RACE = """
import ctypes, socket, struct, threading, time
libc = ctypes.CDLL(None, use_errno=True)
own = socket.socket(socket.AF_UNIX)
own.bind("/tmp/own.sock")
own.listen(512)
def accept():
    while True:
        own.accept()[0].close()
threading.Thread(target=accept, daemon=True).start()
def name(path):
    return struct.pack("=H", socket.AF_UNIX) + path.encode() + b"\\0"
size = max(len(name("/tmp/own.sock")), len(name({path!r})))
good, bad = name("/tmp/own.sock").ljust(size, b"\\0"), name({path!r}).ljust(size, b"\\0")
buf = ctypes.create_string_buffer(good, size)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, bad, size)
        ctypes.memmove(buf, good, size)
flipper = threading.Thread(target=flip)
flipper.start()
reached = refused = 0
end = time.monotonic() + 3
while time.monotonic() < end:
    s = socket.socket(socket.AF_UNIX)
    if libc.connect(s.fileno(), buf, size) == 0:
        reached += 1
    else:
        refused += 1
    s.close()
stop = True
flipper.join()
print(reached > 0, refused > 0)
"""


@BOTH
def test_a_race_on_the_address_never_reaches_the_forbidden_server(world: World,
                                                                 box: str) -> None:
    server = world.serve("agent.sock")
    assert out(world.run(RACE.format(path=server.path), box=box)) == "True True\n"
    assert server.seen == 0


SWAP = """
import ctypes, os, socket, struct, threading, time
libc = ctypes.CDLL(None, use_errno=True)
unix = socket.socket(socket.AF_UNIX)
inet = socket.socket(socket.AF_INET)
fd = os.dup(inet.fileno())
addr = struct.pack("=H", socket.AF_UNIX) + {path!r}.encode() + b"\\0"
stop = False
def swap():
    while not stop:
        os.dup2(unix.fileno(), fd)
        os.dup2(inet.fileno(), fd)
swapper = threading.Thread(target=swap)
swapper.start()
errors = set()
end = time.monotonic() + 2
while time.monotonic() < end:
    if libc.connect(fd, addr, len(addr)) == 0:
        errors.add(0)
        unix = socket.socket(socket.AF_UNIX)
    else:
        errors.add(ctypes.get_errno())
stop = True
swapper.join()
print(0 in errors, 13 in errors)
"""


@BOTH
def test_a_race_on_the_descriptor_never_reaches_the_forbidden_server(world: World,
                                                                    box: str) -> None:
    server = world.serve("agent.sock")
    assert out(world.run(SWAP.format(path=server.path), box=box)) == "False True\n"
    assert server.seen == 0


CALLS = """
import array, ctypes, os, socket, struct
# Descriptors passed over the box's own socket pair arrive, and work.
a, b = socket.socketpair()
r, w = os.pipe()
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
msg, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(4))
passed = array.array("i", anc[0][2])[0]
os.write(passed, b"through")
print(msg.decode(), os.read(r, 7).decode())
# sendmmsg: two datagrams, each msg_len written back.
c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
libc = ctypes.CDLL(None, use_errno=True)
bufs = [ctypes.create_string_buffer(x) for x in (b"one", b"three")]
iovs = [struct.pack("=QQ", ctypes.addressof(x), len(x.value)) for x in bufs]
iov = [ctypes.create_string_buffer(i, 16) for i in iovs]
vec = ctypes.create_string_buffer(b"".join(
    struct.pack("=QI4xQQQQI4x", 0, 0, ctypes.addressof(i), 1, 0, 0, 0) + b"\\0" * 8
    for i in iov), 128)
n = libc.sendmmsg(c.fileno(), vec, 2, 0)
lens = [struct.unpack_from("=I", vec.raw, 64 * k + 56)[0] for k in range(2)]
print(n, lens, d.recv(9).decode(), d.recv(9).decode())
# TCP on the box's own loopback: blocking and non-blocking connects.
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(4)
cli = socket.create_connection(srv.getsockname(), timeout=5)
nb = socket.socket()
nb.setblocking(False)
print(nb.connect_ex(srv.getsockname()) in (0, 115), cli.getpeername() == srv.getsockname())
# A thread's own connect and sendmsg (the guard takes the thread's socket).
import threading
u = socket.socket(socket.AF_UNIX)
u.bind("/tmp/threads.sock")
u.listen(1)
def talk():
    t = socket.socket(socket.AF_UNIX)
    t.connect("/tmp/threads.sock")
    t.sendmsg([b"from a thread"])
th = threading.Thread(target=talk)
th.start()
th.join()
print(u.accept()[0].recv(13).decode())
# A socket reached by the caller's own descriptor of it, as the way round sun_path's
# length is written; the host's socket the same way is refused (the test's last word).
fd = os.open("/tmp/threads.sock", os.O_PATH)
t = socket.socket(socket.AF_UNIX)
t.connect(f"/proc/self/fd/{{fd}}")
print(u.accept()[0] is not None, end=" ")
host = os.open({path!r}, os.O_PATH)
try:
    socket.socket(socket.AF_UNIX).connect(f"/proc/self/fd/{{host}}")
except OSError as err:
    print(err.errno)
# Sends with an address the kernel refuses stay refused as it says.
bad = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for name in (b"", b"\\0abstract-nobody"):
    try:
        bad.sendto(b"x", name)
    except OSError as err:
        print(err.errno, end=" ")
print()
"""


@BOTH
def test_calls_the_guard_makes_for_the_box_behave_as_the_kernel_s(world: World,
                                                                 box: str) -> None:
    server = world.serve("agent.sock")
    got = out(world.run(CALLS.format(path=server.path), box=box)).splitlines()
    assert got == ["x through", "2 [3, 5] one three", "True True", "from a thread", "True 13",
                   "22 111 "]
    assert server.seen == 0


def test_the_guard_s_descriptor_is_not_the_command_s(world: World) -> None:
    code = "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"
    for box in BOXES:
        assert out(world.run(code, box=box)) == "[0, 1, 2, 3]\n", box


REACH = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
got = []
got.append(libc.ptrace(16, 1, 0, 0) == 0)                      # PTRACE_ATTACH
pidfd = libc.syscall(434, 1, 0)                                 # pidfd_open
got += [libc.syscall(438, pidfd, n, 0) >= 0 for n in range(3, 64)]  # pidfd_getfd
try:
    names = os.listdir("/proc/1/fd")  # the numbers only, as root
except OSError:
    names = []
for name in names:
    try:
        os.close(os.open(f"/proc/1/fd/{name}", os.O_RDONLY))
        got.append(True)
    except OSError:
        pass
cmd = open("/proc/1/cmdline", "rb").read().split(b"\\0")
print(any(got), cmd[0].startswith(b"/proc/self/fd/"),
      cmd[1] if cmd[1] == b"warm" else cmd[3].rsplit(b"/", 1)[-1])
"""


@BOTH
def test_the_guard_s_process_cannot_be_reached_from_the_box(world: World, box: str) -> None:
    # The run's PID 1 holds the listener and is the one process outside the filter:
    # not traced, its descriptors neither taken nor opened.
    # (The compiled launcher runs from a sealed memfd; guardmain.py is what it would
    # become at a call it cannot judge. A warm run's init is a fork of its starter.)
    want = {"warm": "True b'warm'", "warm-python": "False b'helper.py'",
            "per-run": "True b'guardmain.py'", "per-run-python": "False b'guarded.py'"}[box]
    assert out(world.run(REACH, box=box)) == f"False {want}\n"


def test_with_the_guard_off_the_host_socket_is_reached(world: World,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The attempts above are real: without the guard the read-only mount lets them in.
    monkeypatch.setattr(harden, "_guard_program", lambda root, host_network: None)
    stream = world.serve("agent.sock")
    dgram = world.serve("log.sock", socket.SOCK_DGRAM)
    assert out(world.run(CONNECT.format(path=stream.path), box="per-run")) == "reached hello\n"
    assert out(world.run(SEND.format(path=dgram.path), box="per-run")) == \
        "sendto sent\nsendmsg sent\n"
    assert stream.seen == 1 and dgram.seen == 2


def test_a_kernel_without_the_guard_refuses_the_session(world: World,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guardparts, "unsupported",
                        lambda: "this kernel has no pidfd_getfd (Linux 5.6)")
    with pytest.raises(SandboxUnavailable) as caught, Session.open(str(world.project)):
        pass
    assert str(caught.value) == (
        "the box cannot guard Unix sockets: this kernel has no pidfd_getfd (Linux 5.6); "
        "run the box on Linux 5.6 or later (x86-64 or arm64), where seccomp's user "
        "notification and pidfd_getfd exist")


def test_this_machine_carries_the_guard() -> None:
    assert guardparts.unsupported() is None
