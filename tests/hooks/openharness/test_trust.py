"""openHarness files are trusted by content: real files, the real CLI, the real box.

A marker hook proves what runs: it would create a file outside every writable folder.
Run as root and again as an unprivileged user.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.trust_world import World, changed_text, new_text, new_world

from launchers import openharness as oh
from launchers.openharness import trust

BOX = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                         reason="needs bubblewrap on Linux")
NOBODY = 65534


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with new_world(monkeypatch) as w:
        yield w


# -- untrusted runs nothing; trusted runs ------------------------------------------------


def test_an_untrusted_file_runs_nothing_and_audit_says_why(world: World) -> None:
    world.write(world.marker_config())
    done = world.hook()
    assert (done.code, done.err) == (2, f"harness-sandbox: {new_text(world.oh)}\n")
    assert not world.marker.exists()

    done = world.audit("--json")
    assert done.code == 1
    (entry,) = json.loads(done.out)["hooks"]
    assert (entry["name"], entry["source"], entry["runs"], entry["verdict"]) == (
        str(world.oh), "openharness", "nothing", "refused")
    assert entry["refusals"] == [{"path": str(world.oh), "reason": new_text(world.oh),
                                  "folder": None, "kind": "untrusted"}]
    assert json.loads(done.out)["ok"] is False
    assert done.err.splitlines()[1:] == [new_text(world.oh), "audit: 1 of 1 hook refused"]
    assert not world.marker.exists()


def test_trust_shows_the_hooks_then_they_run(world: World) -> None:
    world.write(world.marker_config()
                + "    - http: http://127.0.0.1:9/x\n      match: Bash\n"
                + "  userPromptSubmit:\n    - command: /bin/true\n      jsonIO: true\n"
                + "      sandbox: true\n")
    digest = trust.digest(world.oh.read_bytes())
    done = world.cli("trust", "--openharness", str(world.oh))
    assert done.code == 0, done.err
    assert done.out.splitlines() == [
        f"{world.oh} defines 3 hooks:",
        f"  preToolUse[0]: command (env mode) on the host: touch {world.marker}",
        '  preToolUse[1]: http POST from the host, match "Bash": http://127.0.0.1:9/x',
        "  userPromptSubmit[0]: command (jsonIO) in the box: /bin/true",
        f"trusted: {world.oh} (sha256 {digest}) in {world.store}",
    ]
    assert world.audit().err.splitlines()[-1] == "audit: 2 hooks may run"  # http: no file
    # The http hook cannot be reached: it denies, after the marker hook ran.
    assert world.hook().code == 1
    assert world.marker.exists()


def test_one_changed_byte_untrusts(world: World) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    data = bytearray(world.oh.read_bytes())
    data[-1:] = b" "  # the final newline, now a space: the same hooks, another content
    world.oh.write_bytes(bytes(data))
    done = world.hook()
    assert (done.code, done.err) == (2, f"harness-sandbox: {changed_text(world.oh)}\n")
    assert world.audit().code == 1
    assert not world.marker.exists()
    with pytest.raises(trust.Untrusted) as info:
        oh.load(str(world.oh))
    assert info.value.state == "changed"


def test_a_file_trusted_at_one_path_is_untrusted_at_another(world: World) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    other = world.base / "other" / ".oh" / "config.yaml"
    other.parent.mkdir(parents=True)
    shutil.copyfile(world.oh, other)
    done = world.cli("hook", "--openharness", str(other), "preToolUse", "--tool", "Bash",
                     "--project", str(other.parent.parent))
    assert (done.code, done.err) == (2, f"harness-sandbox: {new_text(other)}\n")
    # Nor does a link there to the trusted file, or to its folder, make it trusted.
    other.unlink()
    other.symlink_to(world.oh)
    done = world.cli("hook", "--openharness", str(other), "preToolUse", "--tool", "Bash")
    assert (done.code, done.err) == (2, (
        f"harness-sandbox: {other}: is itself a symbolic link ({other}), which the agent "
        "could re-point, so it is refused. Name the file it leads to instead.\n"))
    shutil.rmtree(other.parent)
    other.parent.symlink_to(world.oh.parent)
    done = world.cli("audit", "--openharness", str(other))
    assert (done.code, done.err.splitlines()) == (2, [
        f"{other}: is in a folder that is a symbolic link ({other.parent}), which the "
        "agent could re-point, so it is refused. Name the file it leads to instead."])
    assert not world.marker.exists()


def test_revoke_and_list(world: World) -> None:
    world.write("hooks: {}\n")
    none = f"harness-sandbox: no file is trusted ({world.store})\n"
    assert world.cli("trust", "--list").err == none
    done = world.cli("trust", "--openharness", str(world.oh))
    assert done.out.splitlines()[0] == f"{world.oh} defines no hooks."
    sha = trust.digest(world.oh.read_bytes())
    assert world.cli("trust", "--list").out == f"{sha}  {world.oh}\n"
    assert world.cli("trust", "--revoke", str(world.oh)).out == f"revoked: {world.oh}\n"
    done = world.cli("trust", "--revoke", str(world.oh))
    assert (done.code, done.err) == (1, f"harness-sandbox: {world.oh} was not trusted\n")
    assert world.cli("trust", "--list").out == ""


def test_the_review_escapes_what_the_agent_wrote(world: World) -> None:
    world.write('hooks:\n  preToolUse:\n    - command: "true \\e[2K\\rhidden \\u202e"\n')
    done = world.cli("trust", "--openharness", str(world.oh))
    assert done.out.splitlines()[1] == (
        "  preToolUse[0]: command (env mode) on the host: true \\x1b[2K\\rhidden \\u202e")


def test_a_fifo_in_place_of_the_file_is_refused_without_waiting(world: World) -> None:
    world.oh.parent.mkdir()
    os.mkfifo(world.oh)
    done = world.hook()
    assert (done.code, done.err) == (2, f"harness-sandbox: {world.oh}: is not a regular file\n")


# -- the store ----------------------------------------------------------------------------


def test_the_store_is_private_and_replaced_whole(world: World) -> None:
    world.write("hooks: {}\n")
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    inode = world.store.stat().st_ino
    assert oct(world.store.stat().st_mode & 0o777) == "0o600"
    assert oct(world.store.parent.stat().st_mode & 0o777) == "0o700"
    second = world.write("hooks: {}\n", world.project / ".oh" / "other.yaml")
    assert world.cli("trust", "--openharness", str(second)).code == 0
    assert world.store.stat().st_ino != inode  # a new file renamed over the old
    assert sorted(os.listdir(world.store.parent)) == ["trusted.json"]
    assert set(json.loads(world.store.read_text())["files"]) == {str(world.oh), str(second)}


def corrupt_text(store: Path) -> str:
    return (f"{store}: the trust store is corrupt (not valid JSON), so nothing is trusted. "
            "Remove it and trust your files again.")


@pytest.mark.parametrize("content", [b"", b"{", b"[" * 100000, b"\xff"])
def test_a_corrupt_store_is_refused_never_read_as_empty(world: World, content: bytes) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    world.store.write_bytes(content)
    done = world.hook()
    assert (done.code, done.err) == (2, f"harness-sandbox: {corrupt_text(world.store)}\n")
    done = world.audit("--json")
    assert (done.code, json.loads(done.out)["error"]) == (2, corrupt_text(world.store))
    done = world.cli("trust", "--openharness", str(world.oh))  # not overwritten either
    assert (done.code, world.store.read_bytes()) == (2, content)
    assert not world.marker.exists()


def test_a_store_of_the_wrong_shape_is_refused(world: World) -> None:
    world.write(world.marker_config())
    for doc, why in [({"version": 2, "files": {}}, "not a version 1 trust store"),
                     ({"version": 1}, 'no "files" mapping'),
                     ({"version": 1, "files": {"rel": {"sha256": "0" * 64}}},
                      "a bad entry for rel")]:
        world.store.parent.mkdir(mode=0o700, exist_ok=True)
        world.store.write_text(json.dumps(doc))
        world.store.chmod(0o600)
        with pytest.raises(trust.TrustStoreError) as info:
            oh.load(str(world.oh))
        assert str(info.value) == (f"{world.store}: the trust store is corrupt ({why}), so "
                                   "nothing is trusted. Remove it and trust your files again.")


def test_a_store_others_can_write_is_refused(world: World) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    world.store.chmod(0o666)
    done = world.hook()
    assert done.err == (f"harness-sandbox: {world.store}: the trust store can be written by "
                        "other users (mode 0666), so it is refused and nothing is trusted. "
                        f"Fix it: chmod 600 {world.store}\n")
    world.store.chmod(0o600)
    world.store.parent.chmod(0o777)
    done = world.hook()
    assert done.err == (f"harness-sandbox: {world.store}: its folder can be written by "
                        "other users (mode 0777), so it is refused and nothing is trusted. "
                        f"Fix it: chmod 700 {world.store.parent}\n")
    assert not world.marker.exists()


def test_a_store_or_folder_of_another_user_is_refused(world: World) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    me = os.geteuid()
    if me == 0:
        os.chown(world.store, NOBODY, NOBODY)
        done = world.hook()
        assert done.err == (f"harness-sandbox: {world.store}: the trust store is owned by "
                            f"uid {NOBODY}, not by you (uid 0), so it is refused and nothing "
                            "is trusted.\n")
        os.chown(world.store, 0, 0)
        os.chown(world.store.parent, NOBODY, NOBODY)
        owner = NOBODY
    else:
        # Not root: the store's folder is a link to a folder root owns.
        shutil.rmtree(world.store.parent)
        world.store.parent.symlink_to("/usr")
        owner = 0
    done = world.hook()
    assert done.err == (f"harness-sandbox: {world.store}: its folder is owned by uid {owner}, "
                        f"not by you (uid {me}), so it is refused and nothing is trusted.\n")
    assert done.code == 2 and not world.marker.exists()


def test_a_store_that_is_a_link_is_refused(world: World) -> None:
    world.write(world.marker_config())
    assert world.cli("trust", "--openharness", str(world.oh)).code == 0
    real = world.base / "elsewhere.json"
    world.store.rename(real)
    world.store.symlink_to(real)
    assert world.hook().err == (f"harness-sandbox: {world.store}: the trust store is a "
                                "symbolic link, so it is refused and nothing is trusted.\n")


@BOX
def test_a_store_inside_a_folder_the_box_writes_is_refused(world: World) -> None:
    world.write(world.marker_config())
    data = world.project / ".data"
    store = data / "harness" / "trusted.json"
    message = (f"{store}: the trust store is in the project, so the agent could change it "
               "and nothing is trusted. Set XDG_DATA_HOME to a folder outside it.")
    done = world.cli("trust", "--openharness", str(world.oh), XDG_DATA_HOME=str(data))
    assert (done.code, done.err) == (2, f"harness-sandbox: {message}\n")
    assert not store.exists()
    trust.record(trust.read_file(str(world.oh)), path=str(store))  # as the agent would
    done = world.hook(XDG_DATA_HOME=str(data))
    assert (done.code, done.err) == (2, f"harness-sandbox: {message}\n")
    done = world.audit(XDG_DATA_HOME=str(data))
    assert (done.code, done.err.splitlines()) == (2, [message])
    assert not world.marker.exists()


def test_the_library_loader_refuses_a_store_its_session_could_write(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.policy import Policy

    world.write(world.marker_config())
    data = world.project / ".data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    trust.record(trust.read_file(str(world.oh)))  # as the agent would, in the project
    assert oh.load(str(world.oh)).for_event("preToolUse")  # no policy: not checked
    private = world.base / "private-tmp"
    private.mkdir()
    policy = Policy.create(str(world.project), private_tmp=str(private))
    with pytest.raises(trust.TrustStoreError) as info:
        oh.load(str(world.oh), policy=policy)
    assert str(info.value).startswith(f"{data}/harness/trusted.json: the trust store is in "
                                      "the project, so the agent could change it")


def test_the_policy_protects_oh_only_when_it_is_a_real_folder(world: World) -> None:
    from sandbox.policy import Policy

    private = world.base / "private-tmp"
    private.mkdir()

    def protected(protect: bool = True) -> tuple[str, ...]:
        return Policy.create(str(world.project), private_tmp=str(private),
                             protect=protect).protected_paths()

    oh_dir = str(world.project / ".oh")
    assert oh_dir not in protected()  # none yet: trust refuses what the box makes
    (world.project / ".oh").mkdir()
    assert oh_dir in protected()
    assert oh_dir not in protected(protect=False)
    (world.project / ".oh").rmdir()
    (world.project / ".oh").symlink_to(world.marks)
    assert oh_dir not in protected()  # never a bind of what a link points at


def test_both_backends_make_oh_read_only(world: World) -> None:
    from sandbox.linux import bwrap
    from sandbox.macos import seatbelt
    from sandbox.policy import Policy

    (world.project / ".oh").mkdir()
    private = world.base / "private-tmp"
    private.mkdir()
    policy = Policy.create(str(world.project), private_tmp=str(private))
    oh_dir = str(world.project / ".oh")
    args = bwrap.box_args(policy, bwrap="/usr/bin/bwrap")
    binds = [args[i:i + 3] for i, a in enumerate(args) if a == "--ro-bind"]
    assert ("--ro-bind", oh_dir, oh_dir) in binds
    # After the project's read-write bind, so it covers it.
    assert args.index(oh_dir) > args.index(str(world.project))
    protected = [v for n, v in seatbelt.profile(policy).params if n.startswith("PROTECTED")]
    # As a literal, or as a case-folded rule where the disk may ignore case.
    import re

    assert any(p == seatbelt.canonical(oh_dir) or re.fullmatch(p, seatbelt.canonical(oh_dir))
               for p in protected)
