"""The real box cannot change a trusted openHarness file, create one in ``.oh/``, or
write the trust store; an agent's file made in the box runs nothing on the host.

Each attack is made from inside the box, then the host side runs for real (``audit``
and ``hook --openharness``), and a marker hook shows whether anything ran.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator

import pytest
from helpers.trust_world import World, new_text, new_world

from launchers.config import SandboxSettings
from sandbox.plan import RunResult
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with new_world(monkeypatch) as w:
        yield w


BENIGN = "hooks:\n  preToolUse:\n    - command: /bin/true\n"


def boxed(world: World, script: str) -> RunResult:
    with Session.open(str(world.project), SandboxSettings()) as session:
        return session.run(["sh", "-c", script], stdin=b"", timeout=30)


def test_the_box_cannot_change_remove_or_move_the_oh_folder(world: World) -> None:
    world.write(BENIGN)
    before = world.oh.read_bytes()
    for attempt in ["echo 'x' >> .oh/config.yaml",
                    "printf 'hooks: {}' > .oh/config.yaml",
                    "rm -f .oh/config.yaml",
                    "mv .oh/config.yaml .oh/old.yaml",
                    "ln -sf /etc/passwd .oh/config.yaml",
                    "mv .oh .oh-old",
                    "rm -rf .oh",
                    "chmod 777 .oh"]:
        r = boxed(world, f"{attempt} && echo DONE")
        assert b"DONE" not in r.stdout, (attempt, r)
        assert world.oh.read_bytes() == before, attempt
    # The rest of the project stays writable.
    assert boxed(world, "echo ok > note.txt").returncode == 0
    assert (world.project / "note.txt").read_text() == "ok\n"


def test_a_missing_config_cannot_be_created_in_oh(world: World) -> None:
    (world.project / ".oh").mkdir()
    for attempt in ["echo 'hooks: {}' > .oh/config.yaml", "mkdir .oh/sub",
                    "ln -s /tmp/x .oh/config.yaml"]:
        r = boxed(world, f"{attempt} && echo DONE")
        assert b"DONE" not in r.stdout, (attempt, r)
        assert not world.oh.exists() and not world.oh.is_symlink()
    assert b"Read-only file system" in boxed(world, "touch .oh/config.yaml").stderr


def test_the_trust_store_cannot_be_written_from_the_box(world: World) -> None:
    world.write(BENIGN)
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    before = world.store.read_bytes()
    for attempt in [f"echo '{{}}' > {world.store}", f"rm -f {world.store}",
                    f"mv {world.store} {world.store}.old",
                    f"ln {world.store} ./trusted-link.json",
                    f"chmod 666 {world.store}"]:
        r = boxed(world, f"{attempt} && echo DONE")
        assert b"DONE" not in r.stdout, (attempt, r)
        assert world.store.read_bytes() == before, attempt
    world.store.unlink()
    r = boxed(world, f"echo '{{}}' > {world.store} && echo DONE")
    assert b"DONE" not in r.stdout and not world.store.exists()


MAKE_OH = "mkdir -p .oh && printf 'hooks:\\n  preToolUse:\\n    - command: touch {}\\n' " \
          "> .oh/config.yaml && echo MADE"


def test_a_missing_oh_the_box_makes_is_moved_out(world: World) -> None:
    """No .oh at the start of the session: the one the box makes is moved out of the
    project once the run ends (sandbox/session/moveout.py), into the user's data folder."""
    done = world.cli("run", "--project", str(world.project), "--", "sh", "-c",
                     MAKE_OH.format(world.marker))
    assert done.out == "MADE\n", done.err
    assert f"the box made {world.project}/.oh, read by openHarness" in done.err
    assert not (world.project / ".oh").exists()
    (kept,) = (world.data / "harness" / "moved").glob("*/.oh/config.yaml")
    assert f"touch {world.marker}" in kept.read_text()
    assert not world.marker.exists()


def test_a_file_the_box_makes_runs_nothing_on_the_host(world: World) -> None:
    # .oh released ([sandbox] allow_tool_configs): the box may make one, so only trust
    # stands between it and the host.
    home = world.base / "harness"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[sandbox]\nallow_tool_configs = [".oh"]\n')
    done = world.cli("run", "--project", str(world.project), "--", "sh", "-c",
                     MAKE_OH.format(world.marker))
    assert (done.code, done.out) == (0, "MADE\n"), done.err
    assert f"touch {world.marker}" in world.oh.read_text()

    audit = world.audit("--json")
    assert audit.code == 1
    assert audit.err.splitlines()[1:] == [new_text(world.oh), "audit: 1 of 1 hook refused"]
    hook = world.hook()
    assert (hook.code, hook.err) == (2, f"harness-sandbox: {new_text(world.oh)}\n")
    assert not world.marker.exists()


def test_a_trusted_file_stays_what_was_trusted_through_a_session(world: World) -> None:
    world.write(BENIGN)
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    script = (f"printf 'hooks:\\n  preToolUse:\\n    - command: touch {world.marker}\\n' "
              "> .oh/config.yaml; echo '{\"version\": 1, \"files\": {}}' > "
              f"{world.store}; true")
    done = world.cli("run", "--project", str(world.project), "--", "sh", "-c", script)
    assert done.code == 0
    assert "Read-only file system" in done.err
    assert world.oh.read_text() == BENIGN
    hook = world.hook()
    assert (hook.code, hook.err) == (0, "preToolUse: allowed (ran preToolUse[0])\n")
    assert world.audit().err.splitlines()[-1] == "audit: 1 hook may run"
    assert not world.marker.exists()


def test_hook_openharness_takes_its_sandbox_table_from_config(world: World) -> None:
    # A boxed hook that writes outside the project: the box stops it. With --config
    # naming [sandbox] enabled = false, the session has no box and the hook runs on the
    # host, without the variable scrub names.
    ran = world.marks / "host-ran"
    world.write(f"hooks:\n  preToolUse:\n    - command: 'echo ${{MY_SECRET:-none}} > {ran}'\n"
                "      sandbox: true\n")
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    done = world.hook(MY_SECRET="s3cret")
    assert done.code == 1 and not ran.exists()  # boxed: the marker folder is read-only
    config = world.base / "elsewhere.toml"
    config.write_text('[sandbox]\nenabled = false\nscrub = ["MY_SECRET"]\n')
    done = world.hook("--config", str(config), MY_SECRET="s3cret")
    assert done.code == 0, done.err
    assert ran.read_text() == "none\n"
