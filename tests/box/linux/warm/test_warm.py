"""The warm box on its own: one real bwrap, its resident starter, and runs inside it.

Every check runs a real command through :class:`sandbox.linux.warm.client.WarmBox` in a box
built from a real session's policy and filter, as root and as a plain user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from helpers.launchers import STARTERS
from helpers.procs import eventually, fds_settle, left_after, proc_status, running_with, spares_made

from sandbox.errors import SandboxUnavailable
from sandbox.linux.bwrap import KEYRING_LISTS, PROC_READ_ONLY
from sandbox.linux.linuxbox import LinuxBox
from sandbox.linux.warm.channel import ask, recv
from sandbox.linux.warm.client import SPARE, WarmBox
from sandbox.linux.warm.seat import box_options
from sandbox.plan import RunResult
from sandbox.policy.startenv import box_env
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

SHM = 1 << 20


class World:
    def __init__(self, session: Session, box: WarmBox, starter: str) -> None:
        self.session = session
        self.starter = starter
        self.box = box
        self.project = session.policy.project
        self.env = dict(box_env(session.policy, None))

    def run(self, argv: list[str], **kw: object) -> RunResult:
        env = kw.pop("env", self.env)
        cwd = kw.pop("cwd", self.project)
        return self.box.run(argv, env, cwd, **kw)  # type: ignore[arg-type]


def start(session: Session, starter: str = "warm", bpf: bytes | None = None) -> WarmBox:
    assert isinstance(session._box, LinuxBox) and session.hardening is not None
    backend = session._box.backend
    flt = session.hardening.filter
    assert flt is not None
    stage = backend.stage()  # root's boxes run as the stand-in
    options = box_options(session.policy, bwrap=backend.program(),
                          features=backend._features, shm_size=SHM,
                          staged=stage is not None)
    compiled = backend.launcher() if starter == "warm" else None
    assert compiled is not None or starter == "warm-python"
    if bpf is None:
        bpf = os.pread(flt.fd, flt.size, 0)
    return WarmBox.start(options, bpf=bpf, shm_size=SHM,
                         read_only=PROC_READ_ONLY, nulled=KEYRING_LISTS,
                         launcher=stage.argv() if stage else (), starter=compiled)


@pytest.fixture(params=STARTERS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-warm-")))
    try:
        project = base / "project"
        project.mkdir()
        with Session.open(str(project), warm=False) as session:
            box = start(session, request.param)
            try:
                yield World(session, box, request.param)
            finally:
                box.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-400:]!r} err={r.stderr[-400:]!r}"


def test_exit_status_and_streams(world: World) -> None:
    r = world.run(sh("cat; echo out; echo err >&2; exit 7"), stdin=b"in\n")
    assert (r.outcome, r.returncode) == ("exited", 7), explain(r)
    assert r.stdout == b"in\nout\n" and r.stderr == b"err\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL, signal.SIGSEGV])
def test_a_signal_is_128_plus_n_as_bwrap_says(world: World, signum: int) -> None:
    r = world.run(sh(f"kill -{int(signum)} $$"))
    assert (r.outcome, r.returncode) == ("exited", 128 + signum), explain(r)


def test_a_command_that_cannot_start(world: World, tmp_path: Path) -> None:
    r = world.run(["no-such-program-here"])
    assert (r.outcome, r.errno, r.error) == ("failed_to_start", 2,
                                             "No such file or directory"), explain(r)
    plain = Path(world.project) / "not-executable"
    plain.write_text("echo hi\n")
    r = world.run([str(plain)])
    assert (r.outcome, r.error) == ("failed_to_start", "Permission denied"), explain(r)
    plain.chmod(0o755)  # no #!: run by /bin/sh, as execvp does
    r = world.run([str(plain)])
    assert (r.outcome, r.returncode, r.stdout) == ("exited", 0, b"hi\n"), explain(r)


def test_exactly_the_environment_and_the_folder(world: World) -> None:
    env = {"PATH": "/usr/bin:/bin", "ONLY": "this one", "ODD": "a=b c"}
    r = world.run(["env"], env=env)
    assert sorted(r.stdout.decode().splitlines()) == sorted(f"{k}={v}"
                                                            for k, v in env.items())
    r = world.run(["pwd"], cwd="/usr")
    assert r.stdout == b"/usr\n", explain(r)
    # Past one socket message (each string under the kernel's 128 KiB).
    big = {"PATH": "/usr/bin:/bin", **{f"BIG{i}": "x" * 50_000 for i in range(4)}}
    r = world.run(sh('printf %s "$BIG0$BIG1$BIG2$BIG3" | wc -c'), env=big)
    assert r.stdout.strip() == b"200000", explain(r)


def test_output_is_capped(world: World) -> None:
    r = world.run(sh("head -c 100000 /dev/zero"), output_cap=1000)
    assert r.stdout_capped and len(r.stdout) == 1000 and r.returncode == 0, explain(r)


# What a run of root's stand-in keeps, in its own user namespace: CAP_CHOWN,
# CAP_DAC_OVERRIDE, CAP_FOWNER (sandbox/linux/standin.py); a plain user's, nothing.
OWNERS = 0b1011 if os.geteuid() == 0 else 0


def test_no_capability_no_new_privileges_and_the_filter(world: World) -> None:
    r = world.run(["cat", "/proc/self/status"])
    fields = dict(line.split(":\t", 1) for line in r.stdout.decode().splitlines()
                  if ":\t" in line)
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[name], 16) == OWNERS, f"{name}: {fields[name]}"
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"
    # The filter is the session's: a new namespace is refused.
    r = world.run(["unshare", "--user", "true"])
    assert r.returncode != 0, explain(r)


def test_a_run_made_ahead_waits_already_without_privileges(world: World) -> None:
    # What waits for a request is already as the command will be: a run made ahead
    # holds nothing more while it waits (the compiled starter's command process, made
    # ahead; the Python starter's init, which keeps CAP_SYS_PTRACE in its guard's
    # thread alone).
    spares_made(world.box)

    def made_as_they_wait() -> None:
        inits = _starter(world.box).children()
        assert len(inits) == SPARE
        for init in inits:
            waiting = init.children() if world.starter == "warm" else [init]
            assert len(waiting) == 1, waiting
            got = proc_status(f"/proc/{waiting[0].pid}/status")
            for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                # (The Python init holds the stand-in's for the command it will spawn,
                # not effective.)
                python_eff = name == "CapEff" and world.starter != "warm"
                assert int(got[name], 16) == (0 if python_eff else OWNERS), \
                    (name, got[name])
            assert got["NoNewPrivs"] == "1" and got["Seccomp"] == "2", got
            if world.starter == "warm":
                # The run's init, under the same filter: with no Unix-socket guard to
                # answer for (these boxes have none), no capability either; a
                # session's keeps CAP_SYS_PTRACE alone (test_warm_session.py).
                init_caps = proc_status(f"/proc/{init.pid}/status")
                assert int(init_caps["CapEff"], 16) == 0, init_caps["CapEff"]
                assert init_caps["Seccomp"] == "2"

    # A run is handed over once its PID 1 exists, and goes on being made meanwhile.
    eventually(made_as_they_wait)


def test_the_procfs_belt_holds_in_every_run(world: World) -> None:
    r = world.run(sh("echo x > /proc/sys/kernel/core_pattern"))
    assert r.returncode != 0 and b"Read-only file system" in r.stderr, explain(r)
    r = world.run(sh("cat /proc/keys /proc/key-users"))
    assert r.stdout == b"" and r.stderr.count(b"Permission denied") == 2, explain(r)
    r = world.run(sh("grep ' /proc ' /proc/self/mounts"))
    assert b"nosuid,nodev,noexec" in r.stdout, explain(r)


def test_a_run_sees_only_its_own_processes(world: World) -> None:
    other = threading.Thread(target=world.run, args=(sh("exec sleep 3"),),
                             kwargs={"timeout": 2.0})
    other.start()
    try:
        time.sleep(0.5)
        r = world.run(sh("for p in /proc/[0-9]*; do cat $p/comm; done"))
    finally:
        other.join()
    names = r.stdout.decode().split()
    assert "sleep" not in names and "python3" not in names, names
    r = world.run(["ls", "/proc"])
    pids = sorted(int(p) for p in r.stdout.split() if p.isdigit())
    assert pids[0] == 1 and len(pids) <= 3, pids


def test_shm_and_ipc_are_the_runs_own(world: World) -> None:
    r = world.run(sh("echo secret > /dev/shm/left; ls /dev/shm"))
    assert r.stdout == b"left\n", explain(r)
    r = world.run(["ls", "-A", "/dev/shm"])
    assert (r.returncode, r.stdout) == (0, b""), explain(r)
    # A SysV segment outlives its maker; not its run's IPC namespace.
    r = world.run(["ipcmk", "-M", "4096"])
    assert r.returncode == 0, explain(r)
    r = world.run(sh("grep -c . /proc/sysvipc/shm"))
    assert r.stdout.strip() == b"1", explain(r)  # the header only


def test_nothing_a_run_starts_outlives_it(world: World) -> None:
    r = world.run(sh("setsid sleep 1001 & (sleep 1002 &); (setsid sh -c 'sleep 1003 &' &);"
                     " sleep 0.2; echo started"))
    assert r.stdout == b"started\n", explain(r)
    for word in ("1001", "1002", "1003"):
        assert left_after(word) == [], word


def test_a_run_ends_only_once_nothing_it_started_lives(world: World) -> None:
    """Looked at the moment Session.run returns, not a moment later: the run's init
    kills and reaps every process of the run before it says the status. (On an idle
    machine the kernel's own end of the namespace, right after, is quick enough that
    this also holds without that; the order is what makes it hold under load.)"""
    for _ in range(3):
        r = world.run(sh("for i in $(seq 50); do setsid sleep 1041 </dev/null >/dev/null"
                         " 2>&1 & done; echo started"))
        assert r.stdout == b"started\n", explain(r)
        assert running_with("1041") == []


def test_a_run_cannot_signal_its_init(world: World) -> None:
    """Every signal the command can send its PID 1 is dropped: the run ends as the
    command says, and its status comes from the init."""
    r = world.run(sh("for s in INT TERM HUP QUIT USR1 USR2 PIPE ALRM; do kill -$s 1; done;"
                     " sleep 0.1; echo alive; exit 3"))
    assert r.outcome == "exited" and r.returncode == 3 and r.stdout == b"alive\n", explain(r)
    assert world.run(["true"]).ok


def test_a_timeout_and_a_cancel_end_the_whole_run(world: World) -> None:
    t = time.monotonic()
    r = world.run(sh("setsid sleep 1004 & sleep 1005"), timeout=0.5)
    assert r.outcome == "timed_out" and time.monotonic() - t < 5, explain(r)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    r = world.run(sh("(sleep 1006 &); sleep 1007"), cancel=cancel)
    assert r.outcome == "cancelled", explain(r)
    for word in ("1004", "1005", "1006", "1007"):
        assert left_after(word) == [], word


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_runs_at_once_leave_nothing(world: World) -> None:
    world.run(["true"])
    spares_made(world.box)
    fds = _fds()
    results: dict[int, RunResult] = {}

    def one(i: int) -> None:
        results[i] = world.run(sh(f"echo {i}; cat"), stdin=b"x" * i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(64):
        assert results[i].stdout == f"{i}\n".encode() + b"x" * i, explain(results[i])
    spares_made(world.box)
    assert fds_settle(fds) <= fds
    box = psutil.Process(world.box.proc.pid if world.box.proc else 0)
    # bwrap's init, the starter and the runs it made ahead (the compiled starter's
    # each an init and its command's process, made ahead too): no process of a run
    # that ended is left.
    want = 2 + SPARE * (2 if world.starter == "warm" else 1)

    def only_those() -> None:
        assert len(box.children(recursive=True)) == want

    eventually(only_those, seconds=10)  # the spares are made again meanwhile


def _is(p: psutil.Process, status: str, *, gone: bool = False) -> None:
    """That ``p`` is in ``status`` (or, with ``gone``, no longer running)."""
    assert (gone and not p.is_running()) or p.status() == status, p


def _starter(box: WarmBox) -> psutil.Process:
    """The starter: bwrap's init's child (the runs made ahead are its children)."""
    assert box.proc is not None
    for p in psutil.Process(box.proc.pid).children(recursive=True):
        try:
            parent = p.parent()
            if parent is not None and parent.name() == "bwrap" and p.name() != "bwrap":
                return p
        except psutil.NoSuchProcess:
            continue  # a run made ahead that ended since the listing
    raise AssertionError("no starter")


def test_a_killed_starter_is_said_never_hidden(world: World) -> None:
    running: list[BaseException] = []

    def long_run() -> None:
        try:
            world.run(["sleep", "1008"])
        except SandboxUnavailable as err:
            running.append(err)

    th = threading.Thread(target=long_run)
    th.start()
    time.sleep(0.5)
    _starter(world.box).kill()
    th.join(10)
    assert not th.is_alive() and len(running) == 1
    assert "warm box is gone" in str(running[0])
    with pytest.raises(SandboxUnavailable, match="warm box is gone"):
        world.run(["true"])
    assert left_after("1008") == []


def test_a_run_asked_for_once_its_starter_is_gone_never_starts(world: World) -> None:
    # A run made ahead is taken, then its starter dies. The box's own init is held
    # stopped so that the box outlives the starter as long as the test needs (it ends
    # the box otherwise, a moment later): the run sees its starter gone when its
    # request comes, and its init ends without a word, which the host takes as the
    # box's end. Its command never starts.
    spares_made(world.box)
    starter = _starter(world.box)
    box_init = starter.parent()
    assert box_init is not None
    got = world.box._take()
    assert not isinstance(got, int)
    _, chan = got
    marker = Path(world.project) / "started"
    box_init.suspend()
    try:
        # Stopped, not only sent the signal: a box init woken for it would reap the
        # starter first.
        eventually(lambda: _is(box_init, psutil.STATUS_STOPPED))
        starter.kill()
        eventually(lambda: _is(starter, psutil.STATUS_ZOMBIE))
        proc = ask(chan, ["touch", str(marker)], world.env, str(world.project))
        assert recv(chan) is None  # gone unheard, not "exit status ..."
        for f in (proc.stdin, proc.stdout, proc.stderr):
            assert f is not None
            f.close()
        assert not marker.exists()
    finally:
        chan.close()
        box_init.resume()


def test_a_starter_given_a_setup_it_cannot_take_says_why(world: World) -> None:
    # A filter that is no whole program: never a box that runs without it. The compiled
    # starter reads it whole at its start and ends there, in its own words (it said
    # only "it ended with status 2"); the Python one compiles it for each run, and the
    # first run says why no run can be made.
    if world.starter == "warm":
        with pytest.raises(SandboxUnavailable, match=(
                "the warm box did not start: it ended: harness-sandbox: the warm box's "
                "starter could not start: its setup from the host: Invalid argument")):
            start(world.session, world.starter, bpf=b"not a filter").close()
        return
    box = start(world.session, world.starter, bpf=b"not a filter")
    try:
        with pytest.raises(SandboxUnavailable, match=(
                r"the warm box could not make a run's namespaces: \[Errno 22\] seccomp: "
                "Invalid argument")):
            box.run(["true"], world.env, str(world.project))
    finally:
        box.close()


def test_a_starter_that_stops_answering_is_said(world: World) -> None:
    world.box.start_limit = 1.0
    spares_made(world.box)
    starter = _starter(world.box)
    starter.suspend()
    try:
        # The runs made ahead before it stopped still start (they need it no more);
        # the first run that needs it fails, within its limit, and so does every later.
        for _ in range(SPARE):
            assert world.run(["true"]).ok
        t = time.monotonic()
        with pytest.raises(SandboxUnavailable, match="did not start a run"):
            world.run(["true"])
        assert time.monotonic() - t < 5
        with pytest.raises(SandboxUnavailable, match="did not start a run"):
            world.run(["true"])

        # The box given up on is ended, its stopped starter with it.
        eventually(lambda: _is(starter, psutil.STATUS_ZOMBIE, gone=True))
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):  # ended with its box
            starter.resume()


def test_a_run_whose_init_stops_answering_is_said(world: World) -> None:
    """A run made ahead whose init stopped before its request: the run fails within
    the limit, never hangs."""
    world.box.start_limit = 1.0
    spares_made(world.box)
    starter = _starter(world.box)
    spares = starter.children()
    assert len(spares) == SPARE
    for p in spares:
        p.suspend()
    t = time.monotonic()
    with pytest.raises(SandboxUnavailable, match="did not start a run"):
        world.run(["true"])
    assert time.monotonic() - t < 5

