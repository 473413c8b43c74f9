"""One run cannot take a handle on another run's process (issue 38, family 5).

Run B listens on a socket in the session's shared ``/tmp``; run A connects and tries
every way from that connection to B's process: ``SO_PEERPIDFD``, ``SO_PASSPIDFD`` (a
pidfd of the sender with each message), ``SO_PEERCRED``'s pid and ``pidfd_open``, then
``pidfd_getfd`` of B's stdout. B's real result must not hold A's line, and A must be
refused each step. In a warm box (both starters) and in boxes per run (both launchers),
as root and as the plain user.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from helpers.launchers import BOXES, launcher

from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable

# Run B: a server in /tmp that answers its one client and then lingers, its stdout open.
VICTIM = r"""
import os, socket, time
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/b.sock")
s.listen(1)
os.rename("/tmp/b.sock", "/tmp/b.ready")
c, _ = s.accept()
c.sendall(b"hi")
c.recv(16)           # A's end: it has tried everything
time.sleep(0.2)
print("B done", flush=True)
"""

# Run A: every way from the connection to B's process, each step's answer printed.
ATTACKER = r"""
import ctypes, errno, os, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SOL_SOCKET, SO_PEERCRED, SO_PASSPIDFD, SO_PEERPIDFD, SCM_PIDFD = 1, 17, 76, 77, 4

def call(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()

def say(*words):
    print(*words, flush=True)

pidfds = []
def steal(how, pidfd):
    # B's stdout, taken through its pidfd, and A's line written to it.
    fd = call(438, pidfd, 1, 0)
    say("getfd", how, fd if fd < 0 else "taken")
    if fd >= 0:
        os.write(fd, b"A WAS HERE\n")

while not os.path.exists("/tmp/b.ready"):
    time.sleep(0.01)
s = socket.socket(socket.AF_UNIX)
try:
    s.setsockopt(SOL_SOCKET, SO_PASSPIDFD, 1)
    say("passpidfd", "set")
except OSError as err:
    say("passpidfd", -err.errno)
s.connect("/tmp/b.ready")
pid = struct.unpack("3i", s.getsockopt(SOL_SOCKET, SO_PEERCRED, 12))[0]
say("peercred", pid)
if pid > 0:
    got = call(434, pid, 0)
    say("pidfd_open", got)
    if got >= 0 and os.readlink("/proc/%d/exe" % pid) != os.readlink("/proc/self/exe"):
        steal("peercred", got)
try:
    fd = s.getsockopt(SOL_SOCKET, SO_PEERPIDFD)
    say("peerpidfd", "got")
    steal("peerpidfd", fd)
except OSError as err:
    say("peerpidfd", -err.errno)
data, anc, _, _ = s.recvmsg(16, socket.CMSG_SPACE(4))
fds = [struct.unpack("i", d[:4])[0] for lvl, kind, d in anc
       if lvl == SOL_SOCKET and kind == SCM_PIDFD]
say("scm_pidfd", len(fds))
for fd in fds:
    steal("scm_pidfd", fd)
s.sendall(b"bye")
"""


@pytest.fixture
def project(outside: Path) -> Path:
    """A project outside /tmp (the box's /tmp is its own): conftest's folder there."""
    p = Path(os.path.realpath(outside)) / "p"
    p.mkdir()
    return p


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-800:]!r} err={r.stderr[-800:]!r}"


def both(session: Session) -> tuple[RunResult, RunResult]:
    """B started, then A while B lives; both results."""
    got: dict[str, RunResult] = {}

    def victim() -> None:
        got["b"] = session.run([PY, "-c", VICTIM], timeout=60)
    t = threading.Thread(target=victim)
    t.start()
    try:
        got["a"] = session.run([PY, "-c", ATTACKER], timeout=60)
    finally:
        t.join(70)
    return got["a"], got["b"]


@pytest.mark.parametrize("box", BOXES)
def test_a_run_cannot_take_another_run_s_descriptors(project: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(str(project), SandboxSettings(
            hide_defaults=False), warm=warm) as session:
        a, b = both(session)
    assert a.ok, explain(a)
    assert b.ok, explain(b)
    # B's real result holds its own line alone.
    assert b.stdout == b"B done\n", explain(b)
    said = dict(line.split(None, 1) for line in a.stdout.decode().splitlines())
    # Each way is refused: no pidfd from the socket, none from the peer's pid (not in
    # A's PID namespace: 0), and nothing taken.
    assert said["passpidfd"] == str(-errno.ENOPROTOOPT), explain(a)
    assert said["peerpidfd"] == str(-errno.ENOPROTOOPT), explain(a)
    assert said["peercred"] == "0", explain(a)
    assert said["scm_pidfd"] == "0", explain(a)
    assert not any(k == "getfd" for k in said), explain(a)


OWN = r"""
import ctypes, os, signal, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()

child = subprocess.Popen(["sleep", "30"])
pidfd = call(434, child.pid, 0)                   # pidfd_open: a run's own child
print("pidfd_open", "ok" if pidfd >= 0 else pidfd)
print("pidfd_getfd", call(438, pidfd, 0, 0))
print("process_madvise", call(440, pidfd, 0, 0, 0, 0))
print("process_mrelease", call(448, pidfd, 0))
print("open_by_handle_at", call(304, -100, 0, 0))
print("pidfd_send_signal", call(424, pidfd, signal.SIGTERM, 0, 0))
print("ended", child.wait())
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86-64's")
def test_the_handle_calls_are_refused_and_a_run_s_own_children_still_handled(
        project: Path) -> None:
    with Session.open(str(project), SandboxSettings(hide_defaults=False)) as session:
        r = session.run([PY, "-c", OWN], timeout=60)
    assert r.ok, explain(r)
    said = dict(line.split(None, 1) for line in r.stdout.decode().splitlines())
    assert said == {"pidfd_open": "ok", "pidfd_getfd": str(-errno.EPERM),
                    "process_madvise": str(-errno.EPERM),
                    "process_mrelease": str(-errno.EPERM),
                    "open_by_handle_at": str(-errno.EPERM), "pidfd_send_signal": "0",
                    "ended": str(-15)}, explain(r)


I386 = r"""
#include <stdio.h>
static long i386(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}
int main(void) {
    /* socketcall(SYS_GETSOCKOPT), socketcall(SYS_SETSOCKOPT), then the direct calls
     * getsockopt(-1, SOL_SOCKET, SO_PEERPIDFD) and setsockopt(.., SO_PASSPIDFD). */
    printf("%ld %ld %ld %ld\n", i386(102, 15, 0, 0), i386(102, 14, 0, 0),
           i386(365, -1, 1, 77), i386(366, -1, 1, 76));
    return 0;
}
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="i386 calls from x86-64")
def test_32_bit_x86_gets_no_pidfd_from_a_socket_either(project: Path) -> None:
    assert shutil.which("gcc"), "gcc is one of the packages scripts/_setup.sh installs"
    with Session.open(str(project), SandboxSettings(hide_defaults=False)) as session:
        Path(session.policy.private_tmp, "abi.c").write_text(I386)
        r = session.run(["sh", "-c", "gcc -o /tmp/abi /tmp/abi.c && /tmp/abi"], timeout=60)
    assert r.ok, explain(r)
    assert r.stdout.split() == [str(-e).encode() for e in (
        errno.EACCES, errno.EACCES, errno.ENOPROTOOPT, errno.ENOPROTOOPT)], explain(r)
