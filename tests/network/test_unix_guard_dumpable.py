"""The Unix-socket guard and a caller that made itself not dumpable (ssh does, before
it connects): the guard's thread keeps CAP_SYS_PTRACE in the box's user namespace, and
only that, so it can take such a caller's socket; the command keeps nothing. Real boxes,
warm and per run (by either launcher); root and plain user alike."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers.launchers import EACH_BOX, launcher

from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation]

BOTH = EACH_BOX
CAP_SYS_PTRACE = 1 << 19
# CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER: what a box of root's stand-in keeps.
OWNERS = 0b1011

NOT_DUMPABLE = "import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"


@pytest.fixture
def host_socket() -> Iterator[Path]:
    """A server on a pathname socket outside the box's folders (not under /tmp, which
    the box sees as its own)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-guard-"))
    folder.chmod(0o755)
    path = folder / "srv.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    path.chmod(0o777)
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"host\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield path
    srv.close()
    shutil.rmtree(folder, ignore_errors=True)


def _connect(path: str, server: bool) -> str:
    listen = (f"srv = socket.socket(socket.AF_UNIX); srv.bind({path!r}); srv.listen()\n"
              "threading.Thread(target=srv.accept, daemon=True).start()\n")
    return ("import socket, threading\n" + (listen if server else "") + NOT_DUMPABLE
            + "c = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            f"    c.connect({path!r}); print('connected')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")


@BOTH
def test_a_caller_that_is_not_dumpable_reaches_the_boxs_own_socket(
        project: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(
            str(project), SandboxSettings(hide_defaults=False), warm=warm) as s:
        r = s.run(["python3", "-c", _connect("/tmp/own.sock", server=True)])
    assert r.stdout == b"connected\n", r.stderr


@BOTH
def test_a_caller_that_is_not_dumpable_is_still_refused_a_host_socket(
        project: Path, host_socket: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(
            str(project), SandboxSettings(hide_defaults=False), warm=warm) as s:
        r = s.run(["python3", "-c", _connect(str(host_socket), server=False)])
    assert r.stdout == b"refused 13\n", r.stderr


@BOTH
def test_the_command_holds_no_capability_in_any_set(project: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status"])
    sets = dict(line.split(":\t") for line in r.stdout.decode().splitlines())
    assert set(sets) == {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}
    # Root's stand-in keeps root's own on the files of its ids, in its own user
    # namespace (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER: sandbox/linux/standin.py).
    assert all(int(v, 16) == (OWNERS if os.geteuid() == 0 else 0)
               for v in sets.values()), sets


@BOTH
def test_the_guards_thread_holds_ptrace_alone(project: Path, box: str) -> None:
    marker = f"hs-guard-caps-{os.getpid()}-{time.monotonic_ns()}"
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        t = threading.Thread(target=s.run, args=(["sh", "-c", "sleep 2; true", marker],))
        t.start()
        init = None
        deadline = time.monotonic() + 10
        while init is None and time.monotonic() < deadline:
            for p in psutil.process_iter(["cmdline"]):
                cmd = p.info["cmdline"] or []
                if cmd[:1] == ["sh"] and marker in cmd:  # the command; its parent, PID 1
                    init = p.parent()
            time.sleep(0.05)
        assert init is not None
        caps = []
        for task in os.listdir(f"/proc/{init.pid}/task"):
            with open(f"/proc/{init.pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("CapEff", "CapPrm", "CapBnd")):
                        caps.append(int(line.split()[1], 16))
        t.join()
    # (The Python launcher's own thread keeps the stand-in's OWNERS for the command it
    # spawns, not effective.)
    allowed = (0, CAP_SYS_PTRACE, *((OWNERS,) if os.geteuid() == 0 else ()))
    assert caps and all(c in allowed for c in caps), [hex(c) for c in caps]
    assert CAP_SYS_PTRACE in caps
