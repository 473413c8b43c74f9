"""The box inside containers, in the real Docker engine (a private ``dockerd``, see
:mod:`helpers.docker_engine`): as root and as a plain user (``--user``), under Docker's
default seccomp profile and with ``seccomp=unconfined``."""

from __future__ import annotations

import json
import os
import sys

import pytest
from helpers import boxed_work, docker_engine
from helpers.docker_engine import Engine
from helpers.paths import REPO

from sandbox.linux import causes, kind

pytestmark = pytest.mark.isolation

PLACES = [("default", False), ("default", True), ("unconfined", False), ("unconfined", True)]
IDS = ["default-root", "default-user", "unconfined-root", "unconfined-user"]


@pytest.mark.parametrize(("seccomp", "user"), PLACES, ids=IDS)
def test_the_engine_runs_a_container_with_no_network_as_asked(
        engine: Engine, seccomp: str, user: bool) -> None:
    r = engine.run("id -u; grep ^Seccomp: /proc/self/status; ls /sys/class/net",
                   user=user, seccomp=seccomp)
    assert r.code == 0, r
    uid, filtered, *links = r.out.split("\n")
    assert uid == ("4321" if user else "0")
    assert filtered.split() == ["Seccomp:", "2" if seccomp == "default" else "0"]
    assert [x for x in links if x] == ["lo"]


def test_a_stopped_engine_leaves_no_process_mount_or_folder() -> None:
    docker_engine.skip_unless_root()
    made = docker_engine.start()
    assert made.run("true").code == 0
    made.stop()
    assert made.daemon.poll() is not None
    assert not made.folder.exists()
    assert docker_engine._mounts_below(made.folder) == []
    left = [p for p in os.listdir("/proc") if p.isdigit() and _in(p, str(made.folder))]
    assert left == []


def _in(pid: str, word: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return word.encode() in f.read()
    except OSError:
        return False


def _cli() -> str:
    """The command in the container: the test's own interpreter, bound read-only."""
    return f"{sys.executable} -m launchers"


def test_run_exits_125_where_roots_stand_in_cannot_be_staged(engine: Engine) -> None:
    r = engine.run(f"mkdir -p /tmp/p && cd {REPO} && "
                   f"{_cli()} run --project /tmp/p -- echo hi", seccomp="unconfined")
    assert r.code == 125, r
    assert "hi" not in r.out


# Per place: the cause each refusal names, and its fix (sandbox/linux/causes.py).
REFUSALS = {
    ("default", False): (causes.SECCOMP_DIAGNOSIS, causes.SECCOMP_FIX),
    ("default", True): (causes.SECCOMP_DIAGNOSIS, causes.SECCOMP_FIX),
    ("unconfined", False): (causes.NO_SYS_ADMIN_DIAGNOSIS, causes.NO_SYS_ADMIN_FIX),
}
OPEN = '{"id": "1", "method": "open", "params": {}}'


@pytest.mark.parametrize(("seccomp", "user"), PLACES[:3], ids=IDS[:3])
def test_each_refusal_in_a_container_names_the_cause_and_its_fix(
        engine: Engine, seccomp: str, user: bool) -> None:
    cli = _cli()
    r = engine.run(f"mkdir -p /tmp/p && cd {REPO} && "
                   f"{cli} run --project /tmp/p -- true; echo \"run=$?\"; "
                   f"{cli} doctor; echo \"doctor=$?\"; "
                   f"echo '{OPEN}' | {cli} serve --project /tmp/p", user=user,
                   seccomp=seccomp)
    diagnosis, fix = REFUSALS[(seccomp, user)]
    said = [line for line in r.err.splitlines() if line.startswith("harness-sandbox: ")]
    assert len(said) == 1 and diagnosis in said[0] and said[0].endswith(f"; {fix}"), r
    assert "run=125" in r.out and "doctor=1" in r.out, r
    verdict = (r.out + r.err).split("the box cannot be built: ", 1)[1].splitlines()
    assert verdict[0].startswith(diagnosis) and verdict[1] == f"fix: {fix}", r
    answers = [json.loads(line) for line in r.out.splitlines() if line.startswith('{"id"')]
    assert len(answers) == 1, r
    answer = answers[0]
    assert answer["error"]["code"] == "sandbox", answer
    assert diagnosis in answer["error"]["message"], answer
    assert answer["error"]["message"].endswith(f"; {fix}"), answer
    everything = r.out + r.err
    assert "run harness-sandbox doctor" not in everything
    assert "bug report" not in everything


def test_with_seccomp_unconfined_a_plain_users_box_takes_the_containers_proc_and_holds(
        engine: Engine) -> None:
    r = engine.run(boxed_work.script("/srv/work"), user=True, seccomp="unconfined",
                   timeout=300)
    boxed_work.check(r)


def test_with_seccomp_unconfined_doctor_audit_and_serve_say_the_box_and_what_it_gives_up(
        engine: Engine) -> None:
    cli = _cli()
    r = engine.run(f"mkdir -p /srv/p && cd {REPO} && {cli} doctor; echo \"doctor=$?\"; "
                   f"{cli} audit --json --project /srv/p; "
                   f"echo '{OPEN}' | {cli} serve --project /srv/p", user=True,
                   seccomp="unconfined")
    said = {"name": kind.BOUND_PROC, "gives_up": list(kind.BOUND_PROC_GIVES_UP)}
    assert "doctor=0" in r.out, r
    assert f"box: {kind.BOUND_PROC} (weaker here: {'; '.join(kind.BOUND_PROC_GIVES_UP)})" \
        in r.err.splitlines(), r
    docs = [json.loads(line) for line in r.out.splitlines() if line.startswith("{")]
    audit = next(d for d in docs if "hooks" in d)
    opened = next(d for d in docs if d.get("id") == "1")
    assert audit["box"] == said and opened["result"]["audit"]["box"] == said, r


LANDLOCK_PLACES = [("default", False), ("default", True), ("unconfined", False)]
LANDLOCK_TABLE = '[sandbox]\nbox = "landlock"'


@pytest.mark.parametrize(("seccomp", "user"), LANDLOCK_PLACES, ids=IDS[:3])
def test_where_namespaces_are_refused_the_landlock_box_runs_the_work_and_holds(
        engine: Engine, seccomp: str, user: bool) -> None:
    """The three places the namespace box refuses (exit 125 above, the fix naming this
    box): the same real work, every promise kept."""
    r = engine.run(boxed_work.script("/srv/work", LANDLOCK_TABLE), user=user,
                   seccomp=seccomp, timeout=300)
    boxed_work.check(r)


def test_in_the_default_profile_audit_and_serve_say_the_landlock_box(engine: Engine) -> None:
    cli = _cli()
    r = engine.run(f"mkdir -p /srv/p /tmp/home/.config/harness && "
                   f"printf '{LANDLOCK_TABLE}\\n' > /tmp/home/.config/harness/config.toml && "
                   f"cd {REPO} && {cli} audit --json --project /srv/p; "
                   f"echo '{OPEN}' | {cli} serve --project /srv/p")
    said = {"name": kind.LANDLOCK, "gives_up": list(kind.LANDLOCK_GIVES_UP)}
    docs = [json.loads(line) for line in r.out.splitlines() if line.startswith("{")]
    audit = next(d for d in docs if "hooks" in d)
    opened = next(d for d in docs if d.get("id") == "1")
    assert audit["box"] == said and opened["result"]["audit"]["box"] == said, r


def test_in_a_container_a_host_cache_the_kernel_will_not_lay_under_is_said(
        engine: Engine) -> None:
    """The container's / is an overlay, which the kernel refuses as an upper layer: the
    box's cache starts from the project's own, works, and the session says why (or,
    on a kernel that takes it, the host's cache is read)."""
    cli = _cli()
    r = engine.run("mkdir -p /srv/p /srv/home/.npm && echo host > /srv/home/.npm/x && "
                   f"export HOME=/srv/home && cd {REPO} && {cli} run --project /srv/p -- "
                   "sh -c 'cat $npm_config_cache/x 2>/dev/null; echo w > $npm_config_cache/y "
                   "&& echo wrote'; echo rc=$?", user=True, seccomp="unconfined")
    assert r.out.endswith("wrote\nrc=0\n"), r
    said = [line for line in r.err.splitlines() if line.startswith("harness-sandbox: ")]
    if not r.out.startswith("host\n"):
        assert said == ["harness-sandbox: the host's cache of npm is not laid under the "
                        "box's: mounting an overlay failed: Invalid argument; the box's "
                        "starts from the project's own"], r
