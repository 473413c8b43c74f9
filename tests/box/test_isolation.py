"""The real box: every way out is tried from inside and must fail; the work must work.

Run as root and again as an unprivileged user (user namespaces differ between them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.procs import box_driver, left_after, running_with

from launchers.config import SandboxSettings
from sandbox.plan import RunResult
from sandbox.policy.env import PROVIDER_KEYS
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]

PY = sys.executable


@dataclass
class Box:
    session: Session
    base: Path  # outside /tmp: the box sees it read-only
    project: Path
    hidden_dir: Path
    hidden_file: Path

    def run(self, *argv: str, stdin: bytes = b"", timeout: float | None = 30) -> RunResult:
        return self.session.run(list(argv), stdin=stdin, timeout=timeout)

    def sh(self, script: str, **kw: object) -> RunResult:
        return self.run("sh", "-c", script, **kw)  # type: ignore[arg-type]

    def py(self, code: str, **kw: object) -> RunResult:
        return self.run(PY, "-c", code, **kw)  # type: ignore[arg-type]


def explain(r: RunResult) -> str:
    return f"{r.outcome} rc={r.returncode} out={r.stdout[-500:]!r} err={r.stderr[-500:]!r}"


@pytest.fixture
def box() -> Iterator[Box]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        (base / "secrets").mkdir()
        (base / "secrets" / "id_rsa").write_text("PRIVATE KEY\n")
        (base / "token").write_text("TOKEN\n")
        env = dict(os.environ)
        env.update({k: f"secret-{k}" for k in PROVIDER_KEYS})
        env["SOME_SERVICE_API_KEY"] = "secret"
        settings = SandboxSettings(hidden=(str(base / "secrets"), str(base / "token")),
                                   hide_defaults=False)
        with Session.open(str(project), settings, env=env) as session:
            yield Box(session, base, project, base / "secrets", base / "token")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- writes outside -------------------------------------------------------------------


def test_writing_etc_fails(box: Box) -> None:
    name = f"/etc/hs-box-{uuid.uuid4().hex}"
    r = box.sh(f"echo x > {name}")
    assert r.returncode != 0, explain(r)
    assert b"Read-only file system" in r.stderr
    assert not os.path.exists(name)


def test_writing_home_fails(box: Box) -> None:
    target = Path.home() / f".hs-box-{uuid.uuid4().hex}"
    try:
        r = box.sh(f"echo x > {target}")
        assert r.returncode != 0, explain(r)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_writing_a_sibling_of_the_project_fails(box: Box) -> None:
    r = box.sh(f"echo x > {box.base}/sibling")
    assert r.returncode != 0, explain(r)
    assert not (box.base / "sibling").exists()


def test_the_hosts_tmp_is_neither_seen_nor_written(box: Box) -> None:
    host_dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="hs-host-"))
    try:
        (host_dir / "file").write_text("original\n")
        r = box.sh(f"cat {host_dir}/file; echo changed > {host_dir}/file")
        assert r.returncode != 0, explain(r)
        assert (host_dir / "file").read_text() == "original\n"
        assert b"original" not in r.stdout
    finally:
        shutil.rmtree(host_dir)


def test_tmp_in_the_box_is_the_private_temp_folder(box: Box) -> None:
    name = f"hs-box-{uuid.uuid4().hex}"
    r = box.sh(f"echo inside > /tmp/{name} && echo $TMPDIR")
    assert r.ok, explain(r)
    assert r.stdout == b"/tmp\n"
    assert not os.path.exists(f"/tmp/{name}")
    assert (Path(box.session.policy.private_tmp) / name).read_text() == "inside\n"


# -- git: commits work, hooks and config cannot be planted ------------------------------


def test_git_commit_in_the_project_works(box: Box) -> None:
    r = box.sh("echo hello > a.txt && git add a.txt && "
               "git -c user.name=Box -c user.email=box@example.com commit -q -m first && "
               "git log --format=%s")
    assert r.ok, explain(r)
    assert r.stdout == b"first\n"
    log = subprocess.run(["git", "-C", str(box.project), "log", "--format=%s"],
                         capture_output=True, text=True, check=True)
    assert log.stdout == "first\n"


def test_planting_a_git_hook_fails(box: Box) -> None:
    hook = box.project / ".git" / "hooks" / "pre-commit"
    r = box.sh("printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit")
    assert r.returncode != 0, explain(r)
    assert b"Read-only file system" in r.stderr
    assert not hook.exists()


def test_a_git_config_key_that_names_a_program_never_reaches_the_real_config(box: Box
                                                                            ) -> None:
    """git in the box writes its own copy of the config (sandbox/git/configcopy.py);
    after the run only the allowed keys reach the project's, and the copy is reset."""
    config = box.project / ".git" / "config"
    before = config.read_bytes()
    box.sh("git config core.hooksPath /tmp/evil || echo '[core]' >> .git/config")
    assert config.read_bytes() == before
    r = box.sh("git config core.hooksPath; echo next")
    assert r.stdout == b"next\n", explain(r)


def test_replacing_the_git_folder_fails(box: Box) -> None:
    r = box.sh("mv .git .git-old")
    assert r.returncode != 0, explain(r)
    assert b"Device or resource busy" in r.stderr
    assert (box.project / ".git" / "hooks").is_dir()
    assert not (box.project / ".git-old").exists()


# -- hidden paths -----------------------------------------------------------------------


def test_a_hidden_file_cannot_be_read(box: Box) -> None:
    r = box.sh(f"cat {box.hidden_file}")
    assert r.returncode != 0, explain(r)
    assert b"TOKEN" not in r.stdout
    assert b"Permission denied" in r.stderr


def test_a_hidden_folder_is_empty_and_read_only(box: Box) -> None:
    r = box.sh(f"ls -A {box.hidden_dir}; cat {box.hidden_dir}/id_rsa; "
               f"echo x > {box.hidden_dir}/new")
    assert r.stdout == b"", explain(r)
    assert b"Read-only file system" in r.stderr
    assert (box.hidden_dir / "id_rsa").read_text() == "PRIVATE KEY\n"
    assert not (box.hidden_dir / "new").exists()


def test_a_hidden_path_inside_the_project_is_hidden_too(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        (base / "p" / "vault").mkdir(parents=True)
        (base / "p" / "vault" / "key").write_text("K\n")
        settings = SandboxSettings(hidden=(str(base / "p" / "vault"),), hide_defaults=False)
        with Session.open(str(base / "p"), settings) as s:
            r = s.run(["sh", "-c", "ls -A vault; cat vault/key"])
        assert r.stdout == b"", explain(r)
        assert r.returncode != 0
    finally:
        shutil.rmtree(base)


# -- network --------------------------------------------------------------------------


def test_a_tcp_server_on_the_hosts_loopback_cannot_be_reached(box: Box) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(conn)
        except OSError:
            pass

    t = threading.Thread(target=serve)
    t.start()
    try:
        # The server is reachable from the host: the test itself proves it can connect.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        t.join()
        assert len(accepted) == 1
        t = threading.Thread(target=serve)
        t.start()
        r = box.py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)")
        assert r.returncode != 0, explain(r)
        assert b"ConnectionRefusedError" in r.stderr
        t.join()
        assert len(accepted) == 1
    finally:
        server.close()


def test_names_do_not_resolve(box: Box) -> None:
    r = box.py("import socket; socket.getaddrinfo('example.com', 443)")
    assert r.returncode != 0, explain(r)
    assert b"socket.gaierror" in r.stderr


def test_the_only_network_link_is_loopback(box: Box) -> None:
    r = box.py("print(' '.join(l.split(':')[0].strip() "
               "for l in open('/proc/net/dev').read().splitlines()[2:]))")
    assert r.ok, explain(r)
    assert r.stdout == b"lo\n"


def test_host_sockets_under_run_are_not_there(box: Box) -> None:
    r = box.sh("ls -A /run")
    assert r.ok, explain(r)
    assert r.stdout == b""


def test_a_unix_socket_under_run_cannot_be_reached(box: Box) -> None:
    # /run itself is root's; /run/lock is open to every user (mode 1777).
    d = Path(tempfile.mkdtemp(dir="/run" if os.geteuid() == 0 else "/run/lock",
                              prefix="hs-iso-"))
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(d / "sock"))
        server.listen(1)
        r = box.py(f"import socket; socket.socket(socket.AF_UNIX).connect('{d}/sock')")
        assert r.returncode != 0, explain(r)
        assert b"FileNotFoundError" in r.stderr
        server.close()
    finally:
        shutil.rmtree(d)


# -- environment and processes --------------------------------------------------------


def test_no_provider_key_reaches_the_box(box: Box) -> None:
    r = box.run("env")
    assert r.ok, explain(r)
    names = {line.split("=", 1)[0] for line in r.stdout.decode().splitlines()}
    assert not names & set(PROVIDER_KEYS)
    assert "SOME_SERVICE_API_KEY" not in names
    assert b"secret" not in r.stdout


def test_host_processes_are_not_visible(box: Box) -> None:
    r = box.py("import os\n"
               "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
               "print(repr([open(f'/proc/{p}/cmdline', 'rb').read() for p in pids]))\n")
    assert r.ok, explain(r)
    assert b"pytest" not in r.stdout
    cmdlines = eval(r.stdout)  # a list of bytes, printed by repr
    # bwrap's init (pid 1) and this python: nothing of the host.
    assert len(cmdlines) == 2, explain(r)
    assert os.getpid() != 1


def test_no_process_survives_a_timeout(box: Box) -> None:
    import psutil

    marker = f"hs-leftover-{uuid.uuid4().hex}"
    script = (f"setsid sh -c '(exec -a {marker} sleep 300 &) ; exit' ; "
              f"(exec -a {marker}-2 sleep 300 &) ; sleep 300")
    r = box.sh(script, timeout=1.0)
    assert r.outcome == "timed_out", explain(r)
    time.sleep(1.0)
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(marker in a for a in (p.info["cmdline"] or []))]
    assert left == []


def test_keystrokes_cannot_be_injected_with_tiocsti(box: Box) -> None:
    code = (
        "import fcntl, termios, os\n"
        "results = []\n"
        "try:\n"
        "    fd = os.open('/dev/tty', os.O_RDWR)\n"
        "except OSError as e:\n"
        "    results.append('tty:' + e.strerror); fd = 0\n"
        "try:\n"
        "    fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n"
        "    results.append('injected')\n"
        "except OSError as e:\n"
        "    results.append('ioctl:' + e.strerror)\n"
        "print(' '.join(results))\n"
    )
    r = box.py(code)
    assert r.ok, explain(r)
    assert b"injected" not in r.stdout
    assert r.stdout.startswith(b"tty:No such device or address ioctl:"), explain(r)


def test_the_box_holds_no_capability_and_no_new_privileges(box: Box) -> None:
    r = box.sh("grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status;"
               " id -u")
    assert r.ok, explain(r)
    lines = r.stdout.decode().split("\n")
    caps = dict(line.split(":\t") for line in lines if ":\t" in line)
    # Root's stand-in keeps CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_FOWNER in its own user
    # namespace, over the files of its own ids (sandbox/linux/standin.py).
    held = "000000000000000b" if os.geteuid() == 0 else "0000000000000000"
    assert caps == {"CapInh": held, "CapPrm": held, "CapEff": held, "CapBnd": held,
                    "CapAmb": held, "NoNewPrivs": "1"}
    # The box's user is the caller's own, inside a user namespace of its own.
    assert lines[-2] == str(os.getuid())


def test_a_setuid_program_gives_no_privilege(box: Box) -> None:
    su = shutil.which("su") or "/bin/su"
    r = box.sh(f"{su} -s /bin/sh -c 'id -u' root </dev/null; "
               "mount -t tmpfs none /mnt && echo mounted")
    assert b"mounted" not in r.stdout, explain(r)
    if os.getuid() != 0:
        assert b"0\n" not in r.stdout, explain(r)


def test_mounting_fails(box: Box) -> None:
    r = box.py("import ctypes, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "rc = libc.mount(b'none', b'/mnt', b'tmpfs', 0, None)\n"
               "print(rc, os.strerror(ctypes.get_errno()))\n")
    assert r.ok, explain(r)
    assert r.stdout == b"-1 Operation not permitted\n"


def test_a_new_user_namespace_cannot_be_made_inside(box: Box) -> None:
    r = box.py("import ctypes, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "CLONE_NEWUSER = 0x10000000\n"
               "print(libc.unshare(CLONE_NEWUSER), os.strerror(ctypes.get_errno()))\n")
    assert r.ok, explain(r)
    # The system-call filter answers first (EPERM); beneath it --disable-userns would
    # answer ENOSPC.
    assert r.stdout == b"-1 Operation not permitted\n"


def test_ptrace_of_a_host_process_fails(box: Box) -> None:
    # The host's processes are not in the box's PID namespace: there is nothing to attach
    # to. (Pid 1 in the box is bwrap's own init, with the box's privileges and no more.)
    r = box.py("import ctypes, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "PTRACE_ATTACH = 16\n"
               f"rc = libc.ptrace(PTRACE_ATTACH, {os.getpid()}, None, None)\n"
               "print(rc, os.strerror(ctypes.get_errno()))\n")
    assert r.ok, explain(r)
    assert r.stdout == b"-1 No such process\n"


# -- what must work -------------------------------------------------------------------


def test_system_files_are_readable(box: Box) -> None:
    r = box.sh("ls /usr/bin | grep -c . && head -c 4 /usr/bin/env | od -c | head -1")
    assert r.ok, explain(r)
    assert b"E   L   F" in r.stdout


def test_a_mebibyte_of_stdin_round_trips(box: Box) -> None:
    data = os.urandom(1 << 20)
    r = box.run("cat", stdin=data)
    assert r.ok, explain(r)
    assert r.stdout == data


def test_exit_status_is_reported_exactly(box: Box) -> None:
    r = box.sh("exit 3")
    assert (r.outcome, r.returncode) == ("exited", 3)


def test_a_signal_in_the_box_is_reported_as_exit_128_plus_n(box: Box) -> None:
    # bwrap waits for the command inside the box and exits 128+N when it was killed by
    # signal N; the box cannot tell that apart from `exit 143`.
    r = box.sh("kill -TERM $$")
    assert (r.outcome, r.returncode, r.signal) == ("exited", 143, None)


def test_a_command_that_is_not_there_did_not_start(box: Box) -> None:
    r = box.run("no-such-program-anywhere")
    assert (r.outcome, r.error) == ("failed_to_start", "No such file or directory")


def test_the_working_directory_is_the_project(box: Box) -> None:
    r = box.run("pwd")
    assert r.stdout.decode().strip() == str(box.project)


def test_the_private_temp_folder_goes_with_the_session(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    with Session.open(str(project)) as s:
        tmp = s.policy.private_tmp
        r = s.run(["sh", "-c", "echo x > /tmp/left"])
        assert r.ok, explain(r)
        assert os.path.exists(os.path.join(tmp, "left"))
        assert os.stat(os.path.dirname(tmp)).st_mode & 0o777 == 0o700
    assert not os.path.exists(tmp)


def _data_env(base: Path) -> dict[str, str]:
    """The environment with the user's data folder (where what the box made of a
    missing protected name goes) inside the test's own folder."""
    return {**os.environ, "XDG_DATA_HOME": str(base / "data")}


def test_a_missing_git_hooks_folder_the_box_fills_is_moved_out_after_the_run() -> None:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        shutil.rmtree(project / ".git" / "hooks")
        with Session.open(str(project), SandboxSettings(hide_defaults=False),
                          env=_data_env(base)) as session:
            r = session.run(["sh", "-c", "mkdir -p .git/hooks; "
                             "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit"])
            # Moved out as it was made (sandbox/linux/sentry.py), or after the run.
            assert r.returncode is not None, explain(r)
            # Gone once the run is over, while the session lasts: no folder is made
            # for it at the open, so the project lists as it does bare.
            assert not (project / ".git" / "hooks").exists()
        moved = list((base / "data" / "harness" / "moved").glob("*/.git/hooks"))
        assert moved, session.warnings
        assert any(w.startswith(f"the box made {project}/.git/hooks,")
                   for w in session.warnings), session.warnings
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                           *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def repo() -> Iterator[Path]:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        assert _git("commit", "-q", "--allow-empty", "-m", "first", cwd=project).returncode == 0
        yield project
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_new_commondir_is_moved_out_before_git_reads_it(repo: Path) -> None:
    commondir = repo / ".git" / "commondir"
    assert not commondir.exists()
    with Session.open(str(repo), SandboxSettings(hide_defaults=False),
                      env=_data_env(repo.parent)) as session:
        # Nothing is made at the open: the box's git answers as git bare does.
        r = session.run(["git", "rev-parse", "--git-common-dir"])
        assert r.stdout == b".git\n", explain(r)
        r = session.run(["sh", "-c", "echo /tmp/evil > .git/commondir"])
        assert r.ok, explain(r)
        assert not commondir.exists()  # moved out once the run was over
        # git works as before, in the box and on the host, while the session lasts.
        r = session.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                         "commit", "-q", "--allow-empty", "-m", "boxed"])
        assert r.ok, explain(r)
        host = _git("log", "--format=%s", cwd=repo)
        assert host.stdout == "boxed\nfirst\n", host.stderr
    assert not commondir.exists()


def test_a_linked_worktree_cannot_repoint_its_git_file_or_commondir(repo: Path) -> None:
    worktree = repo.parent / "wt"
    assert _git("worktree", "add", "-q", str(worktree), cwd=repo).returncode == 0
    dotgit = worktree / ".git"
    own = Path(dotgit.read_text().split(":", 1)[1].strip())
    before = (dotgit.read_bytes(), (own / "commondir").read_bytes())
    with Session.open(str(worktree), SandboxSettings(hide_defaults=False),
                      env=_data_env(repo.parent)) as session:
        r = session.run(["sh", "-c", f"echo 'gitdir: /tmp/evil' > .git; "
                                     f"echo /tmp/evil > {own}/commondir; "
                                     f"echo /tmp/evil > {repo}/.git/commondir; "
                                     f"echo x > {repo}/.git/hooks/pre-commit"])
        assert r.returncode != 0, explain(r)
        # The common folder's commondir did not exist: made, and moved out after.
        assert r.stderr.count(b"Read-only file system") == 3, explain(r)
        assert not (repo / ".git" / "commondir").exists()
        r = session.run(["git", "status", "--short"])
        assert r.ok, explain(r)
    assert (dotgit.read_bytes(), (own / "commondir").read_bytes()) == before
    assert not (repo / ".git" / "commondir").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()


def test_a_submodule_git_folder_keeps_its_hooks_read_only(repo: Path) -> None:
    module = repo / ".git" / "modules" / "lib" / "inner"
    (module / "hooks").mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text("[core]\n")
    with Session.open(str(repo), SandboxSettings(hide_defaults=False)) as session:
        inner = ".git/modules/lib/inner"
        r = session.run(["sh", "-c", f"echo x > {inner}/hooks/post-checkout; "
                                     f"echo '[core] hooksPath=/tmp' >> {inner}/config"])
    assert r.returncode != 0, explain(r)
    assert r.stderr.count(b"Read-only file system") == 2, explain(r)
    assert not (module / "hooks" / "post-checkout").exists()
    assert (module / "config").read_text() == "[core]\n"


def test_the_box_and_its_daemons_end_when_the_harness_is_killed(box: Box) -> None:
    token = f"hs-box-daemon-{uuid.uuid4().hex}"
    sleeper = f"{PY} -c 'import time; time.sleep(1000)' {token}"
    script = f"setsid sh -c \"{sleeper} &\"; {sleeper} & {sleeper}"
    driver = box_driver(box.project, "sh", "-c", script)
    try:
        deadline = time.monotonic() + 20
        while len(running_with(token)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(running_with(token)) == 3, "the boxed processes did not start"
        driver.kill()
        driver.wait()
        assert left_after(token) == []
    finally:
        driver.kill()
        driver.wait()


def test_names_listed_in_scrub_reach_neither_the_box_nor_a_host_hook() -> None:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        project.mkdir()
        env = {**os.environ, "GITHUB_TOKEN": "gh-secret", "DEPLOY_SECRET": "d-secret",
               "KEEP_ME": "kept"}
        settings = SandboxSettings(hide_defaults=False, scrub=("GITHUB_TOKEN", "*_SECRET"))
        with Session.open(str(project), settings, env=env) as session:
            boxed = session.run(["env"])
            host = session.run(["/usr/bin/env"], boxed=False)
        for r in (boxed, host):
            assert r.ok, explain(r)
            assert b"secret" not in r.stdout
            assert b"KEEP_ME=kept" in r.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_git_folder_made_in_the_box_is_reported_at_the_end() -> None:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        project.mkdir()
        with Session.open(str(project), SandboxSettings(hide_defaults=False)) as session:
            r = session.run(["sh", "-c", "git init -q . && printf '#!/bin/sh\\n' > "
                                         ".git/hooks/pre-commit"])
            assert r.ok, explain(r)
            assert session.warnings == []
        assert session.warnings == [
            f"the git folder {project}/.git was created during the session, with hooks "
            f"pre-commit, and git run on the host in {project} would use it; check it "
            "before you do"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_run_names_a_git_folder_its_command_made(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp", prefix="hs-iso-")))
    try:
        project = base / "project"
        project.mkdir()
        cli = Path(sys.executable).parent / "harness-sandbox"
        done = subprocess.run([str(cli), "run", "--config", str(tmp_path / "none.toml"),
                               "--project", str(project), "--", "git", "init", "-q", "."],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stderr == (f"harness-sandbox: the git folder {project}/.git was created "
                               f"during the session and git run on the host in {project} "
                               "would use it; check it before you do\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)
