"""The probe's diagnoses (pure over the values a machine gives) and doctor on this machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from sandbox.doctor import probe
from sandbox.errors import SandboxUnavailable
from sandbox.linux import bwrap_find, causes
from sandbox.policy import Policy

CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
SYSTEM_BWRAP = shutil.which("bwrap")
_bwrap_here = pytest.mark.skipif(SYSTEM_BWRAP is None or not sys.platform.startswith("linux"),
                                 reason="needs bubblewrap on Linux")
F = TypeVar("F", bound=Callable[..., object])


def needs_bwrap(test: F) -> F:
    """A test that starts the real box (marked isolation)."""
    marked: F = pytest.mark.isolation(_bwrap_here(test))
    return marked

# Messages exactly as real bwrap 0.8 prints them.
NO_PERMISSION = ("bwrap: No permissions to create new namespace, likely because the kernel "
                 "does not allow non-privileged user namespaces. On e.g. debian this can be "
                 "enabled with 'sysctl kernel.unprivileged_userns_clone=1'.")
UID_MAP = "bwrap: setting up uid map: Permission denied"
ENOSPC = ("bwrap: Creating new namespace failed: nesting depth or "
          "/proc/sys/user/max_*_namespaces exceeded (ENOSPC)")


def diag(**kw: object) -> str | None:
    values: dict[str, object] = {"euid": 1000, "apparmor_restrict": None,
                                 "max_user_namespaces": 15000,
                                 "unprivileged_userns_clone": None, "error": None}
    values.update(kw)
    found = causes.diagnose_userns(**values)  # type: ignore[arg-type]
    return None if found is None else str(found)


def test_the_cause_and_the_fix_are_told_as_one_sentence() -> None:
    err = SandboxUnavailable(bwrap_find.NOT_INSTALLED, bwrap_find.INSTALL_FIX)
    assert str(err) == ("bubblewrap (bwrap) is not installed; install the bubblewrap "
                        "package: sudo apt-get install bubblewrap")
    assert str(SandboxUnavailable("only the cause")) == "only the cause"


def test_userns_allowed_gives_no_diagnosis() -> None:
    assert diag() is None
    assert diag(apparmor_restrict=0, unprivileged_userns_clone=1) is None


# Every fix where namespaces are refused ends naming the box without them.
LANDLOCK = (', or write [sandbox] box = "landlock" for the box without namespaces '
            "(weaker: docs/linux-box.md says what it gives up)")


def test_max_user_namespaces_zero_names_that_sysctl() -> None:
    assert diag(max_user_namespaces=0) == (
        "user namespaces are turned off (user.max_user_namespaces=0); "
        "turn them on with sudo sysctl -w user.max_user_namespaces=15000" + LANDLOCK)
    assert diag(euid=0, max_user_namespaces=0) == diag(max_user_namespaces=0)


def test_unprivileged_userns_clone_zero_names_that_sysctl() -> None:
    assert diag(unprivileged_userns_clone=0) == (
        "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone=0); "
        "turn them on with sudo sysctl -w kernel.unprivileged_userns_clone=1" + LANDLOCK)


def test_unprivileged_userns_clone_zero_does_not_stop_root() -> None:
    assert diag(euid=0, unprivileged_userns_clone=0) is None


def test_apparmor_restriction_alone_is_not_a_diagnosis() -> None:
    # A profile for bwrap may allow it: only a box that failed to start decides.
    assert diag(apparmor_restrict=1) is None


def test_apparmor_restriction_with_a_failed_box_names_the_sysctl_and_the_fix() -> None:
    assert diag(apparmor_restrict=1, error=UID_MAP) == (
        "user namespaces are blocked by AppArmor "
        "(kernel.apparmor_restrict_unprivileged_userns=1); allow them with sudo sysctl -w "
        "kernel.apparmor_restrict_unprivileged_userns=0, or install an AppArmor profile "
        "for bwrap that allows userns" + LANDLOCK)
    err = causes.diagnose_userns(euid=1000, apparmor_restrict=1, max_user_namespaces=15000,
                                unprivileged_userns_clone=None, error=NO_PERMISSION)
    assert err is not None
    assert err.diagnosis == causes.APPARMOR_DIAGNOSIS
    assert err.fix == causes.APPARMOR_FIX


def test_namespace_limit_is_named() -> None:
    assert diag(error=ENOSPC) == (
        "no user namespace can be made here: user.max_user_namespaces is reached or "
        "namespaces are nested too deep; raise the limit with sudo sysctl -w "
        "user.max_user_namespaces=15000; inside a container, run harness-sandbox on the "
        "host or allow nested user namespaces" + LANDLOCK)


def test_other_start_failure_quotes_bwrap() -> None:
    assert diag(error=UID_MAP) == (
        "bwrap could not create the box: setting up uid map: Permission denied; "
        "run harness-sandbox doctor for details")


def test_namespace_errors_are_told_from_the_commands_own_failure() -> None:
    assert causes.namespace_error(NO_PERMISSION.encode() + b"\n") == NO_PERMISSION
    assert causes.namespace_error(UID_MAP.encode()) == UID_MAP
    assert causes.namespace_error(ENOSPC.encode()) == ENOSPC
    assert causes.namespace_error(b"bwrap: execvp x: No such file or directory\n") is None
    assert causes.namespace_error(b"error: user namespace\n") is None
    assert causes.namespace_error(b"") is None


def test_features_are_read_from_the_help_text() -> None:
    text = ("usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]\n\n"
            "    --help                       Print this help\n"
            "    --cap-drop CAP               Drop cap CAP when running as privileged user\n")
    assert probe.parse_features(text) == ("--help", "--cap-drop")


def test_bwrap_off_path_says_where_it_looked_and_where_it_is() -> None:
    with pytest.raises(SandboxUnavailable) as err:
        bwrap_find.require_box(env={"PATH": "/nonexistent:/also-not"})
    assert err.value.diagnosis == ("bubblewrap (bwrap) is not on PATH (looked in "
                                   "/nonexistent:/also-not); it is installed at /usr/bin/bwrap")
    assert err.value.fix == "add /usr/bin to PATH"


def test_missing_bwrap_is_named_with_the_package_to_install(tmp_path: Path) -> None:
    err = bwrap_find.not_found("/nonexistent", usual=(str(tmp_path / "bwrap"),))
    assert err.diagnosis == "bubblewrap (bwrap) is not installed (looked in /nonexistent)"
    assert err.fix == "install the bubblewrap package: sudo apt-get install bubblewrap"
    assert bwrap_find.not_found("", usual=()).diagnosis == (
        "bubblewrap (bwrap) is not installed (looked in nothing (PATH is empty))")


def test_relative_path_entries_are_not_searched(tmp_path: Path) -> None:
    (tmp_path / "bwrap").write_text("#!/bin/sh\n")
    (tmp_path / "bwrap").chmod(0o755)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert bwrap_find.find_bwrap(".:bin:") is None
    finally:
        os.chdir(cwd)
    assert bwrap_find.find_bwrap(str(tmp_path)) == str(tmp_path / "bwrap")


@needs_bwrap
def test_bwrap_inside_the_project_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "bin").mkdir(parents=True)
    assert SYSTEM_BWRAP is not None
    (project / "bin" / "bwrap").symlink_to(SYSTEM_BWRAP)
    (tmp_path / "ptmp").mkdir()
    policy = Policy.create(str(project), private_tmp=str(tmp_path / "ptmp"),
                           hide_defaults=False, env={})
    with pytest.raises(SandboxUnavailable) as err:
        bwrap_find.require_box(policy, env={"PATH": f"{project}/bin:/usr/bin"})
    assert str(err.value) == (
        f"{project}/bin/bwrap is in the project ({project}), where boxed commands could "
        "replace it; install bubblewrap outside it (sudo apt-get install bubblewrap) and "
        "put that folder first on PATH")


@needs_bwrap
def test_require_box_finds_the_system_bwrap() -> None:
    path = "/nonexistent:" + os.path.dirname(SYSTEM_BWRAP or "")
    assert bwrap_find.require_box(env={"PATH": path}) == SYSTEM_BWRAP


def test_sysctls_are_read_as_integers_or_none(tmp_path: Path) -> None:
    (tmp_path / "v").write_text("1\n")
    (tmp_path / "bad").write_text("x\n")
    assert causes.read_sysctl(str(tmp_path / "v")) == 1
    assert causes.read_sysctl(str(tmp_path / "bad")) is None
    assert causes.read_sysctl(str(tmp_path / "absent")) is None


# -- on this machine -------------------------------------------------------------------


def _version() -> str:
    assert SYSTEM_BWRAP is not None
    return subprocess.run([SYSTEM_BWRAP, "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()


@needs_bwrap
def test_doctor_on_this_machine_says_the_box_works() -> None:
    r = subprocess.run([CLI, "doctor"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"bwrap: {SYSTEM_BWRAP}"
    assert "user namespaces: ok" in lines
    assert "network links in a box: lo" in lines
    assert lines[-1] == (f"the box works: {_version()} at {SYSTEM_BWRAP}, "
                         "network links inside: lo")


@needs_bwrap
def test_doctor_json_is_one_document_on_stdout() -> None:
    r = subprocess.run([CLI, "doctor", "--json"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True
    assert doc["bwrap"] == doc["program"] == SYSTEM_BWRAP
    assert doc["backend"] == "bwrap"
    assert doc["links"] == ["lo"]
    assert doc["userns_ok"] is True
    assert "--cap-drop" in doc["features"]
    assert set(doc["sysctls"]) == {"kernel.apparmor_restrict_unprivileged_userns",
                                   "user.max_user_namespaces",
                                   "kernel.unprivileged_userns_clone"}


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the macOS report off macOS")
def test_doctor_for_macos_speaks_of_sandbox_exec_not_bwrap() -> None:
    # Off macOS /usr/bin/sandbox-exec is absent: the report names it and nothing of bwrap.
    from launchers.cli.doctor import report

    p = probe.probe(platform="darwin")
    assert (p.ok, p.backend, p.program) == (False, "sandbox-exec", "/usr/bin/sandbox-exec")
    lines = report(p)
    assert lines[0] == "sandbox-exec: /usr/bin/sandbox-exec"
    assert lines[-2:] == [
        "the box cannot be built: /usr/bin/sandbox-exec is not there",
        "fix: sandbox-exec is part of macOS; check that /usr/bin is intact",
    ]
    assert not any("bwrap" in line for line in lines)
    assert p.as_dict()["backend"] == "sandbox-exec"


def test_doctor_without_bwrap_on_path_says_where_it_is() -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    r = subprocess.run([CLI, "doctor"], capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-2:] == [
        "the box cannot be built: bubblewrap (bwrap) is not on PATH (looked in "
        "/nonexistent); it is installed at /usr/bin/bwrap",
        "fix: add /usr/bin to PATH",
    ]


def _in_box_without_userns(code: str) -> subprocess.CompletedProcess[str]:
    """Run python ``code`` in a box where no further user namespace can be made: a real
    machine on which bwrap cannot start."""
    assert SYSTEM_BWRAP is not None
    argv = [SYSTEM_BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", "/tmp",
            "--", sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60,
                          env={**os.environ, "PATH": os.path.dirname(SYSTEM_BWRAP)})


@needs_bwrap
def test_probe_where_userns_is_blocked_reports_the_real_error_and_the_limit() -> None:
    r = _in_box_without_userns(
        "import json; from sandbox.doctor.probe import probe; print(json.dumps(probe().as_dict()))")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["userns_ok"] is False
    assert doc["userns_error"].startswith("bwrap: Creating new namespace failed")
    assert doc["diagnosis"] == causes.LIMIT_DIAGNOSIS
    assert doc["fix"] == causes.LIMIT_FIX
    assert doc["links"] is None


@needs_bwrap
def test_a_box_that_cannot_start_raises_the_diagnosis_instead_of_running_on_the_host() -> None:
    code = (
        "import os\n"
        "from sandbox.session import Session\n"
        "from sandbox.errors import SandboxUnavailable\n"
        "os.mkdir('/tmp/p')\n"
        # The warm box is built at the session's open, a box per run at the run.
        "try:\n"
        "    with Session.open('/tmp/p') as s:\n"
        "        r = s.run(['sh', '-c', 'echo ran'])\n"
        "        print('RAN', r)\n"
        "except SandboxUnavailable as e:\n"
        "    print(e.diagnosis)\n"
    )
    r = _in_box_without_userns(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == causes.LIMIT_DIAGNOSIS


@needs_bwrap
def test_doctor_reports_each_protection_in_force_or_why_not() -> None:
    r = subprocess.run([CLI, "doctor", "--json"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    got = {b["name"]: b for b in json.loads(r.stdout)["hardening"]}
    assert list(got) == ["seccomp", "processes", "memory", "tmp", "shm", "unix_guard",
                         "host_runs"]
    machine = os.uname().machine
    arches = {"x86_64": "x86_64, x86, x32", "aarch64": "aarch64, arm"}.get(machine, "native")
    assert got["seccomp"] == {"name": "seccomp", "in_force": True, "why": None,
                              "how": f"libseccomp filter for {arches}"}
    assert got["shm"]["in_force"] is True
    # Which launcher starts a boxed command under the Unix-socket guard, and why: the
    # compiled one where the system has a compiler (scripts/_setup.sh), which is also
    # the warm box's starter.
    assert got["unix_guard"]["how"].startswith(
        "each boxed command (a warm run's or a box per run's) started under it by the "
        "compiled launcher, built by /")
    assert got["processes"]["in_force"] is True  # a cgroup, else RLIMIT_NPROC per box
    for b in got.values():
        assert b["in_force"] == (b["why"] is None), b
    if os.geteuid() != 0:
        # What an unprivileged user cannot have on this machine (cgroup v1, no
        # delegation) is said, with the reason.
        assert got["tmp"]["why"] == (
            "mounting a size-capped tmpfs that lasts for the session needs root; an "
            "unprivileged user's private /tmp is a folder on the host's disk")
        assert got["host_runs"]["why"].endswith("; the run marker and process group remain")
        from sandbox.process.cgroup import v1_base

        if v1_base("pids") and v1_base("memory"):  # this machine: cgroup v1 only
            assert got["memory"]["why"] == (
                f"this machine has cgroup v1, where only root may make a group "
                f"({v1_base('pids')} and {v1_base('memory')} are not writable); run as "
                "root, or use a cgroup v2 machine with systemd's user delegation")
    human = subprocess.run([CLI, "doctor"], capture_output=True, text=True, check=False)
    lines = human.stderr.splitlines()
    assert f"seccomp: in force (libseccomp filter for {arches})" in lines
    assert any(line.startswith("memory: ") for line in lines)


def test_doctor_says_which_host_user_the_box_runs_as(tmp_path: Path) -> None:
    from sandbox.session import Session

    r = subprocess.run([CLI, "doctor", "--json"], capture_output=True, text=True,
                       check=False)
    from sandbox.linux.standin import UID

    who = json.loads(r.stdout)["box_identity"]
    root = os.geteuid() == 0
    expected = UID if root else os.geteuid()
    # Root's stand-in keeps root's own on the files of its range (chown, tar -xp).
    caps = "CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, in its own user namespace"
    assert who["host_uid"] == expected
    assert who["capabilities"] == (caps if root else "none")
    text = subprocess.run([CLI, "doctor"], capture_output=True, text=True, check=False)
    owner = ("the owner of the folder they are made in" if root
             else f"uid {os.geteuid()}")
    said = f"capabilities {caps}" if root else "no capabilities"
    assert (f"the box runs as: host uid {expected}, {said}; files it makes "
            f"are owned by {owner}\n") in text.stderr
    # And it is so: what the box makes in the project is that user's on the host.
    project = tmp_path / "p"
    project.mkdir()
    with Session.open(str(project)) as s:
        made = s.run(["sh", "-c", "echo x > made; grep CapEff /proc/self/status"])
    assert made.stdout.split()[-1] == (b"000000000000000b" if root else b"0000000000000000")
    assert (project / "made").stat().st_uid == os.geteuid() == project.stat().st_uid


@needs_bwrap
def test_doctor_with_the_host_network_says_so_not_lo(tmp_path: Path) -> None:
    """``network = true`` shares the host's links: the trial box's own loopback is not
    what a box of that config sees."""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("[sandbox]\nnetwork = true\n")
    (tmp_path / "proj").mkdir()
    env = {**os.environ, "HARNESS_HOME": str(tmp_path / "home")}
    r = subprocess.run([CLI, "doctor"], capture_output=True, text=True, check=False, env=env,
                       cwd=tmp_path / "proj")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "network links in a box: the host's (network = true)" in lines
    assert "network links in a box: lo" not in lines
    assert lines[-1] == (f"the box works: {_version()} at {SYSTEM_BWRAP}, "
                         "network: the host's (network = true)")
