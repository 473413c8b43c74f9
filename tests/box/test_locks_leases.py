"""The box holds no lease and no lock on a host file (issue 38, family 6).

Every file outside the box's writable folders is one the box can read, which is
enough for a read lease (the host's open for writing then waits out
lease-break-time, or fails with EWOULDBLOCK) and for a shared lock (the host's write
lock waits). From inside a real box (warm and per run, each launcher), as root and as
the plain user: the box opens a host file and tries a lease and every kind of lock,
and while it holds the file open the host (this process) opens it for writing without
waiting and takes every write lock on it. In the project the locks are the box's
(the host's write lock is refused while the box holds a read lock); a lease nowhere.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import struct
import sys
import threading
import time
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

# In the box: the file opened as it can be, then a lease and each lock tried; each
# answer printed; the file held open until the host has tried its side.
HOLDER = r"""
import ctypes, fcntl, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
path, writable = sys.argv[1], sys.argv[2] == "rw"
F_SETLEASE, F_OFD_SETLK, F_RDLCK = 1024, 37, 0
fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
lock = struct.pack("hhqqi4x", F_RDLCK, 0, 0, 0, 0)

def tried(name, call):
    ctypes.set_errno(0)
    rc = call()
    print(name, 0 if rc == 0 else ctypes.get_errno(), flush=True)

tried("lease", lambda: libc.fcntl(fd, F_SETLEASE, F_RDLCK))
fds = [os.open(path, os.O_RDONLY) for _ in range(4)]
tried("flock_sh", lambda: libc.flock(fds[0], fcntl.LOCK_SH | fcntl.LOCK_NB))
tried("flock_ex", lambda: libc.flock(fds[0], fcntl.LOCK_EX | fcntl.LOCK_NB))
tried("ofd_rd", lambda: libc.fcntl(fds[2], F_OFD_SETLK, lock))
tried("posix_rd", lambda: libc.fcntl(fds[3], fcntl.F_SETLK, lock))
open("/tmp/ready", "w").close()
while not os.path.exists("/tmp/done"):
    time.sleep(0.01)
"""

F_OFD_SETLK = 37
WRLCK = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)


@pytest.fixture
def base(outside: Path) -> Path:
    """conftest's folder outside /tmp, with a project and a host folder, each holding a
    file to lock."""
    base = Path(os.path.realpath(outside))
    (base / "p").mkdir()
    (base / "host").mkdir()
    for f in (base / "host" / "lock", base / "p" / "lock"):
        f.write_bytes(b"x")
        f.chmod(0o666)
    return base


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-800:]!r} err={r.stderr[-800:]!r}"


def host_side(path: Path) -> dict[str, int]:
    """What the host gets on ``path`` while the box holds it: 0, or the errno."""
    out: dict[str, int] = {}

    def tried(name: str, call: object) -> None:
        try:
            call()  # type: ignore[operator]
            out[name] = 0
        except OSError as err:
            out[name] = err.errno or -1
    fd = -1

    def open_for_writing() -> None:
        nonlocal fd
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    tried("open_wr", open_for_writing)
    if fd >= 0:
        os.close(fd)
    # Each lock on a descriptor of its own, let go before the next (an open file
    # description's lock and a process's lock of this process would meet otherwise).
    for name, how in (("flock_ex", lambda f: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                      ("ofd_wr", lambda f: fcntl.fcntl(f, F_OFD_SETLK, WRLCK)),
                      ("posix_wr", lambda f: fcntl.fcntl(f, fcntl.F_SETLK, WRLCK))):
        f = os.open(path, os.O_RDWR)
        try:
            tried(name, lambda: how(f))  # noqa: B023 (called at once)
        finally:
            os.close(f)
    return out


def hold(session: Session, path: Path, mode: str) -> tuple[RunResult, dict[str, int]]:
    tmp = Path(session.policy.private_tmp)
    for name in ("ready", "done"):
        (tmp / name).unlink(missing_ok=True)
    got: dict[str, RunResult] = {}
    t = threading.Thread(target=lambda: got.setdefault("r", session.run(
        [PY, "-c", HOLDER, str(path), mode], timeout=60)))
    t.start()
    try:
        deadline = time.monotonic() + 60
        while not (tmp / "ready").exists() and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        host = host_side(path) if (tmp / "ready").exists() else {}
    finally:
        (tmp / "done").write_bytes(b"")
        t.join(70)
    return got["r"], host


def said(r: RunResult) -> dict[str, int]:
    assert r.ok, explain(r)
    return {k: int(v) for k, v in (line.split() for line in r.stdout.decode().splitlines())}


@pytest.mark.parametrize("box", BOXES)
def test_the_box_holds_no_lease_or_lock_on_a_host_file(base: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(str(base / "p"), SandboxSettings(
            hide_defaults=False), warm=warm) as session:
        r, host = hold(session, base / "host" / "lock", "ro")
        mine, host_of_mine = hold(session, base / "p" / "lock", "rw")
    # The host is not stalled: it opens the file for writing and takes every write lock.
    assert host == {"open_wr": 0, "flock_ex": 0, "ofd_wr": 0, "posix_wr": 0}, explain(r)
    assert said(r) == {"lease": errno.EACCES, "flock_sh": errno.ENOLCK,
                       "flock_ex": errno.ENOLCK, "ofd_rd": errno.ENOLCK,
                       "posix_rd": errno.ENOLCK}, explain(r)
    # In the project the box's locks are real (the host's write locks wait for them);
    # a lease is refused there too.
    assert said(mine) == {"lease": errno.EACCES, "flock_sh": 0, "flock_ex": 0,
                          "ofd_rd": 0, "posix_rd": 0}, explain(mine)
    assert host_of_mine == {"open_wr": 0, "flock_ex": errno.EWOULDBLOCK,
                            "ofd_wr": errno.EAGAIN, "posix_wr": errno.EAGAIN}


WAITER = r"""
import ctypes, fcntl, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDWR)
open("/tmp/ready", "w").close()
t = time.monotonic()
rc = libc.flock(fd, fcntl.LOCK_EX)          # waits for the host's lock to go
print("flock", rc, ctypes.get_errno() if rc else 0, round(time.monotonic() - t, 1))
fd2 = os.open(sys.argv[1], os.O_RDWR)
rc = libc.fcntl(fd2, 38, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))  # OFD_SETLKW
print("ofd_wait", rc, ctypes.get_errno() if rc else 0)
"""


@pytest.mark.parametrize("box", BOXES[:1] + BOXES[2:3])
def test_a_blocking_lock_in_the_project_waits_for_the_host_s_and_then_holds(
        base: Path, box: str) -> None:
    path = base / "p" / "lock"
    with launcher(box) as warm, Session.open(str(base / "p"), SandboxSettings(
            hide_defaults=False), warm=warm) as session:
        tmp = Path(session.policy.private_tmp)
        (tmp / "ready").unlink(missing_ok=True)
        host = os.open(path, os.O_RDWR)
        fcntl.flock(host, fcntl.LOCK_EX)
        got: dict[str, RunResult] = {}
        t = threading.Thread(target=lambda: got.setdefault("r", session.run(
            [PY, "-c", WAITER, str(path)], timeout=60)))
        t.start()
        try:
            while not (tmp / "ready").exists() and t.is_alive():
                time.sleep(0.01)
            time.sleep(0.5)
        finally:
            os.close(host)  # the host's lock goes: the box's wait ends
            t.join(70)
    r = got["r"]
    lines = [line.split() for line in r.stdout.decode().splitlines()]
    assert r.ok and lines[0][:3] == ["flock", "0", "0"], explain(r)
    assert float(lines[0][3]) >= 0.3, explain(r)
    # flock and fcntl locks are kinds apart: the OFD write lock is had at once.
    assert lines[1] == ["ofd_wait", "0", "0"], explain(r)
