"""Round four, family 1: the toolkit's own files where the box can write, and a host run's
environment. Each attack is made from inside the real box; the host side then runs for
real (the next session with that config, a host run with the caller's env)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.paths import REPO
from helpers.serve_client import CLI, Serve

from sandbox.policy import private_tmp_root

pytestmark = pytest.mark.isolation

HOST_HOOK = """
[[hooks]]
name = "planted"
event = "PreToolUse"
command = ["/bin/sh", "-c", "touch {marker}"]
sandbox = false
"""


def plain_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
    env.update(extra)
    return env


def config_writing_itself(folder: Path) -> Path:
    """A config whose own [sandbox] writable names the folder it lies in."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.toml"
    path.write_text(f"[sandbox]\nwritable = [{json.dumps(str(folder))}]\n")
    return path


def cli(*args: str, env: dict[str, str], project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


# -- the config ------------------------------------------------------------------------


def test_serve_open_refuses_a_config_in_a_folder_its_own_writable_opens(
        served: Serve, tmp_path: Path) -> None:
    config = config_writing_itself(tmp_path / "shared")
    reply = served.call("open", {"config": str(config)})
    err = reply["error"]
    assert err["code"] == "config", reply
    assert err["message"].startswith(f"{config}: this config lies in a writable folder ("
                                     f"{tmp_path / 'shared'}), which the box can write "
                                     "(--config names it), so the agent could change it")
    assert "Keep the user config outside every folder the box can write" in err["message"]
    # Nothing was opened: a run is refused as for a session never opened.
    assert served.call("run", {"argv": ["true"]})["error"]["code"] == "not_open"


@pytest.mark.parametrize("how", ["--config", "HARNESS_HOME"])
def test_run_refuses_a_config_the_box_could_append_a_host_hook_to(
        project: Path, tmp_path: Path, how: str) -> None:
    """The attack: the box appends a ``sandbox = false`` hook; the next ``hook`` call
    with that config would run it on the host. Refused before any box runs, so the
    append never happens and the next session is refused too."""
    folder = tmp_path / "cfg"
    config = config_writing_itself(folder)
    marker = tmp_path / "host-ran"
    env = plain_env()
    named: list[str] = []
    if how == "--config":
        named = ["--config", str(config)]
    else:
        env["HARNESS_HOME"] = str(folder)
    append = f"printf '%s' {json.dumps(HOST_HOOK.format(marker=marker))} >> {config}"
    run = cli("run", "--project", str(project), *named, "--", "sh", "-c", append,
              env=env, project=project)
    assert run.returncode == 125, run
    # Named by --config, the file is refused where it lies; as HARNESS_HOME, the folder
    # the host reads is the writable folder itself, which cannot be bound read-only.
    said = ("which the box can write" if how == "--config" else
            "is itself a folder [sandbox] writable names, so the box could rewrite it")
    assert said in run.stderr, run.stderr
    assert "planted" not in config.read_text()
    nxt = cli("hook", "PreToolUse", "--project", str(project), *named, "--tool", "bash",
              "--input", '{"command": "ls"}', env=env, project=project)
    assert nxt.returncode == 2, nxt
    assert not marker.exists()


def test_a_config_with_a_hard_link_in_a_writable_folder_is_refused(
        project: Path, tmp_path: Path) -> None:
    """The sibling of a config in the folder: one kept outside it, with a second name
    in it, which the box would write through."""
    folder = tmp_path / "shared"
    folder.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f"[sandbox]\nwritable = [{json.dumps(str(folder))}]\n")
    os.link(config, folder / "notes.toml")
    r = cli("run", "--project", str(project), "--config", str(config), "--", "sh", "-c",
            f"echo planted >> {folder / 'notes.toml'}", env=plain_env(), project=project)
    assert r.returncode == 125, r
    assert "this config has 2 hard links on the file system of" in r.stderr
    assert "planted" not in config.read_text()


def test_a_config_in_the_private_temp_folder_is_refused(project: Path) -> None:
    root = Path(private_tmp_root())
    root.mkdir(mode=0o700, exist_ok=True)
    folder = root / f"cfg-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    try:
        config = folder / "config.toml"
        config.write_text("")
        r = cli("run", "--project", str(project), "--config", str(config), "--", "true",
                env=plain_env(), project=project)
        assert r.returncode == 125, r
        assert "this config lies in the private temp folder" in r.stderr
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_a_config_the_box_binds_read_only_is_kept_and_cannot_be_appended_to(
        project: Path, tmp_path: Path) -> None:
    """XDG_CONFIG_HOME's harness folder in a writable folder is bound read-only (with
    the folders above it held): the session opens, the box's append fails, and the next
    session runs no planted hook."""
    xdg = tmp_path / "xdg"
    (xdg / "harness").mkdir(parents=True)
    config = xdg / "harness" / "config.toml"
    config.write_text(f"[sandbox]\nwritable = [{json.dumps(str(xdg))}]\n")
    marker = tmp_path / "host-ran"
    env = plain_env(XDG_CONFIG_HOME=str(xdg))
    append = (f"printf '%s' {json.dumps(HOST_HOOK.format(marker=marker))} >> {config}; "
              f"mv {xdg / 'harness'} {xdg / 'moved'}")
    run = cli("run", "--project", str(project), "--", "sh", "-c", append, env=env,
              project=project)
    assert run.returncode != 0, run
    assert "planted" not in config.read_text()
    nxt = cli("hook", "PreToolUse", "--project", str(project), "--tool", "bash",
              "--input", '{"command": "ls"}', env=env, project=project)
    assert nxt.returncode == 0, nxt
    assert not marker.exists()


# -- record files ----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["records", "replay", "resume"])
def test_serve_open_refuses_record_files_in_the_project(served: Serve, project: Path,
                                                        key: str) -> None:
    log = project / "log.jsonl"
    log.write_text("")
    reply = served.call("open", {key: str(log)})
    assert reply["error"]["code"] == "config", reply
    assert reply["error"]["message"] == (
        f"{log}: the {key} file lies in the project, which the box can write, so the "
        "agent could change it (or make it a link the host then writes through); keep "
        "record files outside every folder the box can write")


def test_a_record_file_the_box_swapped_for_a_link_is_not_written_through(
        served: Serve, project: Path, tmp_path: Path, config: Path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("# the user's\n")
    served.result("open")
    r = served.result("run", {"argv": ["ln", "-s", str(victim), "log.jsonl"]})
    assert r["exit"] == 0, r
    served.result("close")
    # One server serves one session: the next session is the next server's.
    nxt = Serve("--project", str(project), env=plain_env(HARNESS_HOME=str(config.parent)),
                cwd=REPO)
    try:
        reply = nxt.call("open", {"records": str(project / "log.jsonl")})
    finally:
        nxt.close()
    assert reply["error"]["code"] == "config"
    assert victim.read_text() == "# the user's\n"


# -- a host run's environment ----------------------------------------------------------

PRELOAD_C = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    int fd = open("%s", O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"""


def test_a_host_runs_env_cannot_load_what_the_box_compiled(served: Serve, project: Path,
                                                           tmp_path: Path) -> None:
    marker = tmp_path / "preloaded"
    served.result("open")
    (project / "evil.c").write_text(PRELOAD_C % marker)
    built = served.result("run", {"argv": ["cc", "-shared", "-fPIC", "-o", "evil.so",
                                           "evil.c"]})
    assert built["exit"] == 0, built
    r = served.result("run", {"argv": ["/bin/true"], "host": True,
                              "env": {"LD_PRELOAD": str(project / "evil.so")}})
    assert r["exit"] == 0, r
    assert not marker.exists()
    # A library outside every writable folder is the caller's to load.
    kept = served.result("run", {"argv": ["/bin/sh", "-c", 'printf %s "$LD_PRELOAD"'],
                                 "host": True, "env": {"LD_PRELOAD": "/lib/nowhere.so"}})
    assert kept["stdout"] == "/lib/nowhere.so", kept


def test_a_host_runs_env_cannot_name_a_bash_env_the_box_wrote(served: Serve, project: Path,
                                                              tmp_path: Path) -> None:
    marker = tmp_path / "bash-env-ran"
    served.result("open")
    wrote = served.result("run", {"argv": ["sh", "-c", f"echo 'touch {marker}' > be.sh"]})
    assert wrote["exit"] == 0, wrote
    for name in ("BASH_ENV", "ENV"):
        r = served.result("run", {"argv": ["/bin/bash", "-c", "true"], "host": True,
                                  "env": {name: str(project / "be.sh"),
                                          "GREETING": "kept"}})
        assert r["exit"] == 0, r
    assert not marker.exists()
    path = served.result("run", {"argv": ["/bin/sh", "-c", 'printf %s "$PATH/$GREETING"'],
                                 "host": True, "env": {"PATH": f"{project}:/usr/bin",
                                                       "GREETING": "kept"}})
    assert path["stdout"] == "/usr/bin/kept", path
