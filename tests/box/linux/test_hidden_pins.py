"""Hidden stays hidden: the box cannot rename a folder above a hidden path, and a session
whose configured hidden path has gone is refused rather than opened without it."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture
def tree() -> Iterator[Path]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-hidpin-")))
    try:
        (base / "project" / "sub" / "deeper" / "secrets").mkdir(parents=True)
        (base / "project" / "sub" / "deeper" / "secrets" / "key").write_text("SECRET\n")
        yield base / "project"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def settings(project: Path) -> SandboxSettings:
    return SandboxSettings(hidden=(str(project / "sub" / "deeper" / "secrets"),),
                           hide_defaults=False)


@pytest.mark.parametrize("folder", ["sub", "sub/deeper"])
def test_the_box_cannot_rename_a_folder_above_a_hidden_path(tree: Path, folder: str) -> None:
    with Session.open(str(tree), settings(tree)) as s:
        r = s.run(["sh", "-c", f"mv {folder} moved; cat moved/secrets/key moved/deeper/"
                               "secrets/key 2>/dev/null; true"])
        assert b"SECRET" not in r.stdout, r
    # The next session, for real: the secret is where the config says, and hidden.
    assert (tree / "sub" / "deeper" / "secrets" / "key").exists()
    with Session.open(str(tree), settings(tree)) as s:
        r = s.run(["sh", "-c", "cat sub/deeper/secrets/key; find . -name key -exec cat {} +"])
        assert b"SECRET" not in r.stdout, r


def test_a_configured_hidden_path_that_has_gone_refuses_the_session(tree: Path) -> None:
    os.rename(tree / "sub", tree / "elsewhere")
    with pytest.raises(PolicyError) as info, Session.open(str(tree), settings(tree)):
        pass
    gone = tree / "sub" / "deeper" / "secrets"
    assert str(info.value) == (
        f"the hidden path {gone} does not exist: if a folder above it was renamed, what "
        "it holds is no longer hidden; find where it went and name that in [sandbox] "
        "hidden, or remove the entry")
