"""The session's stage (sandbox/linux/stage.py): the box's git binds made once, in
namespaces of the session's, instead of by bwrap for every box.

Root's sessions always have one (root's stand-in); a plain user's box has one from
STAGE_AT binds on, which these tests lower to 0 so that every box here is staged. Each
protection is attempted from inside a real box, warm and per run, and checked on the
host with host git; root and plain user alike.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from sandbox.errors import PolicyError, StageRefused
from sandbox.linux import stage as stage_mod
from sandbox.linux.linuxbox import LinuxBox
from sandbox.linux.stage import Stage
from sandbox.linux.stagebinds import Bind
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation]

BOTH = pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
SETTINGS = SandboxSettings(hide_defaults=False)


@pytest.fixture(autouse=True)
def always_staged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage_mod, "STAGE_AT", 0)


def _repo(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    # No hooks folder: the box must not be able to make one.
    for hook in (project / ".git" / "hooks").iterdir():
        hook.unlink()
    (project / ".git" / "hooks").rmdir()


@BOTH
def test_a_staged_box_keeps_gits_inputs_read_only(project: Path, outside: Path,
                                                  warm: bool) -> None:
    _repo(project)
    config = (project / ".git" / "config").read_text()
    marker = outside / "ran"
    attempt = (
        f"printf '[core]\\n\\tfsmonitor = \"touch {marker}\"\\n' >> .git/config; "
        f"mkdir -p .git/hooks; printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit; "
        "mv .git .moved; mv .git/hooks .git/h2; echo done")
    with Session.open(str(project), SETTINGS, warm=warm) as s:
        assert isinstance(s._box, LinuxBox) and s._box.backend.stage() is not None
        r = s.run(["sh", "-c", attempt])
        fds = s.run(["sh", "-c", "ls /proc/self/fd"])
    assert r.stdout == b"done\n"
    err = r.stderr.decode()
    # The config's append lands in the box's copy (sandbox/git/configcopy.py), refused
    # at the run's end; the moves of .git are refused outright; the hooks folder, missing
    # at the open, is made, and moved out once the run is over.
    assert "busy" in err, err
    assert (project / ".git" / "config").read_text() == config
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert (project / ".git").is_dir() and not (project / ".moved").exists()
    subprocess.run(["git", "status"], cwd=project, capture_output=True, check=False)
    assert not marker.exists()
    # No descriptor the session held reaches the command (it would reopen the file
    # below its cover through /proc/self/fd).
    assert sorted(int(x) for x in fds.stdout.split()) in ([0, 1, 2], [0, 1, 2, 3])


def test_a_path_that_is_another_file_now_refuses_the_stage(project: Path) -> None:
    _repo(project)
    config = project / ".git" / "config"
    st = config.stat()
    with pytest.raises(PolicyError) as err:
        Stage.open((str(project),), [Bind("ro", str(config), str(project),
                                          expect=(st.st_dev, st.st_ino + 1))],
                   stand_in=os.geteuid() == 0)
    assert str(err.value) == (f"{config} changed while the session opened (it is another "
                              "file now); try again")


def test_a_link_in_place_of_a_protected_path_refuses_the_stage(project: Path,
                                                               outside: Path) -> None:
    _repo(project)
    config = project / ".git" / "config"
    config.unlink()
    config.symlink_to(outside / "elsewhere")
    with pytest.raises(PolicyError) as err:
        Stage.open((str(project),), [Bind("ro", str(config), str(project))],
                   stand_in=os.geteuid() == 0)
    assert str(err.value).startswith(f"{config} changed while the session opened (")


@BOTH
def test_a_staged_box_has_each_bind_once(project: Path, warm: bool) -> None:
    """The box's / is the stage's copy of / from before its binds: they are not in the
    box a second time, under a / the project's own bind covers (each run's mount
    namespace copies every mount there is)."""
    _repo(project)
    git = str(project / ".git")
    with Session.open(str(project), SETTINGS, warm=warm) as s:
        assert isinstance(s._box, LinuxBox) and s._box.backend.stage() is not None
        r = s.run(["cat", "/proc/self/mountinfo"])
        copy = stage_mod.root_copy(s.policy.private_tmp)
        assert os.path.isdir(copy) and not os.listdir(copy)  # the mount is the stage's
    points = [line.split()[4] for line in r.stdout.decode().splitlines()]
    assert points.count(git) == 1, points
    assert points.count(f"{git}/config") == 1
    assert not os.path.exists(copy)  # removed with the session


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's boxes are staged with few binds")
def test_a_stage_with_few_binds_keeps_its_own_root(project: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of / doubles the mount table each bwrap of the stage reads for every
    mount: root's stage of a small repository (few binds, so few in the box twice)
    makes none, and its boxes bind the stage's own /."""
    monkeypatch.setattr(stage_mod, "STAGE_AT", 64)
    _repo(project)
    with Session.open(str(project), SETTINGS, warm=False) as s:
        assert isinstance(s._box, LinuxBox)
        stage = s._box.backend.stage()
        assert stage is not None and stage.root == "/"
        assert not os.path.exists(stage_mod.root_copy(s.policy.private_tmp))
        assert s.run(["sh", "-c", "test -d .git && echo ok"]).stdout == b"ok\n"


def test_a_repository_with_many_modules_is_staged_at_the_real_threshold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage_mod, "STAGE_AT", 64)
    subs = tmp_path / "subs"
    subs.mkdir()
    repo = tmp_path / "repo"
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(12):
        sub = subs / f"m{i}"
        subprocess.run(["git", "init", "-q", str(sub)], check=True)
        subprocess.run(["git", "-C", str(sub), *ident, "commit", "-q", "--allow-empty",
                        "-m", "m"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "protocol.file.allow=always",
                        "submodule", "add", "-q", str(sub), f"m{i}"], check=True,
                       capture_output=True)
    with Session.open(str(repo), SETTINGS) as s:
        assert isinstance(s._box, LinuxBox) and s._box.backend.stage() is not None
        r = s.run(["sh", "-c", "echo x >> .git/modules/m3/config; echo x >> m3/.git; "
                               "git -C m3 status --short >/dev/null && echo ok"])
    assert r.stdout == b"ok\n", r.stderr
    # Both refused (a module's config is the session's read-only copy of it).
    assert r.stderr.decode().count("cannot create") == 2


def _refuse_user_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox import libc

    real = libc.unshare

    def unshare(kind: int) -> None:
        if kind & libc.CLONE_NEWUSER:
            raise OSError(1, "unshare: Operation not permitted")
        real(kind)

    monkeypatch.setattr(libc, "unshare", unshare)


def test_a_refused_user_namespace_is_said_as_such(project: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _refuse_user_namespaces(monkeypatch)
    with pytest.raises(StageRefused) as err:
        Stage.open((str(project),), (), stand_in=False)
    assert str(err.value).startswith("this user may not make the box's staging "
                                     "namespace: unshare: Operation not permitted")


@pytest.mark.skipif(os.geteuid() == 0, reason="root's stand-in is required: a session "
                                              "started by root never goes without it")
def test_without_a_stage_bwrap_makes_the_same_binds(project: Path, outside: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _repo(project)
    (project / ".git" / "hooks").mkdir()  # bound read-only (a missing one is kept)
    _refuse_user_namespaces(monkeypatch)
    config = (project / ".git" / "config").read_text()
    with Session.open(str(project), SETTINGS) as s:
        assert isinstance(s._box, LinuxBox) and s._box.backend.stage() is None
        r = s.run(["sh", "-c", "echo x >> .git/config; mkdir .git/hooks/x"])
    assert r.stderr.decode().count("Read-only file system") == 2
    assert (project / ".git" / "config").read_text() == config


def _late_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defence off: the binds made late whatever they cover, and (so that the
    outcome does not hang on a race) once bwrap has made the box."""
    from sandbox.linux import bwrap

    monkeypatch.setattr(bwrap, "bindable_late", lambda policy: True)
    real = Stage.bind_late

    def bind_late(self: Stage) -> None:
        time.sleep(0.3)
        real(self)

    monkeypatch.setattr(Stage, "bind_late", bind_late)


@pytest.mark.parametrize("defence", [True, False], ids=["checked", "defence-off"])
@BOTH
def test_a_hidden_file_below_a_pinned_folder_stays_hidden(
        project: Path, warm: bool, defence: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hidden file's folders are pinned by the stage and the file is covered by bwrap.
    The warm box's stage makes its binds while bwrap makes the box: a pin arriving after
    bwrap's cover would lay the folder, secret and all, over it. Such a stage makes its
    binds first (``bindable_late``)."""
    _repo(project)
    secret = project / "deploy" / "keys" / "secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("the secret\n")
    if not defence:
        _late_everywhere(monkeypatch)
    settings = SandboxSettings(hide_defaults=False, hidden=(str(secret),))
    with Session.open(str(project), settings, warm=warm) as s:
        assert isinstance(s._box, LinuxBox) and s._box.backend.stage() is not None
        r = s.run(["cat", "deploy/keys/secret.txt"])
    if defence or not warm:  # a box per run starts after every bind either way
        assert r.stdout == b"", r.stdout
    else:
        assert r.stdout == b"the secret\n"  # what the check prevents


def test_a_warm_box_starts_while_its_stage_binds(project: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm box's stage is made without its binds, which are made while bwrap
    starts (bwrap reads the whole mount table after each of its own binds); the first
    run, and every run made ahead, has them."""
    _repo(project)
    pending: list[int] = []
    real = Stage.bind_late

    def bind_late(self: Stage) -> None:
        pending.append(len(self._late))
        real(self)

    monkeypatch.setattr(Stage, "bind_late", bind_late)
    (project / ".git" / "hooks").mkdir()  # bound read-only, late
    with Session.open(str(project), SETTINGS) as s:
        assert isinstance(s._box, LinuxBox) and s._box.warm is not None
        runs = [s.run(["sh", "-c", "echo x > .git/hooks/pre-commit"]) for _ in range(5)]
    assert pending and pending[0] > 0
    for r in runs:
        assert b"Read-only file system" in r.stderr, r.stderr


def test_a_path_changed_before_the_late_binds_ends_the_open(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A protected file swapped between the session's hold and the stage's late binds
    refuses the session: the warm box it started is ended, nothing is left running."""
    _repo(project)
    config = project / ".git" / "config"
    real = Stage.bind_late

    def bind_late(self: Stage) -> None:
        text = config.read_text()
        config.unlink()
        config.write_text(text)  # the same words, another file
        real(self)

    monkeypatch.setattr(Stage, "bind_late", bind_late)
    with pytest.raises(PolicyError) as err, Session.open(str(project), SETTINGS):
        pass
    assert str(err.value).startswith(f"{config} changed while the session opened (")
    # The warm box ended with the open (the session's watchdog may still be ending).
    assert [p for p in psutil.Process().children(recursive=True) if p.name() == "bwrap"] == []


def test_a_stage_whose_binds_cover_a_mount_of_bwraps_binds_first(project: Path) -> None:
    """What ``bindable_late`` looks at: a pin above a hidden file, or above a writable
    folder bwrap binds, makes the stage bind first; git's binds alone do not (and a
    writable folder elsewhere does not either)."""
    from sandbox.linux.bwrap_args import bindable_late

    _repo(project)
    inner = project / "deploy"
    (inner / "out").mkdir(parents=True)
    (inner / "key").write_text("k")
    (project / "elsewhere").mkdir()
    cases = {((), ()): True, ((str(inner / "key"),), ()): False,
             ((), (str(project / "elsewhere"),)): True}
    for (hidden, writable), late in cases.items():
        settings = SandboxSettings(hide_defaults=False, hidden=hidden, writable=writable)
        with Session.open(str(project), settings, warm=False) as s:
            assert bindable_late(s.policy) is late, (hidden, writable)
    # A writable folder inside a pinned one (the git folder).
    settings = SandboxSettings(hide_defaults=False, writable=(str(project / ".git" / "info"),))
    with Session.open(str(project), settings, warm=False) as s:
        assert str(project / ".git") in s.policy.pinned_dirs
        assert not bindable_late(s.policy)
