"""scripts/check_junit.py: the macOS workflow fails when its macOS tests did not run.

Real pytest runs write real JUnit reports; on Linux the macOS tests skip, which is
exactly the case the check must refuse.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.paths import REPO, TESTS

CHECK = str(REPO / "scripts" / "check_junit.py")


def junit(tmp_path: Path, *targets: str, rootdir: Path = REPO) -> str:
    report = str(tmp_path / "report.xml")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--rootdir={rootdir}", f"--junitxml={report}", *targets],
                   cwd=rootdir, capture_output=True, timeout=120)
    return report


def check(report: str, name: str, min_run: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, CHECK, report, "--name", name,
                           "--min-run", str(min_run)], capture_output=True, text=True,
                          timeout=60)


def test_all_skipped_fails_the_job(tmp_path: Path) -> None:
    # A module that skips itself, as the macOS tests do everywhere but on a Mac.
    (tmp_path / "test_mac_only.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.skip(reason='needs macOS sandbox-exec; this is linux')\n"
        + "".join(f"def test_{i}():\n    pass\n" for i in range(3)))
    report = junit(tmp_path, "test_mac_only.py", rootdir=tmp_path)
    r = check(report, "test_mac_only", 1)
    assert r.returncode == 1
    assert r.stderr == ("check_junit: only 0 test_mac_only tests ran (3 skipped); at least 1 "
                        "must run here, so this job proves nothing\n")


def test_tests_that_ran_pass_the_check(tmp_path: Path) -> None:
    # Wherever under tests/ the module lives.
    rules = next(TESTS.rglob("test_seatbelt_rules.py")).relative_to(REPO)
    report = junit(tmp_path, str(rules))
    r = check(report, "test_seatbelt_rules", 40)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("check_junit: ") and r.stdout.endswith(
        " test_seatbelt_rules tests ran, 0 skipped, none failed\n")


def test_a_failing_test_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("def test_x():\n    assert False\n"
                                             "def test_y():\n    pass\n")
    report = junit(tmp_path, "test_broken.py", rootdir=tmp_path)
    r = check(report, "test_broken", 1)
    assert r.returncode == 1
    assert r.stderr == "check_junit: 1 test_broken tests failed\n"


def test_an_unreadable_report_is_an_error(tmp_path: Path) -> None:
    r = check(str(tmp_path / "missing.xml"), "x", 1)
    assert r.returncode == 2
    assert r.stderr.startswith(f"check_junit: cannot read {tmp_path / 'missing.xml'}: ")
    assert os.path.exists(CHECK)
