"""Root in the box is not root on the host (sandbox/linux/standin.py).

A box started by root runs as root's stand-in, an id no account has; a box started by
a plain user runs as that user. Each test makes its attempt from inside a real box and
looks at the host's side: the process's host uid, the kernel's setting, the owner of
what the box made. Both box kinds: the warm box (each run started by its resident
starter) and a box per run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.linux import bwrap_args, standin
from sandbox.linux.stage import Stage
from sandbox.linux.warm import seat
from sandbox.session import Session
from sandbox.settings import SandboxSettings

ROOT = os.geteuid() == 0
# Who the box's processes are on the host.
EXPECTED_UID = standin.UID if ROOT else os.getuid()

BOTH = pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


def _host_uids_of(marker: str) -> list[int]:
    out = []
    for proc in psutil.process_iter(["cmdline", "uids"]):
        cmd = proc.info["cmdline"] or []
        if marker in cmd:
            out.append(proc.info["uids"].real)
    return out


@BOTH
def test_the_boxs_processes_are_the_stand_in_on_the_host(project: Path, warm: bool
                                                         ) -> None:
    marker = f"hs-standin-{os.getpid()}-{time.monotonic_ns()}"
    with Session.open(str(project), warm=warm) as s:
        seen: list[int] = []
        t = threading.Thread(target=s.run, args=(["sh", "-c", "sleep 1.5", marker],))
        t.start()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            seen = _host_uids_of(marker)
            time.sleep(0.05)
        t.join()
    assert seen and set(seen) == {EXPECTED_UID}
    if ROOT:
        assert 0 not in seen


def _belt_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """No read-only /proc/sys: what stops the write is then who the box is."""
    monkeypatch.setattr(bwrap_args, "PROC_READ_ONLY", ())
    monkeypatch.setattr(seat, "PROC_READ_ONLY", ())


@BOTH
@pytest.mark.parametrize("name", ["kernel/core_pattern", "kernel/randomize_va_space",
                                  "fs/protected_symlinks", "vm/swappiness"])
def test_a_setting_of_the_hosts_kernel_is_another_users_file_to_the_box(
        project: Path, monkeypatch: pytest.MonkeyPatch, warm: bool, name: str) -> None:
    _belt_off(monkeypatch)
    path = f"/proc/sys/{name}"
    before = Path(path).read_text()
    with Session.open(str(project), warm=warm) as s:
        # Its own value written back: harmless if it went through, and it must not.
        r = s.run(["sh", "-c", f'v=$(cat {path}); printf "%s\\n" "$v" > {path} '
                              '&& echo WROTE'])
    assert Path(path).read_text() == before
    assert b"WROTE" not in r.stdout
    assert b"Permission denied" in r.stderr


@BOTH
def test_what_the_box_makes_belongs_to_the_folders_owner(
        project: Path, tmp_path: Path, warm: bool) -> None:
    other = tmp_path / "shared"
    other.mkdir()
    owner = 4321 if ROOT else os.getuid()
    os.chown(other, owner, owner)
    settings = SandboxSettings(writable=(str(other),))
    with Session.open(str(project), settings, warm=warm) as s:
        r = s.run(["sh", "-c", f"touch made {other}/made && mkdir sub && touch sub/x && "
                              f"ls -ln made {other}/made"])
    assert r.returncode == 0, r.stderr
    assert (project / "made").stat().st_uid == project.stat().st_uid
    assert (project / "sub" / "x").stat().st_uid == project.stat().st_uid
    assert (other / "made").stat().st_uid == owner
    assert (other / "made").stat().st_gid == owner
    # In the box, each is the box user's own.
    assert [line.split()[2] for line in r.stdout.decode().splitlines()] == \
        [str(os.getuid())] * 2


@BOTH
def test_a_set_id_program_the_box_leaves_is_not_roots(project: Path, warm: bool) -> None:
    with Session.open(str(project), warm=warm) as s:
        s.run(["sh", "-c", "cp /bin/true t && chmod 4755 t"])
    st = (project / "t").stat()
    assert not st.st_mode & 0o6000


@pytest.mark.skipif(not ROOT, reason="the stand-in is made only for a session started "
                                     "by root; a plain user's box is that user")
def test_a_writable_folder_that_cannot_be_mapped_refuses_the_session(
        project: Path, tmp_path: Path) -> None:
    ram = tmp_path / "ram"
    ram.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(ram)], check=True)
    try:
        settings = SandboxSettings(writable=(str(ram),))
        with pytest.raises(SandboxUnavailable) as err, \
                Session.open(str(project), settings, warm=False) as s:
            s.run(["true"])
        said = str(err.value)
        assert f"a box started by root runs as uid {standin.UID}, and {ram}, which the " \
               "box writes, cannot be mapped to it: " in said
        assert "idmapped mounts" in said
    finally:
        subprocess.run(["umount", "-l", str(ram)], check=False)


@pytest.mark.skipif(not ROOT, reason="the stand-in is made only for a session started "
                                     "by root; a plain user's box is that user")
def test_an_id_an_account_has_refuses_the_stand_in(
        monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    monkeypatch.setattr(standin, "UID", 0)
    with pytest.raises(SandboxUnavailable) as err:
        Stage.open((str(project),), (), stand_in=True)
    assert "and the account root has uid 0: the box would share that account's files" \
        in str(err.value)


def test_the_stand_in_is_entered_by_nsenter_from_a_system_folder() -> None:
    path = standin.nsenter()
    assert os.path.dirname(path) in ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
    st = os.stat(path)
    assert st.st_uid == 0 and not st.st_mode & 0o022


@pytest.mark.skipif(not ROOT, reason="the stand-in is made only for a session started "
                                     "by root; a plain user's box is that user")
def test_doctor_tries_the_box_as_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.doctor import probe

    assert probe.probe_bwrap().ok
    monkeypatch.setattr(standin, "UID", 0)
    found = probe.probe_bwrap()
    assert not found.ok
    assert found.diagnosis is not None and "the account root has uid 0" in found.diagnosis


@pytest.mark.skipif(not ROOT, reason="only root can give a project to another user")
@BOTH
def test_root_opens_another_users_closed_project_as_its_owner(tmp_path: Path,
                                                             warm: bool) -> None:
    project = tmp_path / "theirs"
    project.mkdir(mode=0o700)
    os.chmod(project, 0o700)
    os.chown(project, 4321, 4321)
    with Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", "echo hi > made && cat made"])
    assert r.stdout == b"hi\n", r.stderr
    assert (project / "made").stat().st_uid == 4321


def test_uid_0_of_a_user_namespace_is_not_the_hosts_root() -> None:
    # unshare -r maps the caller to uid 0: the host's root stays root (a stand-in is
    # needed), a plain user stays that user on the host (none is).
    from helpers.paths import REPO

    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); "
            "from sandbox.linux import standin; "
            "print(os.geteuid(), standin.needed(), os.path.basename(standin.nsenter()))")
    r = subprocess.run(["unshare", "-r", sys.executable, "-I", "-c", code, str(REPO)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", str(ROOT), "nsenter"]
