"""The supervisor with real processes: outcomes, pipes, caps, and the end of every tree."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from helpers.paths import FIXTURES

from sandbox.plan import LaunchPlan, RunResult
from sandbox.process import supervisor
from sandbox.process.markers import MARKER_VAR

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process tests")

SPAWN_TREE = str(FIXTURES / "host_spawn_tree.sh")
DOUBLE_FORK = str(FIXTURES / "host_double_fork.py")
DRIVER = str(FIXTURES / "host_driver.py")
SH = "/bin/sh"
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
MiB = 1 << 20


def plan(argv: Iterable[str], env: Mapping[str, str] = ENV, cwd: str = "/") -> LaunchPlan:
    args = tuple(argv)
    return LaunchPlan("host", args, dict(env), cwd, " ".join(args))


def sh(script: str, *args: str) -> LaunchPlan:
    return plan([SH, "-c", script, "sh", *args])


def running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie has ended (this machine's init may not reap)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def marked(marker: str) -> list[int]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(MARKER_VAR) == marker:
                out.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return out


def wait_until(check: object, within: float) -> bool:
    assert callable(check)
    end = time.monotonic() + within
    while True:
        if check():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def read_pids(folder: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in folder.glob("*.pid")}


def assert_gone(pids: Iterable[int], within: float = 1.0) -> None:
    pids = list(pids)
    assert wait_until(lambda: not any(running(p) for p in pids), within), [
        p for p in pids if running(p)
    ]


def tree_plan(folder: Path) -> LaunchPlan:
    return plan([SPAWN_TREE, str(folder), sys.executable])


def kill_all(pids: Iterable[int]) -> None:
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


# -- outcomes ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 1, 2, 7, 255])
def test_the_exit_code_is_reported_exactly(code: int) -> None:
    r = supervisor.run(sh(f"exit {code}"))
    assert (r.outcome, r.returncode, r.signal) == ("exited", code, None)
    assert r.ok == (code == 0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGSEGV])
def test_a_signal_is_reported_exactly(sig: int) -> None:
    r = supervisor.run(sh(f"kill -{int(sig)} $$"))
    assert (r.outcome, r.signal, r.returncode) == ("signaled", int(sig), None)


def test_stdout_and_stderr_are_kept_apart() -> None:
    r = supervisor.run(sh("printf out; printf err >&2"))
    assert (r.stdout, r.stderr) == (b"out", b"err")
    assert not r.stdout_capped and not r.stderr_capped


def test_the_result_carries_the_plan_and_the_elapsed_time() -> None:
    p = sh("exit 0")
    r = supervisor.run(p)
    assert r.plan is p
    assert r.elapsed > 0


def test_a_missing_program_fails_to_start(tmp_path: Path) -> None:
    r = supervisor.run(plan([str(tmp_path / "missing")]))
    assert r.outcome == "failed_to_start"
    assert r.error == "No such file or directory"
    assert r.errno == errno.ENOENT


def test_a_program_that_is_not_executable_fails_to_start_with_permission_denied(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o644)
    r = supervisor.run(plan([str(hook)]))
    assert r.outcome == "failed_to_start"
    assert r.error == "Permission denied"
    assert r.errno == errno.EACCES


# -- pipes -----------------------------------------------------------------------------------


def test_a_mebibyte_of_stdin_round_trips_through_cat() -> None:
    data = os.urandom(MiB)
    r = supervisor.run(plan(["/bin/cat"]), stdin=data, timeout=30)
    assert r.outcome == "exited"
    assert r.stdout == data


def test_stdin_ends_with_end_of_file_when_empty() -> None:
    r = supervisor.run(plan(["/bin/cat"]), timeout=30)
    assert (r.outcome, r.returncode, r.stdout) == ("exited", 0, b"")


def test_a_hook_that_never_reads_stdin_still_ends() -> None:
    r = supervisor.run(sh("sleep 0.2; echo done"), stdin=os.urandom(MiB), timeout=30)
    assert (r.outcome, r.returncode, r.stdout) == ("exited", 0, b"done\n")


def test_a_hook_that_closes_stdin_early_still_ends() -> None:
    r = supervisor.run(sh("exec <&-; sleep 0.1; echo done"), stdin=os.urandom(MiB), timeout=30)
    assert (r.outcome, r.stdout) == ("exited", b"done\n")


def test_output_past_the_cap_is_dropped_and_flagged() -> None:
    script = "head -c 2097152 /dev/zero; head -c 2097152 /dev/zero >&2; echo end >&2"
    r = supervisor.run(sh(script), output_cap=MiB, timeout=30)
    assert (r.outcome, r.returncode) == ("exited", 0)
    assert len(r.stdout) == MiB and len(r.stderr) == MiB
    assert r.stdout_capped and r.stderr_capped


def test_output_exactly_at_the_cap_is_not_flagged() -> None:
    r = supervisor.run(sh("head -c 1000 /dev/zero"), output_cap=1000)
    assert len(r.stdout) == 1000
    assert not r.stdout_capped


def test_the_hook_gets_exactly_the_plan_environment_and_a_run_marker() -> None:
    env = {"PATH": "/usr/bin:/bin", "ONLY": "this"}
    r = supervisor.run(plan(["/usr/bin/env", "-0"], env=env))
    seen = dict(item.split("=", 1) for item in r.stdout.decode().split("\0") if item)
    marker = seen.pop(MARKER_VAR)
    assert seen == env
    assert marker


def test_every_run_gets_its_own_marker() -> None:
    a = supervisor.run(sh(f'printf %s "${MARKER_VAR}"')).stdout
    b = supervisor.run(sh(f'printf %s "${MARKER_VAR}"')).stdout
    assert a and b and a != b


def test_the_hook_runs_in_the_plans_folder(tmp_path: Path) -> None:
    r = supervisor.run(plan(["/bin/pwd"], cwd=str(tmp_path)))
    assert r.stdout.decode().strip() == str(tmp_path)


def test_the_hook_runs_in_a_session_of_its_own_with_no_terminal() -> None:
    code = (
        "import os\n"
        "print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())\n"
        "try:\n    os.open('/dev/tty', os.O_RDWR)\n    print('tty')\n"
        "except OSError:\n    print('no tty')\n"
        "print(os.isatty(0), os.isatty(1), os.isatty(2))\n"
    )
    r = supervisor.run(plan([sys.executable, "-c", code]))
    assert r.stdout.decode().split("\n")[:3] == ["True True", "no tty", "False False False"]


# -- the end of the tree ----------------------------------------------------------------------


def test_a_hook_that_exits_leaving_a_background_child_does_not_hang(tmp_path: Path) -> None:
    r = supervisor.run(sh('sleep 1000 & echo $! > "$1/child.pid"; exit 0', str(tmp_path)))
    assert (r.outcome, r.returncode) == ("exited", 0)
    assert r.elapsed < 10
    assert_gone(read_pids(tmp_path).values())


def test_a_hook_that_closes_stdout_early_and_keeps_running_does_not_hang(tmp_path: Path) -> None:
    script = 'exec >&- 2>&-; sleep 1000 & echo $! > "$1/child.pid"; sleep 0.3; exit 4'
    r = supervisor.run(sh(script, str(tmp_path)), timeout=30)
    assert (r.outcome, r.returncode) == ("exited", 4)
    assert r.elapsed < 10
    assert_gone(read_pids(tmp_path).values())


def test_a_setsid_leftover_holding_the_pipes_is_ended_after_a_normal_exit(tmp_path: Path) -> None:
    script = 'setsid sh -c \'sleep 1000 & echo $! > "$1/setsid.pid"\' sh "$1"; echo out'
    r = supervisor.run(sh(script, str(tmp_path)), timeout=30)
    assert (r.outcome, r.returncode, r.stdout) == ("exited", 0, b"out\n")
    assert_gone(read_pids(tmp_path).values())


def test_a_leftover_that_keeps_writing_does_not_hold_the_run(tmp_path: Path) -> None:
    script = 'setsid sh -c \'yes & echo $! > "$1/yes.pid"\' sh "$1"; exit 0'
    r = supervisor.run(sh(script, str(tmp_path)), timeout=30, output_cap=1000)
    assert (r.outcome, r.returncode) == ("exited", 0)
    assert r.elapsed < 10
    assert_gone(read_pids(tmp_path).values())


def test_a_daemon_that_closed_its_pipes_is_swept_after_a_normal_exit(tmp_path: Path) -> None:
    pidfile = str(tmp_path / "double.pid")
    r = supervisor.run(plan([sys.executable, DOUBLE_FORK, pidfile, "--close"]), timeout=30)
    assert (r.outcome, r.returncode) == ("exited", 0)
    assert_gone(read_pids(tmp_path).values())


@pytest.mark.parametrize("timeout", [1.5])
def test_a_timeout_ends_the_whole_tree_within_a_second(tmp_path: Path, timeout: float) -> None:
    r = supervisor.run(tree_plan(tmp_path), timeout=timeout)
    pids = read_pids(tmp_path)
    try:
        assert r.outcome == "timed_out"
        assert set(pids) == {"child", "setsid", "double", "main"}
        assert_gone(pids.values(), within=1.0)
    finally:
        kill_all(pids.values())


def test_a_hook_that_ignores_sigterm_is_gone_within_a_second_of_its_timeout() -> None:
    started = time.monotonic()
    r = supervisor.run(sh("trap '' TERM; while :; do sleep 0.05; done"), timeout=0.5)
    assert r.outcome == "timed_out"
    assert time.monotonic() - started < 0.5 + 1.0


def test_the_timeout_result_says_timed_out_and_not_exited() -> None:
    r = supervisor.run(sh("sleep 1000"), timeout=0.2)
    assert (r.outcome, r.returncode, r.signal) == ("timed_out", None, None)


def test_cancel_from_another_thread_ends_the_whole_tree(tmp_path: Path) -> None:
    cancel = threading.Event()

    def cancel_when_ready() -> None:
        wait_until(lambda: (tmp_path / "main.pid").exists(), 30)
        cancel.set()

    t = threading.Thread(target=cancel_when_ready)
    t.start()
    r = supervisor.run(tree_plan(tmp_path), timeout=60, cancel=cancel)
    t.join()
    pids = read_pids(tmp_path)
    try:
        assert r.outcome == "cancelled"
        assert set(pids) == {"child", "setsid", "double", "main"}
        assert_gone(pids.values(), within=1.0)
    finally:
        kill_all(pids.values())


def test_a_cancel_set_before_the_start_runs_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    r = supervisor.run(sh('echo $$ > "$1/main.pid"', str(tmp_path)), cancel=cancel)
    assert r.outcome == "cancelled"
    assert not (tmp_path / "main.pid").exists()


def test_no_process_carries_the_run_marker_after_a_timeout(tmp_path: Path) -> None:
    script = f'printf %s "${MARKER_VAR}" > "$1/marker"; exec "$2" "$3" "$1" "$4"'
    p = sh(script, str(tmp_path), SH, SPAWN_TREE, sys.executable)
    r = supervisor.run(p, timeout=1.5)
    pids = read_pids(tmp_path)
    try:
        assert r.outcome == "timed_out"
        marker = (tmp_path / "marker").read_text()
        assert wait_until(lambda: not marked(marker), 1.0)
    finally:
        kill_all(pids.values())


def test_the_death_of_the_harness_leaves_nothing_behind(tmp_path: Path) -> None:
    driver = subprocess.Popen(
        [sys.executable, DRIVER, "--", SPAWN_TREE, str(tmp_path), sys.executable],
        stdout=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: (tmp_path / "main.pid").exists(), 30)
        watchdogs = [
            c.pid
            for c in psutil.Process(driver.pid).children()
            if "watchdog_main" in " ".join(c.cmdline())
        ]
        assert len(watchdogs) == 1
        driver.kill()
        driver.wait()
        pids = read_pids(tmp_path)
        assert set(pids) == {"child", "setsid", "double", "main"}
        # The target is one second; the watchdog is allowed a little more under load.
        assert_gone(pids.values(), within=2.0)
        assert_gone(watchdogs, within=2.0)
    finally:
        driver.kill()
        driver.wait()
        kill_all(read_pids(tmp_path).values())


def test_the_watchdog_is_started_once_and_outside_every_hooks_group() -> None:
    supervisor.run(sh("exit 0"))
    first = supervisor.watchdog_pid()
    r = supervisor.run(sh("echo $$"))
    assert supervisor.watchdog_pid() == first
    assert first is not None and running(first)
    assert os.getpgid(first) != int(r.stdout)


def test_a_subreaper_harness_ends_a_daemon_that_scrubbed_its_environment(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            DRIVER,
            "--subreaper",
            "--pids",
            str(tmp_path),
            "--",
            sys.executable,
            DOUBLE_FORK,
            str(tmp_path / "daemon.pid"),
            "--scrub",
            "--close",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    report = json.loads(out.stdout)
    pids = read_pids(tmp_path)
    try:
        assert report["outcome"] == "exited"
        assert set(pids) == {"daemon"}
        assert report["alive"] == []
        assert report["zombies"] == []
    finally:
        kill_all(pids.values())


def test_a_hundred_hooks_in_parallel_leave_no_zombie() -> None:
    # Counted against what earlier tests in this process left (a session's reaping
    # ends with it): only these runs' zombies matter here.
    before = {c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE}

    def one(i: int) -> RunResult:
        return supervisor.run(sh(f"sleep 1000 & echo {i}; sleep 0.05"), timeout=30)

    with ThreadPoolExecutor(max_workers=100) as pool:
        results = list(pool.map(one, range(100)))
    assert [r.outcome for r in results] == ["exited"] * 100
    assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(100)]
    zombies = [c.pid for c in psutil.Process().children()
               if c.status() == psutil.STATUS_ZOMBIE and c.pid not in before]
    assert zombies == []
