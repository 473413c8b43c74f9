"""The hardened box, for real: the system-call filter, the keyring, the bounds, zombies.

Every attempt is made from inside a real box, as root and as the unprivileged user.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.linux import seccomp
from sandbox.plan import RunResult
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable
ROOT = os.geteuid() == 0

# x86-64 numbers; the filter is by name, the test program calls by number.
NR = {"keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
      "io_uring_enter": 426, "io_uring_register": 427, "perf_event_open": 298, "bpf": 321,
      "userfaultfd": 323, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
      "finit_module": 313, "delete_module": 176, "personality": 135, "ioctl": 16,
      "clone": 56, "unshare": 272, "clone3": 435, "syslog": 103, "uselib": 134, "acct": 163,
      "quotactl": 179, "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
      "open": 2, "openat": 257, "creat": 85, "mknod": 133, "mknodat": 259, "mkdir": 83,
      "mkdirat": 258, "openat2": 437}

SMALL = SandboxSettings(hide_defaults=False, processes=64, memory="256M", tmp_size="8M",
                        shm_size="8M")


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-800:]!r} err={r.stderr[-800:]!r}"


@pytest.fixture
def project() -> Iterator[Path]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-hard-")))
    (base / "p").mkdir()
    try:
        yield base / "p"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def session(project: Path) -> Iterator[Session]:
    with Session.open(str(project), SMALL) as s:
        yield s


def py(session: Session, code: str, timeout: float = 60) -> RunResult:
    return session.run([PY, "-c", code], timeout=timeout)


CALL = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) for a in args])
    return rc, ctypes.get_errno()
"""


def _row_args(row: seccomp.Denial) -> tuple[int, ...]:
    """Arguments that match the row: the first test's value in its argument."""
    if not row.when:
        return (0, 0, 0, 0, 0, 0)
    args = [0] * 6
    test = row.when[0]
    args[test.arg] = test.value
    return tuple(args)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86-64's")
def test_each_denied_call_answers_its_errno_in_the_box(session: Session) -> None:
    lines = []
    for row in seccomp.DENIED:
        args = _row_args(row)
        lines.append(f"print({row.syscall!r}, *call({NR[row.syscall]}, *{args!r}))")
    r = py(session, CALL + "\n".join(lines))
    assert r.ok, explain(r)
    got = [line.split() for line in r.stdout.decode().splitlines()]
    for row, (name, rc, err) in zip(seccomp.DENIED, got, strict=True):
        assert (name, rc, int(err)) == (row.syscall, "-1", row.errno), (row, rc, err)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86-64's")
def test_the_filter_holds_for_the_i386_and_x32_calls_too(session: Session) -> None:
    # From a 64-bit process: int 0x80 uses the i386 table (keyctl is 288 there), and the
    # syscall instruction with bit 30 set is an x32 call (keyctl is 250 | 0x40000000).
    assert shutil.which("gcc"), "gcc is one of the packages scripts/_setup.sh installs"
    src = session.policy.private_tmp + "/abi.c"
    Path(src).write_text(
        "#include <stdio.h>\nint main(void){long r, x;"
        "__asm__ volatile(\"int $0x80\":\"=a\"(r):\"a\"(288L),\"b\"(0L),\"c\"(0L):\"memory\");"
        "__asm__ volatile(\"syscall\":\"=a\"(x):\"a\"(0x40000000L | 250L),\"D\"(0L),"
        "\"S\"(0L):\"rcx\",\"r11\",\"memory\");"
        "printf(\"%ld %ld\\n\", r, x);return 0;}\n")
    r = session.run(["sh", "-c", "gcc -o /tmp/abi /tmp/abi.c && /tmp/abi"], timeout=60)
    assert r.ok, explain(r)
    assert r.stdout.split() == [str(-errno.EPERM).encode()] * 2


def test_personality_keeps_the_default_and_the_query(session: Session) -> None:
    r = py(session, CALL + "print(call(135, 0)[0], call(135, 0xffffffff)[0], "
                           "call(135, 0x0040000), call(135, 0x1_0004_0000))")
    assert r.ok, explain(r)
    assert r.stdout.decode().split(" ", 2)[:2] == ["0", "0"]
    assert r.stdout.decode().count(f"(-1, {errno.EPERM})") == 2


def test_clone_of_a_new_namespace_is_refused_but_threads_and_forks_work(
        session: Session) -> None:
    code = CALL + (
        "import threading, subprocess\n"
        "print(call(272, 0x10000000), call(272, 0x40000000), call(272, 0x80))\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(1)); t.start(); t.join()\n"
        "pid = os.fork()\n"
        "if pid == 0: os._exit(7)\n"
        "print(out, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]),"
        " subprocess.run(['true']).returncode)\n")
    r = py(session, code)
    assert r.ok, explain(r)
    first, second = r.stdout.decode().splitlines()
    assert first.count(f"(-1, {errno.EPERM})") == 3
    assert second == "[1] 7 0"


def test_ordinary_work_still_works(session: Session, project: Path) -> None:
    script = (
        "set -e; git init -q . && git -c user.email=a@b -c user.name=a commit -q "
        "--allow-empty -m one && git log --oneline | wc -l; "
        f"{PY} -c 'import json, sqlite3, multiprocessing as m; "
        "print(m.Pool(2).map(abs, [-1, -2]))'; "
        "if command -v gcc >/dev/null; then printf 'int main(){return 3;}' > /tmp/a.c && "
        "gcc -o /tmp/a /tmp/a.c && { /tmp/a || echo rc=$?; }; else echo rc=3; fi")
    r = session.run(["sh", "-c", script], timeout=120)
    assert r.ok, explain(r)
    assert r.stdout.decode().split() == ["1", "[1,", "2]", "rc=3"]


KEYCTL = CALL + """
KEYCTL_READ, KEYCTL_UPDATE, SESSION = 11, 2, -3
buf = ctypes.create_string_buffer(64)
kid = int(sys.argv[1])
print(call(250, KEYCTL_READ, kid, ctypes.addressof(buf), 64), buf.value)
evil = ctypes.create_string_buffer(b"evil")
print(call(250, KEYCTL_UPDATE, kid, ctypes.addressof(evil), 4))
print(call(248, ctypes.addressof(ctypes.create_string_buffer(b"user")),
           ctypes.addressof(ctypes.create_string_buffer(b"planted")),
           ctypes.addressof(ctypes.create_string_buffer(b"x")), 1, SESSION & (2**64 - 1)))
"""


def _keyring_child(project: str, out: int) -> None:
    """In a fresh session keyring of its own: add a key, let a box try it, read it back."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    join = libc.syscall(ctypes.c_long(250), ctypes.c_long(1), None)  # KEYCTL_JOIN...
    assert join >= 0, ctypes.get_errno()
    kid = libc.syscall(ctypes.c_long(248), b"user", b"hs-test", b"original", ctypes.c_long(8),
                       ctypes.c_long(-3))
    assert kid > 0, ctypes.get_errno()
    with Session.open(project, SMALL) as s:
        r = s.run([PY, "-c", KEYCTL, str(kid)], timeout=30)
        listed = s.run(["sh", "-c", "cat /proc/keys /proc/key-users"], timeout=30)
    assert b"hs-test" not in listed.stdout, listed
    assert listed.stderr.count(b"Permission denied") == 2, listed
    buf = ctypes.create_string_buffer(64)
    n = libc.syscall(ctypes.c_long(250), ctypes.c_long(11), ctypes.c_long(kid), buf,
                     ctypes.c_long(64))
    os.write(out, repr((r.outcome, r.returncode, r.stdout.decode(), r.stderr.decode()[-300:],
                        buf.raw[:n].decode("latin-1"))).encode())


def test_the_keyring_cannot_be_read_or_changed_from_the_box(project: Path) -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            _keyring_child(str(project), write_end)
            code = 0
        except BaseException as err:
            os.write(write_end, repr(err).encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, data
    outcome, rc, out, box_err, after = eval(data)  # our own child's repr
    assert (outcome, rc) == ("exited", 0), (out, box_err)
    lines = out.splitlines()
    assert lines[0] == f"(-1, {errno.EPERM}) b''"
    assert lines[1] == f"(-1, {errno.EPERM})"
    assert lines[2] == f"(-1, {errno.EPERM})"
    assert after == "original"  # the host reads what it wrote


def test_tmp_and_dev_shm_stop_at_their_caps(session: Session) -> None:
    code = ("import errno, sys\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n"
            "        with open(path, 'wb') as f:\n"
            "            for _ in range(64): f.write(b'x' * (1 << 20)); f.flush()\n"
            "        print(path, 'filled')\n"
            "    except OSError as e: print(path, errno.errorcode[e.errno])\n")
    r = session.run([PY, "-c", code, "/dev/shm/fill"] + (["/tmp/fill"] if ROOT else []),
                    timeout=60)
    assert r.ok, explain(r)
    assert "/dev/shm/fill ENOSPC" in r.stdout.decode()
    if ROOT:
        assert "/tmp/fill ENOSPC" in r.stdout.decode()
        # and /tmp keeps its files across the session's runs
        again = session.run(["sh", "-c", "ls /tmp"], timeout=30)
        assert "fill" in again.stdout.decode()
    tmp = {b.name: b for b in session.hardening.bounds()}["tmp"]  # type: ignore[union-attr]
    assert (tmp.state == "in force") == ROOT, tmp


def test_a_fork_bomb_ends_at_its_bound_and_the_host_stays_responsive(
        session: Session) -> None:
    # Bounded and self-stopping: each process forks until refused, for 3 s at most.
    bomb = ("import os, time\n"
            "end = time.monotonic() + 3\n"
            "refused = 0\n"
            "while time.monotonic() < end:\n"
            "    try:\n"
            "        if os.fork() == 0: time.sleep(max(0, end - time.monotonic())); os._exit(0)\n"
            "    except BlockingIOError: refused += 1; break\n"
            "print('refused' if refused else 'not refused', flush=True)\n")
    t0 = time.monotonic()
    r = py(session, bomb, timeout=30)
    assert "refused" in r.stdout.decode() and "not refused" not in r.stdout.decode(), explain(r)
    probe = subprocess.run(["true"], timeout=5)
    assert probe.returncode == 0 and time.monotonic() - t0 < 20


def test_a_memory_hog_is_killed_at_its_bound_and_reported(session: Session) -> None:
    bounds = {b.name: b for b in session.hardening.bounds()}  # type: ignore[union-attr]
    if bounds["memory"].state != "in force":
        # Said, not pretended: an unprivileged user here has no cgroup to bound memory
        # (and the hog is not run: nothing would stop it short of the machine's end).
        assert not ROOT
        assert bounds["memory"].why
        return
    # Self-stopping: 1 GiB at most, four times the bound.
    hog = "x = []\nfor _ in range(64): x.append(b'x' * (16 << 20))\n"
    r = py(session, hog, timeout=60)
    assert r.outcome == "signaled" and r.signal == 9, explain(r)
    assert r.error == "killed at the box's memory bound (256M)"


def _zombie_children() -> list[int]:
    """This process's children that are zombies (the machine is shared: only ours)."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                kids = f.read().split()
        except OSError:
            continue  # a thread that ended since the listing
        for pid in kids:
            try:
                with open(f"/proc/{int(pid)}/stat", "rb") as g:
                    raw = g.read()
            except OSError:
                continue
            if raw[raw.rfind(b")") + 2 :].startswith(b"Z"):
                out.append(int(pid))
    return out


def test_no_zombie_is_left_after_many_boxed_runs(project: Path) -> None:
    # This machine's PID 1 does not reap. While the session is open the box inits are
    # adopted here and reaped; a leftover would show as a zombie child of this process
    # (or, once the session is closed and the subreaper role given back, under PID 1).
    with Session.open(str(project), SMALL) as s:
        for i in range(60):
            assert s.run(["true"], timeout=30).ok
            if i % 20 == 19:
                # The last runs' inits, reaped off this thread: a loaded machine may hold
                # a few for a moment, never an accumulation over the 60 runs.
                assert len(_zombie_children()) <= 3
    assert _zombie_children() == []


HIDE = """
import ctypes, os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        for fd in (0, 1, 2):
            os.close(fd)
        os.execve("/bin/sleep", ["sleep", sys.argv[2]], {})  # no marker left
    os._exit(0)
time.sleep(0.2)
"""


def test_a_hidden_host_leftover_is_gone_when_its_run_ends(session: Session) -> None:
    word = f"{os.getpid()}{time.monotonic_ns() % 10**9}"
    r = session.run([PY, "-c", HIDE, "x", word], boxed=False, timeout=30)
    assert r.ok, explain(r)
    from helpers.procs import left_after, running_with

    bounds = {b.name: b for b in session.hardening.bounds()}  # type: ignore[union-attr]
    try:
        if bounds["host_runs"].state == "in force":
            assert running_with(word) == []  # gone when the run returns, not later
        else:
            # No cgroup for this user here: said, and the leftover is what the README's
            # "What is not guaranteed" describes.
            assert not ROOT
            assert bounds["host_runs"].why and "marker" in bounds["host_runs"].why
    finally:
        for pid in left_after(word, 0):
            os.kill(pid, 9)
            # Adopted here (the session is the subreaper): reap it, or it would stay a
            # zombie child of this test process.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


LEAVE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        os.execv("/bin/sleep", ["sleep", sys.argv[1]])  # keeps the run's marker
    os._exit(0)
time.sleep(0.1)
"""


def test_host_leftovers_adopted_by_the_session_are_reaped(session: Session) -> None:
    # While the session is open this process is the subreaper: a host run's leftover
    # comes here when its parent exits, is killed (by its group or its marker), and
    # must not stay a zombie child of the harness.
    word = f"{os.getpid()}{time.monotonic_ns() % 10**9}"
    for _ in range(3):
        assert session.run([PY, "-c", LEAVE, word], boxed=False, timeout=30).ok
    from helpers.procs import left_after

    assert left_after(word, 3.0) == []
    time.sleep(0.1)
    assert session.run(["/bin/true"], boxed=False, timeout=30).ok
    assert _zombie_children() == []


def test_a_session_whose_filter_cannot_be_built_does_not_start(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fail closed: no box without its filter (here libseccomp's binding is missing and
    # no program is kept).
    import sandbox.linux.filtercache

    def missing(root: str) -> None:
        raise ImportError("No module named 'pyseccomp'")

    monkeypatch.setattr(sandbox.linux.filtercache, "load", missing)
    from sandbox.errors import SandboxUnavailable

    with pytest.raises(SandboxUnavailable) as info, Session.open(str(project), SMALL):
        pass
    assert str(info.value) == (
        "the system-call filter could not be built: No module named 'pyseccomp'; "
        "install libseccomp (sudo apt-get install libseccomp2) and pyseccomp")


def test_sizes_are_said_in_the_largest_whole_unit() -> None:
    from sandbox.policy.limits import describe

    assert describe(256 << 20) == "256M" and describe(3 << 30) == "3G"
    assert describe((3 << 30) + (1 << 29)) == "3.5G"


@pytest.fixture
def cold(project: Path) -> Iterator[Session]:
    with Session.open(str(project), SMALL, warm=False) as s:
        yield s


def test_on_cgroup_v1_a_box_is_born_inside_the_sessions_group(cold: Session) -> None:
    session = cold
    h = session.hardening
    assert h is not None
    group = h.box_group
    if group is None:
        assert not ROOT, h.box_group_why  # root here has the v1 controllers
        return
    from sandbox.process import cgroup

    if group.version != 1:
        return  # v2 moves each box in: nothing is born there (not this machine)
    assert h._spawner is not None and h._spawner.joined.wait(10)
    inside: list[bool] = []
    start = h.box_started

    def first_look(pid: int, *, moved: bool = True) -> None:
        # Before anything could move it: the process's own view of its groups.
        inside.append(pid in cgroup.members(group) and not moved)
        start(pid, moved=moved)

    h.box_started = first_look  # type: ignore[method-assign]
    assert session.run(["true"], timeout=30).ok
    assert inside == [True]
