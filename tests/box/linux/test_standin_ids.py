"""Other owners for root's stand-in (sandbox/linux/standin.py): the box's ids 0 to
65535 are the host's 2147000000 to 2147065535, ids no account has.

``tar -xp`` and ``chown`` work in a box started by root as they do for root bare, and
the host sees what they made owned by the range's ids, never by a real account's. Each
attempt is made from inside a real box, warm and per run, and looked at from the host.
"""

from __future__ import annotations

import io
import os
import pwd
import stat
import tarfile
from pathlib import Path

import pytest
from helpers.launchers import EACH_BOX, launcher

from sandbox.errors import SandboxUnavailable
from sandbox.linux import standin
from sandbox.linux.stage import Stage
from sandbox.session import Session

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the stand-in is made only for a session started by root "
                              "(the root pass covers it); a plain user's box is that user")

@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


def _run(project: Path, box: str, script: str) -> tuple[int | None, str, str]:
    """``script`` run by ``sh`` in a box of ``box``'s kind (the warm box or a box per
    run, each by the compiled launcher and by the Python one)."""
    with launcher(box) as warm, Session.open(str(project), warm=warm) as s:
        r = s.run(["sh", "-c", script])
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def _archive(path: Path, file_mode: int = 0o640) -> None:
    """A tar of ``tree/`` and ``tree/file``, owned by 1234:1234, as a build's archive."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in (("tree", tarfile.DIRTYPE, b""),
                                 ("tree/file", tarfile.REGTYPE, b"hi\n")):
            info = tarfile.TarInfo(name)
            info.type, info.uid, info.gid, info.size = kind, 1234, 1234, len(data)
            info.mode = 0o755 if kind == tarfile.DIRTYPE else file_mode
            tar.addfile(info, io.BytesIO(data) if data else None)


@EACH_BOX
def test_tar_xp_gives_the_archives_owners_as_ids_no_one_has(project: Path,
                                                           box: str) -> None:
    _archive(project / "a.tar")
    code, out, err = _run(project, box, "tar -xpf a.tar && ls -lnd tree tree/file")
    assert code == 0, err
    # In the box, the archive's owners; on the host, the range's.
    assert [line.split()[2:4] for line in out.splitlines()] == [["1234", "1234"]] * 2
    for path in (project / "tree", project / "tree" / "file"):
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (standin.UID + 1234, standin.GID + 1234)
    assert (project / "tree" / "file").read_bytes() == b"hi\n"


@EACH_BOX
def test_chown_reaches_the_range_and_nothing_past_it(project: Path, box: str) -> None:
    _, out, err = _run(project, box, (
        "touch f g h && chown 1234:1234 f && chown 65535:65535 g && echo OWNED; "
        "chown 65536 h; echo past=$?; chown 4294967294 h; echo far=$?"))
    assert "OWNED" in out, err
    assert (project / "f").stat().st_uid == standin.UID + 1234
    assert (project / "f").stat().st_gid == standin.GID + 1234
    assert (project / "g").stat().st_uid == standin.UID + 65535
    # Past the range: no id of the box's, as an unmapped id is to root bare.
    assert "past=1" in out and "far=1" in out
    assert err.count("Invalid argument") == 2, err
    assert (project / "h").stat().st_uid == project.stat().st_uid


@EACH_BOX
def test_a_file_of_a_mapped_id_gets_no_set_id_bit(project: Path, box: str) -> None:
    # Made by the host, set-user-id and owned by a mapped id: a write from the box
    # clears the bit (the box has no CAP_FSETID), as it would for any other writer.
    planted = project / "planted"
    planted.write_bytes(b"#!/bin/sh\n")
    os.chown(planted, standin.UID + 1234, standin.GID + 1234)
    os.chmod(planted, 0o6755)
    _, out, err = _run(project, box, (
        "cp /bin/true t && chown 1234:1234 t && echo OWNED; chmod 4755 t; chmod 2755 t; "
        "chmod u+s t; python3 -c 'import os; os.chmod(\"t\", 0o4755)'; "
        "echo true >> planted && echo WROTE"))
    assert "OWNED" in out and "WROTE" in out, err
    st = (project / "t").stat()
    assert st.st_uid == standin.UID + 1234
    assert not st.st_mode & 0o6000
    assert (project / "planted").read_bytes() == b"#!/bin/sh\ntrue\n"
    assert not (project / "planted").stat().st_mode & 0o6000


@EACH_BOX
def test_an_archives_set_id_file_lands_without_its_bits(project: Path, box: str) -> None:
    # The one difference from root bare: tar says it could not set the mode.
    _archive(project / "a.tar", file_mode=0o6755)
    _, out, err = _run(project, box, "tar -xpf a.tar; echo tar=$?")
    assert "tar=2" in out and "Cannot change mode" in err, err
    st = (project / "tree" / "file").stat()
    assert (st.st_uid, st.st_gid) == (standin.UID + 1234, standin.GID + 1234)
    assert not st.st_mode & 0o6000


@EACH_BOX
def test_a_real_accounts_files_stay_out_of_reach(project: Path, box: str) -> None:
    # uid 1 (daemon on most systems, or an id the box does not map either way).
    theirs = project / "theirs"
    theirs.write_bytes(b"secret\n")
    os.chown(theirs, 1, 1)
    os.chmod(theirs, 0o600)
    _, out, err = _run(project, box, (
        "cat /proc/self/uid_map /proc/self/gid_map; cat theirs; "
        "echo x >> theirs; chown 0:0 theirs; chmod 666 theirs; rm -f theirs; "
        "touch mine && chown 1:1 mine && chown 0:0 mine && echo DONE"))
    assert out.split()[:6] == ["0", str(standin.UID), str(standin.COUNT),
                               "0", str(standin.GID), str(standin.COUNT)]
    assert "secret" not in out and "DONE" in out, err
    st = theirs.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1, 1, 0o600)
    assert theirs.read_bytes() == b"secret\n"
    # What the box gave its uid 1 is the range's 1 on the host, then the folder's owner.
    assert (project / "mine").stat().st_uid == project.stat().st_uid
    owners = {p.stat().st_uid for p in project.iterdir() if p != theirs}
    assert owners <= {project.stat().st_uid} | set(range(standin.UID + 1,
                                                         standin.UID + standin.COUNT))


def test_an_account_in_the_range_refuses_the_stand_in(
        monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    monkeypatch.setattr(standin, "UID", nobody.pw_uid - 100)
    with pytest.raises(SandboxUnavailable) as err:
        Stage.open((str(project),), (), stand_in=True)
    said = str(err.value)
    assert f"runs as uids {nobody.pw_uid - 100} to {nobody.pw_uid - 100 + 65535}, and " \
           f"the account nobody has uid {nobody.pw_uid}" in said
    assert "give that account an id outside that range" in said


def test_a_subordinate_range_that_overlaps_refuses_the_stand_in(
        monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    ranges = standin._ranges("/etc/subuid")
    if not ranges:
        pytest.skip("no range in /etc/subuid on this machine")
    owner, first, count = ranges[0]
    # Overlapping its last id only; clear of the accounts.
    start = first + count - 1
    taken = {p.pw_uid for p in pwd.getpwall()}
    if taken & set(range(start, start + standin.COUNT)):
        pytest.skip("an account has an id just above the first subordinate range")
    monkeypatch.setattr(standin, "UID", start)
    with pytest.raises(SandboxUnavailable) as err:
        Stage.open((str(project),), (), stand_in=True)
    said = str(err.value)
    assert f"/etc/subuid gives {owner} the subordinate ids {first} to " \
           f"{first + count - 1}" in said
    assert "move that range in /etc/subuid out of the stand-in's" in said


@pytest.mark.parametrize("owner", [0, 1000, standin.UID, standin.UID + 5,
                                   standin.UID + standin.COUNT - 1,
                                   standin.UID + standin.COUNT])
def test_a_folders_map_gives_each_id_of_the_range_one_owner(owner: int) -> None:
    lines = [tuple(map(int, line.split())) for line in
             standin.owner_map(owner, standin.UID).splitlines()]
    inside = [i + k for i, _, n in lines for k in range(n)]
    outside = [o + k for _, o, n in lines for k in range(n)]
    assert len(set(inside)) == len(inside) and len(set(outside)) == len(outside)
    assert sorted(outside) == list(range(standin.UID, standin.UID + standin.COUNT))
    assert dict(zip(inside, outside, strict=True))[owner] == standin.UID


@EACH_BOX
def test_the_boxs_user_namespace_makes_no_other(project: Path, box: str) -> None:
    # bwrap makes no user namespace of its own in the stand-in's (it would map one id),
    # so its --disable-userns is not there: the stand-in's namespace limits itself to
    # none, beneath the filter that refuses them.
    _, out, err = _run(project, box, "cat /proc/sys/user/max_user_namespaces; "
                                     "unshare -U true; echo unshare=$?")
    assert out.split() == ["0", "unshare=1"], err


def test_the_end_says_which_files_went_to_ids_no_one_has_and_how_to_take_them_back(
        project: Path) -> None:
    """What root bare would give 1234 the host sees owned by an id no account has: the
    session's end counts those files, names one, and gives the command that makes them
    the folder's owner's again (run here as written)."""
    import subprocess

    _archive(project / "a.tar")
    (project / "mine").write_text("x")
    with Session.open(str(project)) as s:
        r = s.run(["sh", "-c", "tar -xpf a.tar && touch f && chown 7:7 f"])
        assert r.ok, r
    said = [w for w in s.warnings if "ids no account on this host has" in w]
    assert len(said) == 1, s.warnings
    assert said[0].startswith(f"3 files in {project} were given other owners in the box "
                              "(chown, tar -xp as root)"), said
    fix = said[0].rsplit("to give them to the folder's owner: ", 1)[1]
    subprocess.run(["sh", "-c", fix], check=True)
    st = project.stat()
    for path in (project / "tree", project / "tree" / "file", project / "f"):
        assert (path.lstat().st_uid, path.lstat().st_gid) == (st.st_uid, st.st_gid), path


def test_a_session_that_gave_nothing_away_says_nothing_of_owners(project: Path) -> None:
    with Session.open(str(project)) as s:
        assert s.run(["sh", "-c", "touch f && mkdir d"]).ok
    assert not [w for w in s.warnings if "ids no account" in w], s.warnings
