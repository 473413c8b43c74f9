"""The box without namespaces (``[sandbox] box = "landlock"``, sandbox/linux/landlockbox.py),
on this machine as root and as a plain user: each promise tried from inside the box,
the host's side run for real. The same box inside Docker's default profile is in
test_containers.py."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import boxed_work
from helpers.paths import REPO
from helpers.procs import Done, left_after
from helpers.unprivileged import searchable_tmp

from sandbox.errors import SandboxUnavailable
from sandbox.linux import keeper, landlock
from sandbox.linux.kind import LANDLOCK, LANDLOCK_GIVES_UP, BoxKind
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation,
              pytest.mark.skipif(landlock.abi() < landlock.NEEDED_ABI,
                                 reason="this kernel's Landlock lacks the scopes (ABI 6)")]

KEY = boxed_work.KEY


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A folder outside /tmp (which the box hides whole) with a project in it, and the
    session's data folder apart."""
    base = searchable_tmp()
    (base / "proj").mkdir()
    try:
        yield base
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


class _Open:
    """A session in the Landlock box, as ``Session.open`` gives one without ``with``:
    :meth:`close` ends it (its warnings are then whole)."""

    def __init__(self, project: Path, **table: object) -> None:
        env = {**os.environ, "XDG_DATA_HOME": str(project.parent / "data")}
        self.opening = Session.open(str(project), SandboxSettings(box="landlock", **table),  # type: ignore[arg-type]
                                    env=env)
        self.session = self.opening.start()

    def __getattr__(self, name: str) -> object:
        return getattr(self.session, name)

    def close(self) -> None:
        self.opening.end()


def _open(project: Path, **table: object) -> Session:
    return _Open(project, **table)  # type: ignore[return-value]


def _sh(session: Session, script: str, stdin: bytes = b"", **kw: object) -> Done:
    r = session.run(["sh", "-c", script], stdin=stdin, timeout=60, **kw)  # type: ignore[arg-type]
    return Done(r.exit, r.stdout.decode(), r.stderr.decode())


def test_the_session_says_the_box_and_what_it_gives_up(place: Path) -> None:
    s = _open(place / "proj")
    try:
        assert s.box_kind == BoxKind(LANDLOCK, LANDLOCK_GIVES_UP)
        assert s.warm is None
    finally:
        s.close()


def test_writes_land_only_beneath_the_writable_roots(place: Path) -> None:
    outside = place / "outside"
    outside.mkdir()
    s = _open(place / "proj")
    try:
        r = _sh(s, f'echo in > made; echo x > {outside}/w 2>/dev/null && echo WROTE-OUTSIDE; '
                   f'echo x > "$HOME/hs-written-{os.getpid()}" 2>/dev/null && echo WROTE-HOME; '
                   'echo x > /tmp/hs-w 2>/dev/null && echo WROTE-TMP; '
                   'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; '
                   'mkdir -p sub/deep && ln -s made sub/l && rm -rf sub && echo tree-ok')
        assert r.out == "t\ntree-ok\n", r
        assert (place / "proj" / "made").read_text() == "in\n"
        assert not (outside / "w").exists()
        assert not Path(os.path.expanduser("~"), f"hs-written-{os.getpid()}").exists()
    finally:
        s.close()


def test_a_hidden_path_cannot_be_read_though_what_lies_beside_it_can(place: Path) -> None:
    folder = place / "secrets"
    folder.mkdir()
    (folder / "key").write_text("secret\n")
    (folder / "open").write_text("public\n")
    s = _open(place / "proj", hidden=(str(folder / "key"),))
    try:
        r = _sh(s, f"cat {folder}/key 2>/dev/null && echo READ-KEY; cat {folder}/open; "
                   "ls /tmp >/dev/null 2>&1; cat /etc/hostname >/dev/null && echo etc-ok")
        assert r.out == "public\netc-ok\n", r
    finally:
        s.close()


def test_no_process_outside_the_box_is_in_its_reach(place: Path) -> None:
    holder = subprocess.Popen(["sleep", "120"], env={"OPENAI_API_KEY": KEY, "PATH": "/bin"})
    probe = (f"grep -a -q {KEY} /proc/{holder.pid}/environ 2>/dev/null && echo ENVIRON; "
             f"readlink /proc/{holder.pid}/fd/0 >/dev/null 2>&1 && echo FD; "
             f"kill -0 {holder.pid} 2>/dev/null && echo SIGNAL; "
             f"kill -9 {holder.pid} 2>/dev/null && echo KILLED; echo done")
    try:
        # On the host, the same user reaches all three: the test can fail.
        bare = subprocess.run(["sh", "-c", probe.replace("kill -9", "true")],
                              capture_output=True, text=True, check=True)
        assert bare.stdout == "ENVIRON\nFD\nSIGNAL\nKILLED\ndone\n"
        s = _open(place / "proj")
        try:
            r = _sh(s, probe)
        finally:
            s.close()
        assert r.out == "done\n", r
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_the_command_holds_no_privilege(place: Path) -> None:
    s = _open(place / "proj")
    try:
        r = _sh(s, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' "
                   "/proc/self/status; touch f; chown 1234 f 2>/dev/null && echo CHOWNED; "
                   "echo x >> /etc/hostname 2>/dev/null && echo WROTE-ETC; true")
    finally:
        s.close()
    caps = dict(line.split(":\t") for line in r.out.splitlines() if ":\t" in line)
    assert caps == {"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
                    "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
                    "CapAmb": "0000000000000000", "NoNewPrivs": "1"} or (
        os.geteuid() != 0 and caps["CapEff"] == "0000000000000000"
        and caps["NoNewPrivs"] == "1"), r
    assert "CHOWNED" not in r.out and "WROTE-ETC" not in r.out, r


def _tcp_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        try:
            while True:
                server.accept()[0].close()
        except OSError:  # closed by the test
            return

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


SOCKETS = ("import socket, sys\n"
           "def tried(make, addr=None):\n"
           "    try:\n"
           "        s = make()\n"
           "        if addr: s.settimeout(3); s.connect(addr)\n"
           "        return 'yes'\n"
           "    except OSError as e: return 'no'\n"
           "print('tcp', tried(socket.socket, ('127.0.0.1', int(sys.argv[1]))))\n"
           "print('udp', tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)))\n"
           "print('unix', tried(lambda: socket.socket(socket.AF_UNIX), sys.argv[2]))\n"
           "print('pair', tried(lambda: socket.socketpair()[0]))\n"
           "print('dgram-pair', tried(lambda: socket.socketpair(socket.AF_UNIX, "
           "socket.SOCK_DGRAM)[0]))\n")


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
def test_sockets_reach_only_what_the_network_setting_allows(place: Path, network: bool
                                                            ) -> None:
    server, port = _tcp_server()
    path = str(place / "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen(1)
    os.chmod(path, 0o777)
    script = place / "sockets.py"
    script.write_text(SOCKETS)
    argv = [sys.executable, "-I", str(script), str(port), path]
    # On the host every one is reached: the test can fail.
    bare = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert bare == "tcp yes\nudp yes\nunix yes\npair yes\ndgram-pair yes\n"
    s = _open(place / "proj", network=network)
    try:
        r = s.run(argv, timeout=60)
    finally:
        s.close()
        server.close()
        unix.close()
    want = "yes" if network else "no"
    assert r.stdout.decode() == (f"tcp {want}\nudp {want}\nunix no\npair yes\n"
                                 "dgram-pair no\n"), r


def _repo(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)


ATTACK = ("printf '[core]\\n\\tfsmonitor = {p}/evil.sh\\n' >> .git/config; "
          "printf '#!/bin/sh\\ntouch {p}/../RAN\\n' > evil.sh; chmod +x evil.sh; "
          "cp evil.sh .git/hooks/pre-commit; echo {p}/.git > .git/commondir; true")


def _host_git(project: Path) -> None:
    subprocess.run(["git", "-C", str(project), "status", "--short"], capture_output=True,
                   check=False, timeout=60, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"})


def test_git_inputs_a_run_changed_are_put_back_before_host_git_reads_them(
        place: Path) -> None:
    project = place / "proj"
    _repo(project)
    config = (project / ".git" / "config").read_bytes()
    s = _open(project)
    try:
        r = _sh(s, ATTACK.format(p=project))
        assert r.code == 0, r
        _host_git(project)
        again = _sh(s, "git config core.fsmonitor; ls .git/hooks | grep -c sample")
    finally:
        s.close()
    assert not (place / "RAN").exists()
    assert (project / ".git" / "config").read_bytes() == config
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert not (project / ".git" / "commondir").exists()
    assert again.out.split() == [again.out.split()[0]] and again.code == 0, again
    said = " ".join(s.warnings)
    for name in (".git/config", ".git/hooks"):
        assert f"the box changed {project}/{name}, which host programs read" in said, said
    # Missing at the open: nothing to put back, what the box made moved out.
    assert f"the box made {project}/.git/commondir, which host programs read" in said, said
    kept = list((place / "data" / "harness" / "moved").glob("*-protected/.git/config"))
    assert len(kept) == 1 and b"evil.sh" in kept[0].read_bytes()


def test_without_the_keeper_host_git_would_run_what_the_box_planted(
        place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack above is real: with the put-back taken out, host git runs it."""
    monkeypatch.setattr(keeper.Keeper, "check", lambda self: [])
    project = place / "proj"
    _repo(project)
    s = _open(project)
    try:
        _sh(s, ATTACK.format(p=project))
        _host_git(project)
    finally:
        s.close()
    assert (place / "RAN").exists()


def test_a_link_put_on_the_way_to_git_inputs_is_moved_out_and_they_come_back(
        place: Path) -> None:
    project = place / "proj"
    _repo(project)
    config = (project / ".git" / "config").read_bytes()
    s = _open(project)
    try:
        _sh(s, "mv .git .real && mkdir fake && cp -r .real/. fake/ && ln -s fake .git && "
               f"printf '[core]\\n\\tfsmonitor = {project}/evil.sh\\n' > fake/config")
    finally:
        s.close()
    assert (project / ".git").is_dir() and not (project / ".git").is_symlink()
    assert (project / ".git" / "config").read_bytes() == config


def test_nothing_a_run_starts_outlives_it(place: Path) -> None:
    s = _open(place / "proj")
    try:
        r = s.run(["sh", "-c", "setsid sleep 3173 & sleep 3173 & sleep 3173"], timeout=2)
        quick = s.run(["sh", "-c", "setsid sleep 3174 >/dev/null 2>&1 < /dev/null & echo ok"],
                      timeout=30)
    finally:
        s.close()
    assert r.exit == 124 and quick.stdout == b"ok\n", (r, quick)
    assert left_after("3173") == [] and left_after("3174") == []


def test_the_command_reopens_its_own_streams(place: Path) -> None:
    s = _open(place / "proj")
    try:
        r = _sh(s, "cat /dev/stdin; echo out > /dev/stdout; echo err > /dev/stderr; "
                   "cat /proc/self/fd/0; echo fd > /proc/self/fd/1", stdin=b"in\n")
    finally:
        s.close()
    assert (r.code, r.out, r.err) == (0, "in\nout\nfd\n", "err\n"), r


def test_a_missing_program_fails_to_start_as_in_the_namespace_box(place: Path) -> None:
    s = _open(place / "proj")
    try:
        r = s.run(["no-such-program-4711"], timeout=30)
    finally:
        s.close()
    assert (r.outcome, r.error) == ("failed_to_start", "No such file or directory"), r


@pytest.mark.parametrize(("table", "said"), [
    ({"network": ("example.org",)}, "[sandbox] network as a list has no Landlock box"),
    ({"allow_unix_sockets": ("/run/x.sock",)}, "[sandbox] allow_unix_sockets has no "
                                               "Landlock box"),
], ids=["allow-list", "unix-sockets"])
def test_what_the_box_cannot_keep_is_refused_with_its_fix(
        place: Path, table: dict[str, object], said: str) -> None:
    with pytest.raises(SandboxUnavailable) as got:
        _open(place / "proj", **table)
    assert got.value.diagnosis.startswith(said)
    assert got.value.fix.endswith('use the namespace box where this place allows it '
                                  '([sandbox] box = "auto")')


CLI = [sys.executable, "-m", "launchers"]


def test_run_hook_and_serve_keep_every_promise_in_the_landlock_box(place: Path) -> None:
    """The shared real work (helpers/boxed_work.py), on this machine."""
    r = subprocess.run(["sh", "-c", boxed_work.script(str(place / "work"),
                                                      '[sandbox]\nbox = "landlock"')],
                       capture_output=True, timeout=300, check=False, cwd="/")
    boxed_work.check(Done(r.returncode, r.stdout.decode(), r.stderr.decode()))


def test_run_exits_125_when_the_box_cannot_be_built(place: Path) -> None:
    home = place / "home"
    (home / ".config" / "harness").mkdir(parents=True)
    (home / ".config" / "harness" / "config.toml").write_text(
        '[sandbox]\nbox = "landlock"\nnetwork = ["example.org"]\n')
    r = subprocess.run([*CLI, "run", "--project", str(place / "proj"), "--", "true"],
                       capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
                       env={**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": ""})
    assert r.returncode == 125, r
    assert "[sandbox] network as a list has no Landlock box" in r.stderr, r


def test_an_unknown_box_in_the_config_is_refused_by_name(place: Path) -> None:
    from launchers.errors import ConfigError
    from launchers.sandbox_table import sandbox_table

    with pytest.raises(ConfigError) as got:
        sandbox_table("config.toml", {"box": "chroot"})
    assert str(got.value).endswith('[sandbox]: key "box": must be one of "auto", '
                                   '"landlock", not "chroot".')


def test_a_signal_to_the_session_reaches_no_process_outside(place: Path) -> None:
    s = _open(place / "proj")
    try:
        r = _sh(s, f"kill -TERM {os.getpid()} 2>/dev/null && echo SENT; echo done")
    finally:
        s.close()
    assert r.out == "done\n", r


def test_doctor_and_the_banner_say_the_landlock_box_and_what_it_gives_up(place: Path) -> None:
    home = place / "home"
    (home / ".config" / "harness").mkdir(parents=True)
    (home / ".config" / "harness" / "config.toml").write_text('[sandbox]\nbox = "landlock"\n')
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": ""}
    said = BoxKind(LANDLOCK, LANDLOCK_GIVES_UP).said()
    doctor = subprocess.run([*CLI, "doctor"], capture_output=True, text=True, cwd=REPO,
                            env=env, timeout=60, check=False)
    lines = doctor.stderr.splitlines()
    assert doctor.returncode == 0 and said in lines, doctor
    assert lines[-1].startswith(f"the box works: {LANDLOCK}, through "), doctor
    assert "network: none (the Landlock box makes no socket but netlink's)" in lines
    banner = subprocess.run([*CLI, "banner", "--project", str(place / "proj")],
                            capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
                            check=False)
    assert said in banner.stdout.splitlines(), banner


def test_run_is_hidden_as_the_namespace_boxs_empty_run(place: Path) -> None:
    """A container's secrets (/run/secrets) and the users' runtime folders: what the
    host reads in /run, the box cannot."""
    made = Path(f"/run/hs-landlock-secret-{os.getpid()}")
    if os.geteuid() == 0:
        made.write_text("secret\n")
    try:
        readable = [str(p) for p in Path("/run").iterdir()
                    if p.is_file() and not p.is_symlink() and os.access(p, os.R_OK)]
        assert readable or os.geteuid() != 0
        s = _open(place / "proj")
        try:
            r = _sh(s, "".join(f"cat {p} >/dev/null 2>&1 && echo READ {p}; "
                               for p in readable) + "echo done")
        finally:
            s.close()
        assert r.out == "done\n", r
    finally:
        made.unlink(missing_ok=True)


def test_the_users_other_terminals_are_out_of_reach(place: Path) -> None:
    """A pty of the user's (another shell's terminal) cannot be opened from the box:
    its input could be read, its screen written."""
    import pty

    master, slave = pty.openpty()
    name = os.ttyname(slave)
    try:
        # The same user reaches it bare: the test can fail.
        bare = subprocess.run(["sh", "-c", f"echo x > {name} && echo OPENED"],
                              capture_output=True, text=True, check=False)
        assert bare.stdout == "OPENED\n"
        s = _open(place / "proj")
        try:
            r = _sh(s, f"echo x > {name} 2>/dev/null && echo OPENED; "
                       f"(exec 3< {name}) 2>/dev/null && echo READABLE; echo done")
        finally:
            s.close()
        assert r.out == "done\n", r
    finally:
        os.close(master)
        os.close(slave)


def test_a_host_edit_between_runs_is_kept_not_put_back(place: Path) -> None:
    """What the host changes while no run is going is the user's own: the next run's
    end keeps it (only a run's own changes are put back)."""
    project = place / "proj"
    _repo(project)
    s = _open(project)
    try:
        _sh(s, "true")
        subprocess.run(["git", "-C", str(project), "config", "user.name", "host"], check=True)
        _sh(s, "true")
        r = _sh(s, "git config user.name")
    finally:
        s.close()
    assert r.out == "host\n", r
    assert b"name = host" in (project / ".git" / "config").read_bytes()
    assert not [w for w in s.warnings if "the box changed" in w], s.warnings


def test_a_home_or_a_hidden_path_in_a_writable_folder_is_refused_with_its_fix(
        place: Path) -> None:
    home, shared = place / "home", place / "shared"
    home.mkdir()
    (shared / "secret").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(place / "data")}
    for table, said in (({"writable": (str(home),)}, "is or holds a home"),
                        ({"writable": (str(shared),), "hidden": (str(shared / "secret"),)},
                         "lies in a folder the box writes")):
        with pytest.raises(SandboxUnavailable) as got:
            Session.open(str(place / "proj"),
                         SandboxSettings(box="landlock", **table),  # type: ignore[arg-type]
                         env=env).start()
        assert said in got.value.diagnosis, got.value
        assert got.value.fix.endswith('([sandbox] box = "auto")'), got.value


@pytest.mark.parametrize("lock_on", [True, False])
def test_a_change_made_while_another_sessions_run_goes_is_not_taken_as_the_hosts(
        place: Path, lock_on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions on one project (a harness's sub-agents). The first's run plants an
    fsmonitor in git's config and is still going when the second's run starts: were the
    second to take the plant as the host's own edit, it would put it back once the first
    moved it out. With the lock among sessions' runs taken out, host git runs it."""
    if not lock_on:
        from sandbox.process.runs import Runs

        @contextlib.contextmanager
        def always(self: Runs) -> Iterator[bool]:
            yield True
        monkeypatch.setattr(Runs, "alone", always)
    project = place / "proj"
    _repo(project)
    config = (project / ".git" / "config").read_bytes()
    a, b = _open(project), _open(project)
    try:
        going = threading.Thread(target=_sh, args=(a, "printf '#!/bin/sh\\ntouch ../RAN\\n'"
                                 " > evil.sh; chmod +x evil.sh; printf '[core]\\n\\t"
                                 f"fsmonitor = {project}/evil.sh\\n' >> .git/config; "
                                 "sleep 1"))
        going.start()
        deadline = time.monotonic() + 10
        while b"fsmonitor" not in (project / ".git" / "config").read_bytes() and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        # Starts while the first's run goes (its plant is not taken as a start) and
        # ends after it (the first put the config back meanwhile): nothing to put back.
        _sh(b, "sleep 2")
        going.join()
    finally:
        a.close()
        b.close()
    _host_git(project)
    if lock_on:
        assert (project / ".git" / "config").read_bytes() == config
        assert not (place / "RAN").exists()
    else:
        assert (place / "RAN").exists(), "the attack did not take: the test shows nothing"
