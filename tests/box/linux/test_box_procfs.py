"""The box cannot change the host's kernel through /proc, and cannot read its own map.

A box started by root has host uid 0 (without capabilities), which passes the permission
check on /proc/sys's 0644 files: ``kernel.core_pattern = |<project>/helper.sh`` would
have the kernel run the agent's program as root on the next crash. Every attempt here
is made from inside the real box, then the host's value is read back (and, for the crash
handler, a host process really crashes). Run as root and as a plain user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.procs import spares_made

from launchers.config import SandboxSettings
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

# Knobs whose change would reach the host: each is written back with its current value,
# which changes nothing even where a write would succeed.
SYSCTLS = (
    "kernel/core_pattern",
    "kernel/randomize_va_space",
    "fs/protected_symlinks",
    "fs/protected_hardlinks",
    "fs/suid_dumpable",
    "vm/overcommit_memory",
    "vm/swappiness",
)


@pytest.fixture
def world() -> Iterator[tuple[Session, Path, Path]]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-procfs-")))
    try:
        project = base / "project"
        project.mkdir()
        secret = base / "secret-folder-name"
        secret.mkdir()
        settings = SandboxSettings(hidden=(str(secret),), hide_defaults=False)
        with Session.open(str(project), settings) as session:
            yield session, project, secret
    finally:
        shutil.rmtree(base, ignore_errors=True)


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-400:]!r} err={r.stderr[-400:]!r}"


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("name", SYSCTLS)
def test_the_box_cannot_write_a_host_sysctl(world: tuple[Session, Path, Path],
                                            name: str) -> None:
    session, _, _ = world
    path = f"/proc/sys/{name}"
    if not os.path.exists(path):
        pytest.skip(f"this kernel has no {path}")
    before = read(path)
    value = before.strip()
    r = session.run(["sh", "-c", f'printf "%s\\n" "$1" > {path}', "sh", value])
    assert r.returncode != 0, explain(r)
    assert b"Read-only file system" in r.stderr or b"Permission denied" in r.stderr, explain(r)
    assert read(path) == before


def test_the_box_cannot_press_sysrq(world: tuple[Session, Path, Path]) -> None:
    session, _, _ = world
    # Only the open is tried: a write would act on the host.
    r = session.run([sys.executable, "-c",
                     "import os\n"
                     "try:\n"
                     "    os.close(os.open('/proc/sysrq-trigger', os.O_WRONLY))\n"
                     "except OSError as e:\n"
                     "    print(e.strerror)\n"
                     "else:\n"
                     "    print('OPENED')\n"])
    assert r.returncode == 0, explain(r)
    assert b"OPENED" not in r.stdout, explain(r)


def test_a_crash_on_the_host_does_not_run_what_the_box_named(
        world: tuple[Session, Path, Path]) -> None:
    session, project, _ = world
    marker = project / "ran-as-host"
    helper = project / "helper.sh"
    helper.write_text(f"#!/bin/sh\ntouch {marker}\ncat >/dev/null\n")
    helper.chmod(0o755)
    before = read("/proc/sys/kernel/core_pattern")
    try:
        r = session.run(["sh", "-c",
                         f"echo '|{helper}' > /proc/sys/kernel/core_pattern"])
        assert r.returncode != 0, explain(r)
        # The host side for real: a process of the host crashes with a core allowed.
        # (From the project: a core file, if the pattern writes one, lands there.)
        subprocess.run(["sh", "-c", "ulimit -c unlimited; kill -SEGV $$"], cwd=project,
                       check=False)
        assert read("/proc/sys/kernel/core_pattern") == before
        assert not marker.exists()
    finally:
        if read("/proc/sys/kernel/core_pattern") != before:
            with open("/proc/sys/kernel/core_pattern", "w") as f:
                f.write(before)


def test_the_box_cannot_read_its_own_mount_map(world: tuple[Session, Path, Path]) -> None:
    session, _, secret = world
    r = session.run(["cat", "/proc/1/cmdline"])
    assert r.returncode == 0, explain(r)
    shown = r.stdout.replace(b"\0", b" ")
    assert shown.startswith(b"/"), explain(r)
    assert str(secret).encode() not in shown, shown
    assert b"--ro-bind" not in shown, shown


def test_the_box_still_sees_its_own_network_sysctls(
        world: tuple[Session, Path, Path]) -> None:
    session, _, _ = world
    r = session.run(["cat", "/proc/sys/net/ipv4/ip_forward"])
    assert r.returncode == 0, explain(r)
    assert r.stdout.strip() in (b"0", b"1")


def test_the_box_cannot_leave_a_set_id_program_for_the_host(
        world: tuple[Session, Path, Path]) -> None:
    session, project, _ = world
    r = session.run(["sh", "-c",
                     "cp /bin/true t; chmod u+s t; chmod g+s t; chmod 6755 t; "
                     "install -m 4755 /bin/true u; "
                     f"{sys.executable} -c \"import os; os.open('v', os.O_CREAT|os.O_WRONLY, "
                     "0o4755)\"; true"])
    assert r.returncode == 0, explain(r)
    # The host side: nothing in the project carries a set-id bit.
    for p in project.iterdir():
        assert not p.stat().st_mode & 0o6000, (p, oct(p.stat().st_mode))
    assert (project / "t").exists()


def test_the_options_descriptor_of_each_run_is_closed_after_it(
        world: tuple[Session, Path, Path]) -> None:
    session, _, _ = world
    bare = Session(session.policy)  # no bounds, no filter: the plain run path
    for s in (session, bare):
        s.run(["true"])
        if s.warm is not None:  # each run made ahead holds one
            spares_made(s.warm)
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(10):
            assert s.run(["true"]).returncode == 0
        if s.warm is not None:
            spares_made(s.warm)
        # Ten runs, no more descriptors (one the session opened lazily may have gone).
        assert len(os.listdir("/proc/self/fd")) <= before
