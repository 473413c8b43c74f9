"""The launchers of a box per run (sandbox/linux/warm/guardinit.c, compiled; sandbox/linux/warm/
guarded.py): the command's start, end and descriptors, the compiled launcher's own
answers and the supervisor it becomes (also as a warm run's PID 1, from the compiled
starter, sandbox/linux/warm/warmstart.c), and how it is built and kept (sandbox/linux/initcache.py).
Real boxes, real host servers, root and plain user alike."""

from __future__ import annotations

import ast
import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers.launchers import PER_RUN, launcher

from network import test_unix_guard
from network.test_unix_guard import RACE, World, out
from sandbox.linux import initcache, sockets
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable
# The compiled launcher's own answers and the supervisor it becomes: the same code
# starts a box per run's command and, as a warm run's PID 1, a warm box's.
COMPILED = pytest.mark.parametrize("box", ("per-run", "warm"))
world = test_unix_guard.world  # the same host services beside a project

# PID 1 is still the compiled launcher (no supervisor started), or what it became.
PID1 = """
def pid1():
    cmd = open("/proc/1/cmdline", "rb").read().split(b"\\0")
    return "launcher" if cmd[0].startswith(b"/proc/self/fd/") else cmd[3].decode().rsplit("/")[-1]
"""

TRY = PID1 + """
import socket
def connect(path, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_UNIX, kind | socket.SOCK_NONBLOCK)
    try:
        s.connect(path)
        return "reached"
    except OSError as err:
        return err.errno
"""


@COMPILED
def test_a_socket_that_is_not_there_is_answered_by_the_launcher_itself(world: World,
                                                                        box: str) -> None:
    # nscd's socket (glibc asks it at each user lookup), a relative path, a path through
    # a file: the kernel's own answers, and no supervisor started for them.
    code = TRY + """
import subprocess
got = [connect(p) for p in ("/run/nscd/socket", "not-here.sock", "/etc/passwd/x.sock")]
subprocess.run(["id"], check=True, capture_output=True)
subprocess.run(["ls", "-l", "/"], check=True, capture_output=True)
print(got, pid1())
"""
    assert out(world.run(code, box=box)) == "[2, 2, 20] launcher\n"


@pytest.mark.parametrize(("how", "want"), [
    # An abstract address: the box's own (its network namespace's); reached.
    ("l = socket.socket(socket.AF_UNIX); l.bind('\\0hs-abstract'); l.listen()\n"
     "print(connect('\\0hs-abstract'))", "reached"),
    # A path that is there but no socket: refused as the kernel refuses it.
    ("print(connect('/etc/passwd'))", str(errno.ECONNREFUSED)),
    # The box's own socket in /tmp.
    ("l = socket.socket(socket.AF_UNIX); l.bind('/tmp/own.sock'); l.listen()\n"
     "print(connect('/tmp/own.sock'))", "reached"),
    # A datagram with an address.
    ("d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind('/tmp/d.sock')\n"
     "print(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', '/tmp/d.sock'))",
     "1"),
    # Another family: TCP on the box's own loopback.
    ("l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n"
     "print(socket.create_connection(l.getsockname()).getpeername() == l.getsockname())",
     "True"),
], ids=["abstract", "not-a-socket", "own", "datagram", "tcp"])
@COMPILED
def test_a_call_that_needs_judgement_starts_the_supervisor(world: World, how: str,
                                                          want: str, box: str) -> None:
    code = TRY + how + "\nprint(pid1())\n"
    assert out(world.run(code, box=box)) == f"{want}\nguardmain.py\n"


@COMPILED
def test_a_command_cannot_interrupt_the_supervisor_s_start(world: World, box: str) -> None:
    # The interpreter the launcher becomes would take SIGINT as KeyboardInterrupt from
    # its start until the supervisor set it back: a command sending SIGINT to PID 1
    # meanwhile ended its own guard, and so its box. Ignored from the exec on, the
    # signal is dropped, as the kernel drops it for an init at the default.
    code = TRY + """
import os, signal, time
pid = os.fork()
if pid == 0:
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        try:
            os.kill(1, signal.SIGINT)
        except OSError:
            pass
    os._exit(0)
time.sleep(0.05)  # the signals are flying
l = socket.socket(socket.AF_UNIX); l.bind('\\0hs-sigint'); l.listen()
got = [connect('\\0hs-sigint'), pid1()]
os.waitpid(pid, 0)
got.append(connect('\\0hs-sigint'))
print(got)
"""
    for _ in range(3):
        r = world.run(code, box=box)
        assert out(r) == "['reached', 'guardmain.py', 'reached']\n", r.stderr


@COMPILED
def test_the_supervisor_started_late_still_refuses_a_host_socket(world: World, box: str) -> None:
    stream = world.serve("agent.sock")
    dgram = world.serve("log.sock", socket.SOCK_DGRAM)
    code = TRY + f"""
got = [connect("/run/nscd/socket"), pid1()]
l = socket.socket(socket.AF_UNIX); l.bind("/tmp/own.sock"); l.listen()
got += [connect("/tmp/own.sock"), pid1(), connect({stream.path!r})]
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", {dgram.path!r})
except OSError as err:
    got.append(err.errno)
print(got)
"""
    assert out(world.run(code, box=box)) == \
        "[2, 'launcher', 'reached', 'guardmain.py', 13, 13]\n"
    assert stream.seen == 0 and dgram.seen == 0


@COMPILED
def test_a_race_on_the_address_after_a_miss_never_reaches_the_host(world: World, box: str) -> None:
    server = world.serve("agent.sock")
    code = TRY + "print(connect('/run/nscd/socket'), pid1())\n" + RACE.format(path=server.path)
    assert out(world.run(code, box=box)) == "2 launcher\nTrue True\n"
    assert server.seen == 0


MISS_RACE = """
import ctypes, socket, struct, threading, time
libc = ctypes.CDLL(None, use_errno=True)
def name(path):
    return struct.pack("=H", socket.AF_UNIX) + path.encode() + b"\\0"
size = max(len(name("/tmp/not-here.sock")), len(name({path!r})))
good = name("/tmp/not-here.sock").ljust(size, b"\\0")
bad = name({path!r}).ljust(size, b"\\0")
buf = ctypes.create_string_buffer(good, size)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, bad, size)
        ctypes.memmove(buf, good, size)
flipper = threading.Thread(target=flip)
flipper.start()
errors = set()
end = time.monotonic() + 3
while time.monotonic() < end:
    s = socket.socket(socket.AF_UNIX)
    errors.add(0 if libc.connect(s.fileno(), buf, size) == 0 else ctypes.get_errno())
    s.close()
stop = True
flipper.join()
print(0 in errors, 2 in errors, 13 in errors)
"""


@COMPILED
def test_a_race_between_a_missing_path_and_a_host_socket_is_lost(world: World, box: str) -> None:
    # The launcher refuses what it reads as missing; whatever it reads as there is the
    # supervisor's to read again and judge.
    server = world.serve("agent.sock")
    assert out(world.run(MISS_RACE.format(path=server.path), box=box)) == \
        "False True True\n"
    assert server.seen == 0


HANDOFF_REACH = TRY + """
import ctypes, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
got, stop = [], False
def reach():
    # Through the exec: the new program is dumpable until it says otherwise.
    while not stop:
        got.append(libc.ptrace(16, 1, 0, 0) == 0)                      # PTRACE_ATTACH
        pidfd = libc.syscall(434, 1, 0)                                 # pidfd_open
        got.extend(libc.syscall(438, pidfd, n, 0) >= 0 for n in range(3, 8))
        os.close(pidfd)
threads = [threading.Thread(target=reach) for _ in range(2)]
for t in threads:
    t.start()
l = socket.socket(socket.AF_UNIX); l.bind("/tmp/own.sock"); l.listen()
print(connect("/tmp/own.sock"), pid1())
for _ in range(200):
    connect("/tmp/own.sock")
stop = True
for t in threads:
    t.join()
print(any(got), len(got) > 100)
"""


@COMPILED
def test_the_supervisor_cannot_be_reached_through_its_start(world: World, box: str) -> None:
    assert out(world.run("import os\n" + HANDOFF_REACH, box=box, timeout=30)) == \
        "reached guardmain.py\nFalse True\n"


STATUS = TRY + """
def status(pid):
    keep = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp_filters")
    with open(f"/proc/{pid}/status") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f) if k in keep}
before = status(1)
l = socket.socket(socket.AF_UNIX); l.bind("/tmp/own.sock"); l.listen()
print(connect("/tmp/own.sock"), pid1())
print(before)
print(status(1))
print(status("self"))
"""


@COMPILED
def test_the_supervisor_holds_ptrace_alone_outside_the_guard_s_filter(world: World,
                                                                       box: str) -> None:
    got = out(world.run(STATUS, box=box)).splitlines()
    assert got[0] == "reached guardmain.py"
    ptrace = f"{1 << 19:016x}"
    # The launcher: CAP_SYS_PTRACE, ambient too (to carry it through the exec).
    assert ast.literal_eval(got[1]) == {
        "CapInh": ptrace, "CapPrm": ptrace, "CapEff": ptrace, "CapBnd": ptrace,
        "CapAmb": ptrace, "NoNewPrivs": "1", "Seccomp_filters": "1"}
    # The supervisor it became: that alone, under the session's filter and not the
    # guard's.
    assert ast.literal_eval(got[2]) == {
        "CapInh": "0" * 16, "CapPrm": ptrace, "CapEff": ptrace, "CapBnd": ptrace,
        "CapAmb": "0" * 16, "NoNewPrivs": "1", "Seccomp_filters": "1"}
    # The command: nothing, under both (but, for root's stand-in, root's own on the
    # files of its ids: CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER).
    zero = f"{0b1011:016x}" if os.geteuid() == 0 else "0" * 16
    assert ast.literal_eval(got[3]) == {
        "CapInh": zero, "CapPrm": zero, "CapEff": zero, "CapBnd": zero, "CapAmb": zero,
        "NoNewPrivs": "1", "Seccomp_filters": "2"}


@COMPILED
def test_a_supervisor_that_cannot_start_leaves_every_call_refused(
        world: World, monkeypatch: pytest.MonkeyPatch, box: str) -> None:
    monkeypatch.setattr(sockets, "interpreter", lambda: "/nonexistent/python3")
    server = world.serve("agent.sock")
    code = TRY + f"""
l = socket.socket(socket.AF_UNIX); l.bind("/tmp/own.sock"); l.listen()
print([connect("/run/nscd/socket"), connect("/tmp/own.sock"), connect({server.path!r}),
       connect("/tmp/own.sock"), pid1()])
"""
    r = world.run(code, box=box)
    assert out(r) == "[2, 13, 13, 13, 'launcher']\n"
    assert r.stderr == (b"harness-sandbox: the Unix-socket guard's supervisor could not "
                        b"start (No such file or directory): each call it would judge is "
                        b"refused\n")
    assert server.seen == 0


# -- the command's start and end, by either launcher ----------------------------------


@pytest.fixture
def project() -> Iterator[Path]:
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="hs-launch-", dir="/var/tmp")))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(project: Path, box: str, argv: list[str], *, timeout: float = 60,
         env_extra: dict[str, str] | None = None) -> RunResult:
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        return s.run(argv, timeout=timeout, env_extra=env_extra)


@PER_RUN
def test_a_command_that_cannot_start_is_said_as_bwrap_says_it(project: Path, box: str) -> None:
    r = _run(project, box, ["no-such-command-here"])
    assert (r.outcome, r.errno, r.error) == ("failed_to_start", errno.ENOENT,
                                             "No such file or directory")
    (project / "not-executable").write_text("echo no\n")
    r = _run(project, box, [str(project / "not-executable")])
    assert (r.outcome, r.errno) == ("failed_to_start", errno.EACCES)


@PER_RUN
def test_a_bare_name_is_found_on_the_command_s_path_and_a_script_run_by_sh(
        project: Path, box: str) -> None:
    tool = project / "bin" / "hs-tool"
    tool.parent.mkdir()
    tool.write_text('echo "run by sh: $0 $1"\n')  # no #!: ENOEXEC, then /bin/sh
    tool.chmod(0o755)
    r = _run(project, box, ["hs-tool", "arg"],
             env_extra={"PATH": f"{tool.parent}:/usr/bin:/bin"})
    assert (r.returncode, r.stdout) == (0, f"run by sh: {tool} arg\n".encode()), r.stderr


@PER_RUN
def test_a_command_cannot_signal_its_pid_1(project: Path, box: str) -> None:
    # The kernel drops every signal a process of the namespace sends its init at the
    # default; the Python launcher's interpreter caught SIGINT (KeyboardInterrupt),
    # so a command could end its own PID 1, its guard with it.
    r = _run(project, box, ["sh", "-c", "for s in INT TERM HUP QUIT USR1 USR2 PIPE ALRM;"
                            " do kill -$s 1; done; sleep 0.1; echo alive; exit 3"])
    assert (r.outcome, r.returncode, r.stdout) == ("exited", 3, b"alive\n"), r.stderr


@PER_RUN
def test_a_command_killed_by_a_signal_exits_128_plus_n(project: Path, box: str) -> None:
    r = _run(project, box, ["sh", "-c", "kill -TERM $$"])
    assert (r.outcome, r.returncode) == ("exited", 128 + 15)
    r = _run(project, box, ["sh", "-c", "exit 7"])
    assert (r.outcome, r.returncode) == ("exited", 7)


@PER_RUN
def test_a_daemon_does_not_outlive_the_run(project: Path, box: str) -> None:
    marker = f"hs-daemon-{os.getpid()}-{time.monotonic_ns()}"
    daemon = f"{PY} -c 'import os, time; os.fork() or time.sleep(300)' {marker}"
    start = time.monotonic()
    r = _run(project, box, ["sh", "-c", f"(setsid {daemon} &); echo started"], timeout=60)
    took = time.monotonic() - start
    assert (r.returncode, r.stdout) == (0, b"started\n")
    assert took < 30
    deadline = time.monotonic() + 5
    left: list[int] = [-1]
    while left and time.monotonic() < deadline:
        left = [p.pid for p in psutil.process_iter(["cmdline"])
                if marker in (p.info["cmdline"] or [])]
        time.sleep(0.1)
    assert not left


PRELOAD = """#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) { dprintf(2, "loaded in %d\\n", getpid()); }
"""


@PER_RUN
def test_a_library_the_run_s_environment_preloads_stays_out_of_the_box_s_pid_1(
        project: Path, box: str) -> None:
    # The box's PID 1 arms the guard, and then answers for it: a library of the
    # project's named by LD_PRELOAD would run there outside the guard's filter.
    (project / "preload.c").write_text(PRELOAD)
    subprocess.run(["/usr/bin/cc", "-shared", "-fPIC", "-o", str(project / "preload.so"),
                    str(project / "preload.c")], check=True)
    # The command reaches the supervisor too (its own socket): started with the
    # variable, it would load the library.
    code = ("import socket; l = socket.socket(socket.AF_UNIX); l.bind('/tmp/own.sock');"
            "l.listen(); socket.socket(socket.AF_UNIX).connect('/tmp/own.sock');"
            "print(open('/proc/1/cmdline', 'rb').read().split(b'\\0')[3].rsplit(b'/')[-1])")
    r = _run(project, box, [PY, "-c", code],
             env_extra={"LD_PRELOAD": str(project / "preload.so")})
    assert r.returncode == 0, r.stderr
    want = b"guarded.py" if box == "per-run-python" else b"guardmain.py"
    assert r.stdout == b"b'" + want + b"'\n"
    pids = {int(line.split()[-1]) for line in r.stderr.decode().splitlines()
            if line.startswith("loaded in ")}
    assert pids and 1 not in pids, r.stderr


# -- building and keeping the compiled launcher ---------------------------------------


@pytest.fixture
def private() -> Iterator[Path]:
    """A private temp root of this user's (mode 0700), as the session's is."""
    root = Path(tempfile.mkdtemp(prefix="hs-initcache-", dir="/var/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kept(root: Path) -> Path:
    (found,) = (p for p in root.glob("guardinit-*") if not p.is_symlink())
    return found


def test_the_compiled_launcher_is_built_once_and_kept(private: Path) -> None:
    first = initcache._made(str(private))
    assert first.program is not None, first.how
    kept = _kept(private)
    st = kept.lstat()
    assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_nlink) == ("0o700", os.getuid(), 1)
    again = initcache._made(str(private))
    assert again.program == first.program and _kept(private).lstat().st_ino == st.st_ino


def test_an_update_of_the_c_library_builds_it_again_and_removes_the_old(
        private: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The launcher links the C library in: its fixes reach the box only by a new build.
    assert initcache.static_libc() is not None  # what this machine's compiler links
    libc = tmp_path / "libc.a"
    libc.write_bytes(b"the C library as it was")
    monkeypatch.setattr(initcache, "static_libc", lambda: str(libc))
    assert initcache._made(str(private)).program is not None
    old = _kept(private)
    stray = private / "guardinit-0123"  # a build of another source, long gone
    stray.write_bytes(b"old")
    outside = tmp_path / "keep"
    outside.write_text("x")
    (private / "guardinit-link").symlink_to(outside)
    libc.write_bytes(b"the C library with its fixes")  # an update: a new file's identity
    assert initcache._made(str(private)).program is not None
    names = sorted(p.name for p in private.glob("guardinit-*"))
    assert old.name not in names and stray.name not in names
    assert "guardinit-link" in names and outside.read_text() == "x"  # never followed
    assert len(names) == 2


def _evil(private: Path, marker: Path) -> Path:
    """A program that would leave ``marker`` if it were ever run."""
    src = private / "evil.c"
    src.write_text('#include <stdio.h>\nint main(void) { FILE *f = fopen("'
                   + str(marker) + '", "w"); return f == NULL; }\n')
    out_path = private / "evil"
    subprocess.run(["/usr/bin/cc", "-o", str(out_path), str(src)], check=True)
    return out_path


def _tamper(how: str, kept: Path, evil: Path) -> None:
    if how == "link":
        evil.chmod(0o700)
        kept.unlink()
        kept.symlink_to(evil)
    elif how == "hard-link":
        kept.unlink()
        evil.chmod(0o700)
        os.link(evil, kept)
    elif how == "owner":
        shutil.copyfile(evil, kept)
        os.chown(kept, 65534, 65534)
        kept.chmod(0o700)
    else:
        shutil.copyfile(evil, kept)
        kept.chmod(int(how, 8))


TAMPERS = ["0755", "0600", "0770", "link", "hard-link",
           pytest.param("owner", marks=pytest.mark.skipif(
               os.geteuid() != 0, reason="giving a file away takes root"))]


@pytest.mark.parametrize("how", TAMPERS)
def test_a_kept_launcher_not_to_trust_is_built_again_and_never_run(
        private: Path, project: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert initcache._made(str(private)).program is not None
    kept = _kept(private)
    marker = project / "ran"
    _tamper(how, kept, _evil(private, marker))
    assert initcache.read_kept(str(kept)) is None
    monkeypatch.setattr(initcache, "load", lambda root: initcache._made(str(private)))
    r = _run(project, "per-run", ["sh", "-c", "echo ok"])
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r.stderr
    assert not marker.exists()
    st = kept.lstat()
    assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_nlink) == ("0o700", os.getuid(), 1)
    assert initcache.read_kept(str(kept)) is not None


def test_without_a_compiler_the_python_launcher_starts_the_box(
        private: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(initcache, "COMPILERS", ("/nonexistent/cc",))
    got = initcache._made(str(private))
    assert got == initcache.Launcher(
        None, "the Python launcher: no C compiler (cc or gcc in /usr/bin or /bin)")
    monkeypatch.setattr(initcache, "load", lambda root: got)
    code = "print(open('/proc/1/cmdline', 'rb').read().split(b'\\0')[3].rsplit(b'/')[-1])"
    with Session.open(str(project), warm=False) as s:
        r = s.run([PY, "-c", code])
    assert r.stdout == b"b'guarded.py'\n", r.stderr


def test_a_launcher_that_does_not_build_leaves_the_python_one(
        private: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = private / "broken.c"
    bad.write_text("int main(void) { return }\n")
    monkeypatch.setattr(initcache, "SOURCES", (str(bad),))
    got = initcache._made(str(private))
    assert got.program is None
    assert got.how.startswith("the Python launcher: the compiled one could not be built ("), \
        got.how
    assert not list(private.glob("guardinit-*"))
