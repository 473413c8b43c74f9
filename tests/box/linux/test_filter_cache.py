"""The compiled filter kept between sessions, and why a planted one is never loaded.

The attack: a permissive program (one instruction, "allow") put where the next session
would look for the kept filter. Only a sound file in the private temp root is used; the
box cannot reach that root (it sees its own session's folder as /tmp); every unsure
variant is ignored and the next box still refuses what the filter denies.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.linux import filtercache
from sandbox.linux.seccomp import compile_filter
from sandbox.policy import private_tmp_root
from sandbox.session import Session

pytestmark = pytest.mark.isolation

ALLOW_ALL = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF_RET | BPF_K, ALLOW
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0): one call the filter denies.
KEYCTL_NR = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
KEYCTL = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
          f"r = libc.syscall({KEYCTL_NR}, 0, -3, 0); "
          "print(r, os.strerror(ctypes.get_errno()))")


def _kept() -> Path:
    name = filtercache.file_name()
    assert name is not None, "libseccomp is in a usual folder here"
    return Path(os.path.realpath(private_tmp_root())) / name


def _keyctl(project: Path) -> bytes:
    with Session.open(str(project)) as s:
        return s.run(["/usr/bin/python3", "-I", "-c", KEYCTL]).stdout


@pytest.fixture
def kept() -> Iterator[Path]:
    path = _kept()
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


def test_the_kept_program_is_the_compiled_one(project: Path, kept: Path) -> None:
    _keyctl(project)  # the first session builds and keeps it
    fresh = compile_filter()
    try:
        assert kept.read_bytes() == os.pread(fresh.fd, fresh.size, 0)
    finally:
        os.close(fresh.fd)
    assert kept.stat().st_mode & 0o777 == 0o600
    assert _keyctl(project) == b"-1 Operation not permitted\n"


@pytest.mark.parametrize("flaw", ["mode 0644", "a link", "a hard link", "a torn write"])
def test_an_unsure_kept_program_is_not_loaded(project: Path, kept: Path, tmp_path: Path,
                                              flaw: str) -> None:
    kept.parent.mkdir(mode=0o700, exist_ok=True)
    if flaw == "a link":
        good = tmp_path / "allow.bpf"
        good.write_bytes(ALLOW_ALL)
        good.chmod(0o600)
        kept.symlink_to(good)
    else:
        kept.write_bytes(ALLOW_ALL + (b"\0" * 3 if flaw == "a torn write" else b""))
        kept.chmod(0o644 if flaw == "mode 0644" else 0o600)
        if flaw == "a hard link":
            os.link(kept, tmp_path / "second-name")
    assert _keyctl(project) == b"-1 Operation not permitted\n"


def test_a_sound_kept_program_is_loaded(project: Path, kept: Path) -> None:
    # The trust boundary is the private root itself: a sound file there is used. (That
    # is why nothing else may write there; see the next test.)
    kept.parent.mkdir(mode=0o700, exist_ok=True)
    kept.write_bytes(ALLOW_ALL)
    kept.chmod(0o600)
    assert _keyctl(project) != b"-1 Operation not permitted\n"


def test_the_box_cannot_plant_one(project: Path, kept: Path) -> None:
    with Session.open(str(project)) as s:
        r = s.run(["sh", "-c", f"mkdir -p {kept.parent}; printf x > {kept}; echo $?; "
                   f"ls {kept.parent}"])
    assert r.returncode == 0
    # What the box wrote went to its own /tmp; the host's root holds the real program.
    assert kept.read_bytes() != b"x"
    assert _keyctl(project) == b"-1 Operation not permitted\n"


def test_a_shared_folder_keeps_nothing(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    compiled = filtercache.load(str(shared))
    os.close(compiled.fd)
    assert list(shared.iterdir()) == []


def test_a_new_build_removes_the_table_s_older_programs(project: Path, kept: Path) -> None:
    """A program built by another libseccomp (another key, the same table) is removed
    when this one is built, and one named the way they were before; another table's is
    not."""
    root = kept.parent
    table = kept.name[:len("filter-") + 9]
    stale = root / f"{table}{'0' * 32}.bpf"
    unnamed = root / f"filter-{'0' * 32}.bpf"  # as programs were named before
    other = root / f"filter-{'f' * 8}-{'0' * 32}.bpf"
    for p in (stale, unnamed, other):
        p.write_bytes(ALLOW_ALL)
        p.chmod(0o600)
    try:
        assert _keyctl(project) == b"-1 Operation not permitted\n"
        assert kept.exists() and not stale.exists() and not unnamed.exists()
        assert other.exists()
    finally:
        stale.unlink(missing_ok=True)
        unnamed.unlink(missing_ok=True)
        other.unlink(missing_ok=True)
