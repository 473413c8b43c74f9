"""What the host makes in the project between boxed runs (the user's editor makes
``.idea``, a host ``pre-commit install`` makes ``.git/hooks``) is the user's: taken and
held as what was there at the open (sandbox/session/turns.py), never moved out as the
box's. What appears while a run of another session goes is not taken: it may be that
run's. Real boxes, both kinds, the host's side done for real between runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from helpers.unprivileged import searchable_tmp

from sandbox.linux import landlock
from sandbox.process.runs import Runs
from sandbox.session import Session
from sandbox.session.turns import Turns
from sandbox.settings import SandboxSettings

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux boxes"),
]
BOXES = pytest.mark.parametrize("box", ["auto", "landlock"])
WRITE = "echo evil >> .idea/workspace.xml; echo evil >> .git/hooks/pre-commit; true"


@pytest.fixture
def project() -> Iterator[Path]:
    base = searchable_tmp()
    p = base / "proj"
    p.mkdir()
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    shutil.rmtree(p / ".git" / "hooks")
    try:
        yield p
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _open(project: Path, box: str) -> AbstractContextManager[Session]:
    if box == "landlock" and landlock.abi() < landlock.NEEDED_ABI:
        pytest.skip("this kernel's Landlock lacks ABI 6")
    env = {**os.environ, "XDG_DATA_HOME": str(project.parent / "data")}
    return Session.open(str(project), SandboxSettings(box=box), env=env)


def _host_makes(project: Path) -> None:
    (project / ".idea").mkdir()
    (project / ".idea" / "workspace.xml").write_text("<mine/>\n")
    (project / ".git" / "hooks").mkdir()
    (project / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")


def _moved(project: Path) -> list[Path]:
    return sorted((project.parent / "data").glob("harness/moved/*/*"))


@BOXES
@pytest.mark.parametrize("taking", [True, False], ids=["taken", "defence-off"])
def test_what_the_host_makes_between_runs_is_held_as_its_own(
        project: Path, box: str, taking: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not taking:
        monkeypatch.setattr(Turns, "_take", lambda self: [])
    with _open(project, box) as s:
        assert s.run(["true"]).ok
        _host_makes(project)
        r = s.run(["sh", "-c", WRITE])
        later = s.run(["sh", "-c", "cat .idea/workspace.xml .git/hooks/pre-commit"])
    if not taking:  # moved out after the run, as if the box had made them
        assert not (project / ".idea").exists() and not (project / ".git" / "hooks").exists()
        return
    assert (project / ".idea" / "workspace.xml").read_text() == "<mine/>\n"
    assert (project / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\n"
    if box == "auto":  # read-only from that run on
        assert r.stderr.count(b"Read-only file system") == 2, r
        assert later.stdout == b"<mine/>\n#!/bin/sh\n", later
    else:  # the Landlock box can write them: put back after the run
        assert [p.name for p in _moved(project)] and "the box changed" in " ".join(s.warnings)
    for name in (".idea", ".git/hooks"):
        assert any(w.startswith(f"{project}/{name} appeared on the host while no boxed run")
                   for w in s.warnings), s.warnings


@BOXES
def test_what_the_host_makes_after_the_last_run_is_left_at_the_end(
        project: Path, box: str) -> None:
    with _open(project, box) as s:
        assert s.run(["true"]).ok
        _host_makes(project)
    assert (project / ".idea" / "workspace.xml").read_text() == "<mine/>\n"
    assert (project / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\n"
    assert _moved(project) == []


@pytest.mark.parametrize(("box", "gate"), [("auto", True), ("landlock", True),
                                           ("landlock", False)],
                         ids=["namespace", "landlock", "landlock-defence-off"])
def test_nothing_appearing_while_another_sessions_run_goes_is_taken(
        project: Path, box: str, gate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first session's run makes ``.git/hooks/pre-commit`` and is still going when
    the second's run starts and goes on past its end: the second does not take the hook
    as the host's. With the gate taken out, the Landlock box's second session takes it
    and puts it back once the first moved it out: host git runs it. (The namespace box
    would hold it read-only and lose it to the first's move: no plant, a broken box.)"""
    from sandbox.linux import landlockbox, linuxbox

    for kind in (linuxbox.LinuxBox, landlockbox.LandlockBox):  # the plant stays a while
        monkeypatch.setattr(kind, "_seen", lambda self: None)
    if not gate:
        monkeypatch.setattr(Runs, "alone", lambda self: _yes())
    with _open(project, box) as a, _open(project, box) as b:
        going = threading.Thread(target=a.run, args=(["sh", "-c", (
            "mkdir .git/hooks && printf '#!/bin/sh\\ntouch ../RAN\\n' > "
            ".git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; sleep 1")],))
        going.start()
        deadline = time.monotonic() + 10
        while not (project / ".git" / "hooks" / "pre-commit").exists() and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.run(["sleep", "2"]).ok  # past the first's end
        going.join()
    subprocess.run(["git", "-C", str(project), "-c", "user.name=t", "-c",
                    "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m",
                    "host"], check=False)
    if gate:
        assert not (project.parent / "RAN").exists()
        assert not (project / ".git" / "hooks").exists()
    else:
        assert (project.parent / "RAN").exists(), "the attack did not take"


class _yes:
    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("forgetting", [True, False], ids=["kept", "defence-off"])
def test_a_protected_config_the_host_removes_does_not_end_the_session(
        project: Path, forgetting: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user removes ``.vscode`` on the host mid-session (the box held it read-only):
    the next run's mounts are made again without it, and it is kept as a name missing
    at the open is: what the box makes there is moved out. Without that, the next run
    was refused ("end the session")."""
    from sandbox.errors import SandboxUnavailable
    from sandbox.linux import linuxbox

    if not forgetting:
        monkeypatch.setattr(linuxbox.LinuxBox, "_forget_gone", lambda self: None)
    (project / ".vscode").mkdir()
    (project / ".vscode" / "settings.json").write_text("{}\n")
    with _open(project, "auto") as s:
        assert s.run(["true"]).ok
        shutil.rmtree(project / ".vscode")
        make = ["sh", "-c", "mkdir .vscode && echo '{}' > .vscode/tasks.json"]
        if not forgetting:
            with pytest.raises(SandboxUnavailable, match="end the session"):
                s.run(make)
            return
        r = s.run(make)
        assert r.returncode is not None, r
        assert not (project / ".vscode").exists()
    said = " ".join(s.warnings)
    assert f"{project}/.vscode was removed on the host during the session" in said, said
    assert [p.name for p in _moved(project)] == [".vscode"], _moved(project)


@BOXES
def test_what_a_run_made_and_could_not_be_moved_is_never_taken_as_the_hosts(
        project: Path, box: str) -> None:
    """The data folder cannot be made (a file stands where it goes): what the run made
    at a kept name stays, said as not moved, and the next run's start, no run going
    anywhere, does not take it as the host's (it would be held as the user's, and said
    so)."""
    (project.parent / "data").write_text("not a folder\n")
    with _open(project, box) as s:
        r = s.run(["sh", "-c", "mkdir .idea && echo '<x/>' > .idea/workspace.xml; "
                               "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit"])
        assert r.ok, r
        assert s.run(["true"]).ok
        assert (project / ".idea").exists() and (project / ".git" / "hooks").exists()
    said = " ".join(s.warnings)
    assert "appeared on the host" not in said, said
    assert "could not be moved out" in said, said
