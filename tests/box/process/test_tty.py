"""A terminal when asked: ``Session.run(..., tty=...)``, ``run --tty`` and serve's
``"tty": true`` give the boxed command a pty made for that run (sandbox/process/pty.py),
its controlling terminal in the box, with the size asked for; its output is captured
and streamed; TIOCSTI on it is still refused; Ctrl-C typed into it is SIGINT to the
command; nothing of it outlives the run. Real bwrap, real ptys, each launcher (the warm
box's two starters, a box per run's two launchers); root and plain user alike."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.launchers import EACH_BOX, launcher
from helpers.paths import REPO
from helpers.serve_client import Serve

from sandbox.process import pty as run_pty
from sandbox.process.pipes import Pipes
from sandbox.process.pty import TtySize
from sandbox.session import Session

pytestmark = pytest.mark.isolation

CLI = [sys.executable, "-m", "launchers"]
# What the command sees of its streams and its terminal.
LOOK = ("if test -t 0 && test -t 1 && test -t 2; then echo tty; else echo no-tty; fi; "
        "stty size 2>/dev/null || echo no-size; "
        "if (: </dev/tty) 2>/dev/null; then echo ctty; else echo no-ctty; fi")
# TIOCSTI on each stream and on /dev/tty, each refused with the table's errno (EPERM);
# then nothing was pushed into the run's own terminal either.
STI = """
import errno, fcntl, os, select, termios
fds = [0, 1, 2]
try:
    fds.append(os.open("/dev/tty", os.O_RDWR))
except OSError as e:
    print("no /dev/tty", e.errno)
for fd in fds:
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print(fd, "pushed")
    except OSError as e:
        print(fd, errno.errorcode[e.errno])
print("pending", select.select([0], [], [], 0.3)[0])
"""
STI_REFUSED = b"0 EPERM\r\n1 EPERM\r\n2 EPERM\r\n3 EPERM\r\npending []\r\n"


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(tmp_path / "hh")
    (tmp_path / "hh").mkdir()
    return env


@EACH_BOX
def test_a_tty_run_is_on_a_terminal_of_its_size_and_a_plain_run_is_not(
        project: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        on = s.run(["sh", "-c", LOOK + "; tput cols; echo err >&2"], tty=TtySize(100, 30))
        off = s.run(["sh", "-c", LOOK])
        default = s.run(["sh", "-c", "stty size"], tty=True)
    # All three streams are the terminal: stderr comes in stdout, as a terminal shows it.
    assert (on.returncode, on.stdout, on.stderr) == (
        0, b"tty\r\n30 100\r\nctty\r\n100\r\nerr\r\n", b""), on
    assert (off.returncode, off.stdout) == (0, b"no-tty\nno-size\nno-ctty\n"), off
    assert default.stdout == b"24 80\r\n", default


@EACH_BOX
def test_the_runs_terminal_has_a_name_in_the_box(project: Path, box: str) -> None:
    """``tty`` and ``ttyname()`` name the run's terminal, though it is not in the box's
    own /dev/pts (the host made it): by a name in /dev that leads to the stream, which
    is the terminal's device and inode. A stream that is no terminal has no name."""
    script = ("tty; python3 -c 'import os; print(os.ttyname(1))'; "
              "tty </dev/null; echo rc=$?; test -c \"$(tty)\" && echo a-terminal")
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", script], tty=True)
    lines = r.stdout.decode().split("\r\n")
    assert lines[0].startswith("/dev/tty-of-the-run-") and lines[1] == lines[0], r
    assert lines[2:5] == ["not a tty", "rc=1", "a-terminal"], r


@EACH_BOX
def test_tiocsti_on_the_runs_terminal_is_still_refused(project: Path, box: str) -> None:
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        r = s.run(["python3", "-c", STI], tty=True)
    assert (r.returncode, r.stdout) == (0, STI_REFUSED), r


@EACH_BOX
def test_ctrl_c_typed_into_the_terminal_is_sigint_to_the_command(
        project: Path, box: str) -> None:
    class CtrlC(Pipes):
        def keep(self, fd: int, chunk: bytes) -> None:
            super().keep(fd, chunk)
            if b"ready" in self.bufs[fd]:
                getattr(self, "type_in")(b"\x03")  # noqa: B009 (the terminal's, mixed in)

    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        started = time.monotonic()
        r = s.run(["sh", "-c", "echo ready; exec sleep 30"], tty=True, pipes=CtrlC,
                  timeout=20)
    # SIGINT, said as the box says a signal: 128+2.
    assert (r.outcome, r.returncode) == ("exited", 130), r
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "per-run"])
def test_esc_and_a_timeout_end_a_tty_run_as_they_end_any(project: Path, warm: bool) -> None:
    esc = threading.Event()
    threading.Timer(0.5, esc.set).start()
    with Session.open(str(project), warm=warm) as s:
        cancelled = s.run(["sleep", "30"], tty=True, cancel=esc, timeout=20)
        timed_out = s.run(["sleep", "30"], tty=True, timeout=0.5)
    assert (cancelled.outcome, cancelled.exit) == ("cancelled", 130), cancelled
    assert (timed_out.outcome, timed_out.exit) == ("timed_out", 124), timed_out
    assert cancelled.elapsed < 10 and timed_out.elapsed < 10


def _terminals() -> set[tuple[str, str]]:
    """This process's descriptors of a pty (a master reads as /dev/ptmx)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == "/dev/ptmx" or target.startswith("/dev/pts/"):
            found.add((fd, target))
    return found


@EACH_BOX
def test_nothing_of_the_terminal_outlives_the_run(
        project: Path, box: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def recorded() -> tuple[int, int]:
        master, slave = os.openpty()
        made.append(os.ttyname(slave))
        return master, slave

    monkeypatch.setattr(run_pty, "_openpty", recorded)
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        before = _terminals()
        # A daemon that holds the terminal, and one in a session of its own.
        r = s.run(["sh", "-c", "sleep 60 & setsid sleep 60 & echo bg"], tty=True)
        after = _terminals()
        assert (r.returncode, r.stdout) == (0, b"bg\r\n"), r
        assert len(made) == 1
        # A devpts node is there while either end is open anywhere.
        assert not os.path.exists(made[0]), made
        assert before == after


def test_the_harnesss_own_terminal_is_never_the_boxs(project: Path) -> None:
    # The harness runs on a terminal of its own (here a pty this test holds): the box's
    # command, on the run's terminal, can push nothing into it, and has no way to it.
    script = ("import sys, select\n"
              "from sandbox.session import Session\n"
              f"with Session.open({str(project)!r}) as s:\n"
              f"    r = s.run(['python3', '-c', {STI!r}], tty=True)\n"
              "print('box', repr(r.stdout))\n"
              "print('harness pending', select.select([0], [], [], 0.3)[0])\n")
    pid, master = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", script])
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert f"box {STI_REFUSED!r}".encode() in out, out
    assert b"harness pending []" in out, out


def test_the_host_runner_gives_no_terminal(project: Path) -> None:
    with Session.open(str(project)) as s, pytest.raises(ValueError, match="boxed runs only"):
        s.run(["/bin/true"], boxed=False, tty=True)


def test_run_tty_through_the_cli(project: Path) -> None:
    def run(*options: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*CLI, "run", "--project", str(project), *options, "--",
                               "sh", "-c", LOOK + "; read x; echo got $x"],
                              input=b"typed\n", capture_output=True, cwd=REPO, timeout=60,
                              check=False)

    sized, plain, bad = run("--tty-size", "100x30"), run(), run("--tty-size", "100")
    # The input is typed into the terminal, which echoes it as it is typed.
    lines = sized.stdout.split(b"\r\n")
    assert sized.returncode == 0 and lines[-2:] == [b"got typed", b""], sized
    assert sorted(lines) == sorted([b"typed", b"tty", b"30 100", b"ctty", b"got typed", b""])
    assert (plain.returncode, plain.stdout) == (
        0, b"no-tty\nno-size\nno-ctty\ngot typed\n"), plain
    assert bad.returncode == 125 and b"invalid COLSxROWS value" in bad.stderr, bad
    # No terminal of ours to take the size from: 80x24.
    r = subprocess.run([*CLI, "run", "--project", str(project), "--tty", "--", "stty", "size"],
                       stdin=subprocess.DEVNULL, capture_output=True, cwd=REPO, timeout=60,
                       check=False)
    assert (r.returncode, r.stdout) == (0, b"24 80\r\n"), r
    host = subprocess.run([*CLI, "run", "--project", str(project), "--host", "--tty", "--",
                           "/bin/true"], capture_output=True, cwd=REPO, timeout=60,
                          check=False)
    assert host.returncode == 125 and b"boxed runs" in host.stderr, host


def test_serve_runs_on_a_terminal_when_asked(project: Path, home: dict[str, str]) -> None:
    s = Serve("--project", str(project), env=home, cwd=REPO)
    try:
        s.result("open")
        whole = s.result("run", {"argv": ["sh", "-c", LOOK], "tty": True, "cols": 90,
                                 "rows": 20})
        plain = s.result("run", {"argv": ["sh", "-c", LOOK]})
        rid = s.request("run", {"argv": ["sh", "-c", LOOK + "; echo err >&2"], "tty": True,
                                "stream": True})
        streamed = s.reply(rid)
        events = s.events.get(json.dumps(rid), [])
        no_tty = s.call("run", {"argv": ["true"], "cols": 90})
        host = s.call("run", {"argv": ["/bin/true"], "host": True, "tty": True})
    finally:
        s.close()
    assert (whole["exit"], whole["stdout"], whole["stderr"]) == (
        0, "tty\r\n20 90\r\nctty\r\n", ""), whole
    assert plain["stdout"] == "no-tty\nno-size\nno-ctty\n", plain
    assert streamed["result"]["exit"] == 0, streamed
    assert {e["stream"] for e in events} == {"stdout"}, events
    assert "".join(e["data"] for e in events) == "tty\r\n24 80\r\nctty\r\nerr\r\n", events
    for refused in (no_tty, host):
        assert refused["error"]["code"] == "invalid_params", refused
