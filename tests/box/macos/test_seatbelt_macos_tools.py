"""Real tools in the macOS box, and the doors it keeps shut: git with a hook-driven tool,
python, a pseudo-terminal, node, OpenMP's shared memory, the process list, preferences,
Unix sockets with the network on, and a harness that is itself already sandboxed.

Real ``/usr/bin/sandbox-exec``, real processes, real sockets. macOS only (the workflow
``.github/workflows/macos.yml``); trees live under /private/tmp, which the box may not
write (see test_seatbelt_macos.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.macos_tree import SH, TIMEOUT, Tree, denied
from helpers.unix_server import UnixServer

from sandbox.plan import RunResult
from sandbox.policy import Policy

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(
        sys.platform != "darwin",
        reason=f"needs macOS sandbox-exec; this is {sys.platform}",
    ),
]

PY = sys.executable
CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
GIT = shutil.which("git") or "/usr/bin/git"


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    d = Path(os.path.realpath(tempfile.mkdtemp(dir="/private/tmp", prefix="hs-mac-")))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def run(policy: Policy, argv: list[str], env_extra: dict[str, str] | None = None) -> RunResult:
    from sandbox.macos import seatbelt
    from sandbox.process import supervisor

    result = supervisor.run(seatbelt.plan(policy, argv, env_extra=env_extra), timeout=TIMEOUT)
    assert result.outcome == "exited", result
    return result


# -- git, with a hook-driven tool ---------------------------------------------------------

PRE_COMMIT = """#!/bin/sh
# A tool run by git's hook, as pre-commit and husky run theirs: python, a temp file, the
# staged names.
"{py}" -c 'import os, subprocess, tempfile
staged = subprocess.run(["git", "diff", "--cached", "--name-only"],
                        capture_output=True, text=True, check=True).stdout.split()
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write(" ".join(staged))
open("hook-ran.txt", "w").write(" ".join(staged) + "\\n")'
"""


def git_project(root: Path) -> Path:
    project = root / "proj"
    project.mkdir(parents=True)
    subprocess.run([GIT, "init", "-q", str(project)], check=True)
    hook = project / ".git" / "hooks" / "pre-commit"
    hook.write_text(PRE_COMMIT.format(py=PY))
    hook.chmod(0o755)
    (root / "ptmp").mkdir()
    return project


def test_git_add_and_commit_run_the_projects_hook_in_the_box(tmp_path: Path) -> None:
    project = git_project(tmp_path)
    policy = Policy.create(str(project), private_tmp=str(tmp_path / "ptmp"),
                           hide_defaults=False, platform="darwin")
    result = run(policy, [SH, "-c", "echo hi > a.txt && git add a.txt && "
                          "git -c user.name=t -c user.email=t@example.com commit -qm first"])
    assert result.ok, result
    assert (project / "hook-ran.txt").read_text() == "a.txt\n"
    log = subprocess.run([GIT, "-C", str(project), "log", "--format=%s"],
                         capture_output=True, text=True, check=True)
    assert log.stdout == "first\n"


def test_git_init_add_commit_of_a_new_repository_in_the_box(tree: Tree) -> None:
    result = tree.sh("git init -q fresh && cd fresh && echo x > f && git add f && "
                     "git -c user.name=t -c user.email=t@example.com commit -qm one && "
                     "git log --format=%s")
    assert result.ok, result
    assert result.stdout == b"one\n"


# -- python, a pty, node ------------------------------------------------------------------


def test_python_runs_in_the_box(tree: Tree) -> None:
    result = tree.run([PY, "-c", "import json, sqlite3, ssl, sys; print(sys.version_info[0])"])
    assert result.ok, result
    assert result.stdout == b"3\n"


def test_asyncio_and_the_boxs_own_unix_socket_work(tree: Tree) -> None:
    code = (
        "import asyncio, os, tempfile\n"
        "async def main():\n"
        "    path = os.path.join(tempfile.mkdtemp(), 's.sock')\n"
        "    async def echo(r, w):\n"
        "        w.write(await r.readline()); await w.drain(); w.close()\n"
        "    server = await asyncio.start_unix_server(echo, path)\n"
        "    r, w = await asyncio.open_unix_connection(path)\n"
        "    w.write(b'ping\\n'); await w.drain()\n"
        "    print((await r.readline()).decode(), end='')\n"
        "    server.close()\n"
        "asyncio.run(main())\n")
    result = tree.run([PY, "-c", code])
    assert result.ok, result
    assert result.stdout == b"ping\n"


def test_a_pseudo_terminal_can_be_made_and_used(tree: Tree) -> None:
    code = ("import os, pty, termios\n"
            "m, s = pty.openpty()\n"
            "termios.tcgetattr(s)\n"
            "os.write(s, b'ping\\n')\n"
            "print(os.read(m, 100).strip().decode())\n")
    result = tree.run([PY, "-c", code])
    assert result.ok, result
    assert result.stdout == b"ping\n"


def test_script_runs_a_command_on_a_pty(tree: Tree) -> None:
    result = tree.run(["/usr/bin/script", "-q", "/dev/null", "/bin/echo", "on-a-pty"])
    assert result.ok, result
    assert b"on-a-pty" in result.stdout


def test_node_runs_and_lists_interfaces(tree: Tree) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed on this Mac")
    code = ("const os = require('os');"
            "console.log(Object.keys(os.networkInterfaces()).length > 0, os.cpus().length > 0)")
    result = tree.run([node, "-e", code])
    assert result.ok, result
    assert result.stdout == b"true true\n"


def test_network_interfaces_can_be_listed_without_the_network(tree: Tree) -> None:
    result = tree.run([PY, "-c", "import socket; print(len(socket.if_nameindex()) > 0)"])
    assert result.ok, result
    assert result.stdout == b"True\n"


# -- OpenMP, processes, preferences, power ------------------------------------------------


def test_openmp_can_register_its_runtime_and_nothing_else(tree: Tree) -> None:
    code = ("import _posixshmem, mmap, os, sys\n"
            "name = sys.argv[1] + str(os.getpid())\n"
            "fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)\n"
            "os.ftruncate(fd, 4096)\n"
            "m = mmap.mmap(fd, 4096); m[:2] = b'ok'; print(m[:2].decode()); m.close()\n"
            "_posixshmem.shm_unlink(name)\n")
    ok = tree.run([PY, "-c", code, "/__KMP_REGISTERED_LIB_"])
    assert ok.ok, ok
    assert ok.stdout == b"ok\n"
    other = tree.run([PY, "-c", code, "/hs_other_"])
    assert other.returncode != 0, other
    assert b"PermissionError" in other.stderr


def test_processes_can_be_listed_but_not_their_command_lines(tree: Tree) -> None:
    code = ("import os, psutil, sys\n"
            "pids = psutil.pids()\n"
            "print(os.getpid() in pids, int(sys.argv[1]) in pids)\n"
            "try:\n"
            "    print(psutil.Process(int(sys.argv[1])).cmdline()[:1])\n"
            "except psutil.Error:\n"
            "    print('denied')\n")
    # This test's own process: the same user, so only the box stands in the way.
    me = str(os.getpid())
    result = tree.run([PY, "-c", code, me])
    assert result.ok, result
    assert result.stdout == b"True True\ndenied\n"
    host = subprocess.run([PY, "-c", code, me], capture_output=True, timeout=TIMEOUT)
    assert host.stdout != result.stdout and b"denied" not in host.stdout, host


def test_preferences_are_read_not_written(tree: Tree) -> None:
    domain = f"dev.harness-sandbox.test{os.getpid()}"
    try:
        read = tree.run(["/usr/bin/defaults", "read", "-g", "AppleLocale"])
        assert b"Operation not permitted" not in read.stderr, read
        tree.run(["/usr/bin/defaults", "write", domain, "planted", "-string", "yes"])
        host = subprocess.run(["/usr/bin/defaults", "read", domain, "planted"],
                              capture_output=True, timeout=TIMEOUT)
        assert host.returncode != 0, host
    finally:
        subprocess.run(["/usr/bin/defaults", "delete", domain], capture_output=True,
                       timeout=TIMEOUT)


def test_xcruns_cache_in_the_user_temp_folder_cannot_be_planted(tree: Tree) -> None:
    cache = Path(tree.policy.tmpdir) / "xcrun_db"
    before = cache.read_bytes() if cache.exists() else None
    result = tree.sh(f"echo planted > {cache}.new && mv -f {cache}.new {cache}")
    assert result.returncode != 0, result
    assert (cache.read_bytes() if cache.exists() else None) == before
    Path(f"{cache}.new").unlink(missing_ok=True)


def test_a_power_assertion_can_be_taken(tree: Tree) -> None:
    result = tree.run(["/usr/bin/caffeinate", "-i", "/usr/bin/true"])
    assert result.ok, result


def test_a_hidden_folder_cannot_be_written(tree: Tree) -> None:
    result = tree.sh(f"echo planted > {tree.secret}/new")
    assert denied(result), result
    assert not (tree.secret / "new").exists()


# -- Unix sockets with the network on -----------------------------------------------------


CONNECT = ("import os, socket, sys\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "s.connect(sys.argv[1])\n"
           "print(s.recv(6).decode(), end='')\n")


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[UnixServer]:
    d = tmp_path / "run"
    d.mkdir()
    server = UnixServer(d / "daemon.sock")
    try:
        yield server
    finally:
        server.close()


def test_with_the_network_on_a_host_socket_stays_shut(tmp_path: Path,
                                                      host_socket: UnixServer) -> None:
    t = Tree(tmp_path / "t", network=True)
    result = t.run([PY, "-c", CONNECT, str(host_socket.path)])
    assert result.returncode != 0, result
    assert b"PermissionError" in result.stderr
    assert host_socket.seen == 0


def test_a_link_in_the_boxs_temp_folder_does_not_open_a_host_socket(
    tmp_path: Path, host_socket: UnixServer
) -> None:
    # The box's own sockets are allowed below its temp folder; a link there to the
    # host's socket is judged where it leads.
    t = Tree(tmp_path / "t", network=True)
    code = ("import os, socket, sys\n"
            "link = os.path.join(os.environ['TMPDIR'], 'door.sock')\n"
            "os.symlink(sys.argv[1], link)\n"
            "socket.socket(socket.AF_UNIX).connect(link)\n")
    result = t.run([PY, "-c", code, str(host_socket.path)])
    assert result.returncode != 0, result
    assert b"PermissionError" in result.stderr
    assert host_socket.seen == 0


def test_an_allowed_socket_is_reached_with_the_network_on_or_off(
    tmp_path: Path, host_socket: UnixServer
) -> None:
    for network in (True, False):
        t = Tree(tmp_path / f"t{network}", network=network,
                 allow_unix_sockets=[str(host_socket.path)])
        result = t.run([PY, "-c", CONNECT, str(host_socket.path)])
        assert result.ok, (network, result)
        assert result.stdout == b"hello\n"


def test_ssh_auth_sock_reaches_the_box_only_when_allowed(tmp_path: Path,
                                                          host_socket: UnixServer) -> None:
    show = [PY, "-c", "import os; print(os.environ.get('SSH_AUTH_SOCK'), end='')"]
    extra = {"SSH_AUTH_SOCK": str(host_socket.path)}
    shut = Tree(tmp_path / "a", network=True)
    assert shut.run(show, env_extra=extra).stdout == b"None"
    opened = Tree(tmp_path / "b", network=True, allow_unix_sockets=[str(host_socket.path)])
    assert opened.run(show, env_extra=extra).stdout == str(host_socket.path).encode()


def test_with_the_network_on_dns_and_tcp_still_work(tmp_path: Path) -> None:
    t = Tree(tmp_path / "t", network=True)
    result = t.run([PY, "-c", "import socket; print(bool(socket.getaddrinfo('localhost', 80)))"])
    assert result.ok, result
    assert result.stdout == b"True\n"


# -- the harness itself, through its CLI --------------------------------------------------


def cli_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "harness-home"
    home.mkdir(exist_ok=True)
    return dict(os.environ, HARNESS_HOME=str(home))


def test_the_cli_runs_a_command_in_the_box(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    r = subprocess.run([CLI, "run", "--project", str(project), "--", "/bin/echo", "boxed"],
                       input=b"", capture_output=True, env=cli_env(tmp_path), timeout=TIMEOUT)
    assert r.returncode == 0, r
    assert r.stdout == b"boxed\n"


def test_seatbelt_is_detected_from_inside_and_not_outside() -> None:
    code = "from sandbox.macos.darwin import inside_seatbelt; print(inside_seatbelt())"
    outside = subprocess.run([PY, "-c", code], capture_output=True, timeout=TIMEOUT)
    assert outside.stdout == b"False\n", outside
    inside = subprocess.run(["/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)",
                             PY, "-c", code], capture_output=True, timeout=TIMEOUT)
    assert inside.stdout == b"True\n", inside


def test_a_harness_already_in_a_sandbox_refuses_to_start(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    r = subprocess.run(["/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)",
                        CLI, "run", "--project", str(project), "--", "/usr/bin/true"],
                       input=b"", capture_output=True, env=cli_env(tmp_path), timeout=TIMEOUT)
    assert r.returncode == 125, r
    assert r.stderr == (
        b"harness-sandbox: the harness already runs inside a macOS sandbox (Seatbelt), where "
        b"sandbox-exec cannot apply the box's profile; start the harness outside any sandbox, "
        b"or set [sandbox] enabled = false to run every hook on the host with no box\n")


def test_doctor_inside_seatbelt_names_the_cause(tmp_path: Path) -> None:
    r = subprocess.run(["/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)",
                        CLI, "doctor", "--json"], input=b"", capture_output=True,
                       env=cli_env(tmp_path), timeout=TIMEOUT)
    assert r.returncode == 1, r
    assert b"already runs inside a macOS sandbox (Seatbelt)" in r.stdout, r
