"""The compiled launcher builds clean with the hardening flags, warnings as errors:
what initcache builds in a session is what passes here (issue 39)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox.linux import initcache

pytestmark = pytest.mark.skipif(initcache.compiler() is None, reason="needs a C compiler")


def test_the_launcher_builds_with_the_hardening_flags_and_no_warning(tmp_path: Path) -> None:
    cc = initcache.compiler()
    assert cc is not None
    for flag in ("-D_FORTIFY_SOURCE=2", "-fstack-protector-strong", "-Wformat=2",
                 "-Wshadow", "-Wconversion"):
        assert flag in initcache.FLAGS
    sources = [p for p in initcache.SOURCES if p.endswith(".c")]
    r = subprocess.run([cc, *initcache.FLAGS, "-Werror", "-o", str(tmp_path / "guardinit"),
                        *sources], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr


def gcc() -> str | None:
    """The system's gcc when it has the static analyzer (gcc 10 or later), else None."""
    for cc in ("/usr/bin/gcc", "/bin/gcc", initcache.compiler()):
        if cc is not None and subprocess.run(
                [cc, "-fanalyzer", "-fsyntax-only", "-x", "c", "/dev/null"],
                capture_output=True, check=False).returncode == 0:
            return cc
    return None


def test_the_launcher_builds_clean_under_gccs_analyzer(tmp_path: Path) -> None:
    """No leak of memory or descriptor on any path gcc's -fanalyzer follows, with the
    flags initcache builds it with."""
    cc = gcc()
    if cc is None:
        pytest.skip("the C compiler here has no -fanalyzer (gcc 10 or later has)")
    sources = [p for p in initcache.SOURCES if p.endswith(".c")]
    r = subprocess.run([cc, *initcache.FLAGS, "-fanalyzer", "-Werror",
                        "-o", str(tmp_path / "guardinit"), *sources],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
