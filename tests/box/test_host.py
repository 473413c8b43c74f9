"""The host runner with real hooks: run from /, no provider keys, a PATH nobody plants in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sandbox.box import host
from sandbox.plan import RunResult
from sandbox.policy import Policy
from sandbox.policy.env import DESKTOP_VARS, PROVIDER_KEYS
from sandbox.process import supervisor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="runs real host hooks on Linux")

SH = "/bin/sh"
ENV_PROGRAM = "/usr/bin/env"
SYSTEM_PATH = "/usr/bin:/bin"
PROBE = "hsbx-planted"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with a planted program at its root and in bin/, and the session's folders."""
    for name in ("proj", "proj/bin", "ptmp", "extra", "tools", "links"):
        (tmp_path / name).mkdir()
    for folder in ("proj", "proj/bin", "ptmp", "extra", "tools"):
        plant(tmp_path / folder, PROBE, f"planted in {folder}")
    plant(tmp_path / "proj", "x", "the project's x")
    return tmp_path


def plant(folder: Path, name: str, says: str) -> None:
    prog = folder / name
    prog.write_text(f"#!/bin/sh\necho '{says}'\n")
    prog.chmod(0o755)


def policy(tree: Path, env: dict[str, str], *, boxed: bool = True) -> Policy:
    return Policy.create(
        str(tree / "proj"),
        private_tmp=str(tree / "ptmp"),
        writable=[str(tree / "extra")],
        env=env,
        boxed=boxed,
    )


def run(pol: Policy, *argv: str) -> RunResult:
    result = supervisor.run(host.plan(pol, argv), timeout=30)
    assert result.outcome == "exited", result
    return result


def hook_env(pol: Policy) -> dict[str, str]:
    out = run(pol, ENV_PROGRAM, "-0").stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if item)


def hook_path(tree: Path, path: str, *, boxed: bool = True) -> str | None:
    return hook_env(policy(tree, {"PATH": path}, boxed=boxed)).get("PATH")


# -- the plan --------------------------------------------------------------------------------


def test_the_plan_runs_from_the_root_folder_on_the_host(tree: Path) -> None:
    p = host.plan(policy(tree, {"PATH": SYSTEM_PATH}), [SH, "-c", "echo 'a b'"])
    assert (p.backend, p.cwd, p.argv) == ("host", "/", (SH, "-c", "echo 'a b'"))
    assert p.description == "/bin/sh -c 'echo '\"'\"'a b'\"'\"''"


@pytest.mark.parametrize("program", ["sh", "./hook.sh", "bin/hook"])
def test_a_program_that_is_not_an_absolute_path_is_refused(tree: Path, program: str) -> None:
    with pytest.raises(ValueError, match=f"the program {program} is not an absolute path"):
        host.plan(policy(tree, {"PATH": SYSTEM_PATH}), [program])


def test_an_empty_command_is_refused(tree: Path) -> None:
    with pytest.raises(ValueError, match="the command is empty"):
        host.plan(policy(tree, {"PATH": SYSTEM_PATH}), [])


def test_extra_variables_reach_the_hook_but_never_a_provider_key(tree: Path) -> None:
    pol = policy(tree, {"PATH": SYSTEM_PATH})
    p = host.plan(pol, [ENV_PROGRAM], env_extra={"OH_EVENT": "x", "OPENAI_API_KEY": "k"})
    assert p.env["OH_EVENT"] == "x"
    assert "OPENAI_API_KEY" not in p.env


# -- real hooks ------------------------------------------------------------------------------


def test_a_host_hook_runs_from_the_root_folder(tree: Path) -> None:
    r = run(policy(tree, {"PATH": SYSTEM_PATH}), "/bin/pwd")
    assert r.stdout == b"/\n"


@pytest.mark.parametrize("key", [*PROVIDER_KEYS, "FOO_API_KEY"])
def test_a_host_hook_never_sees_a_provider_key(tree: Path, key: str) -> None:
    env = hook_env(policy(tree, {"PATH": SYSTEM_PATH, key: "secret", "KEEP": "kept"}))
    assert key not in env
    assert env["KEEP"] == "kept"


def test_a_host_hook_sees_the_desktop_variables(tree: Path) -> None:
    desktop = {name: f"value of {name}" for name in DESKTOP_VARS}
    env = hook_env(policy(tree, {"PATH": SYSTEM_PATH, **desktop}))
    assert {k: env[k] for k in DESKTOP_VARS} == desktop


def test_a_relative_name_in_a_host_hook_does_not_find_the_projects_file(tree: Path) -> None:
    r = run(policy(tree, {"PATH": SYSTEM_PATH}), SH, "-c", "./x")
    assert r.returncode == 127
    assert b"the project's x" not in r.stdout


# -- PATH in a session with a sandbox ---------------------------------------------------------


def finds_planted(tree: Path, path: str, *, boxed: bool = True) -> bytes:
    pol = policy(tree, {"PATH": path}, boxed=boxed)
    return run(pol, SH, "-c", f"{PROBE} || echo none").stdout


def test_empty_path_entries_are_dropped(tree: Path) -> None:
    assert hook_path(tree, f"::{SYSTEM_PATH}:") == SYSTEM_PATH


def test_the_dot_entry_is_dropped(tree: Path) -> None:
    assert hook_path(tree, f".:{SYSTEM_PATH}") == SYSTEM_PATH


def test_a_relative_entry_is_dropped(tree: Path) -> None:
    assert hook_path(tree, f"proj/bin:bin:{SYSTEM_PATH}") == SYSTEM_PATH


def test_the_project_and_folders_inside_it_are_dropped(tree: Path) -> None:
    path = f"{tree / 'proj'}:{tree / 'proj/bin'}:{SYSTEM_PATH}"
    assert hook_path(tree, path) == SYSTEM_PATH
    assert finds_planted(tree, path) == b"none\n"


def test_the_private_temp_folder_and_writable_folders_are_dropped(tree: Path) -> None:
    path = f"{tree / 'ptmp'}:{tree / 'extra'}:{SYSTEM_PATH}"
    assert hook_path(tree, path) == SYSTEM_PATH
    assert finds_planted(tree, path) == b"none\n"


def test_a_link_into_the_project_is_dropped(tree: Path) -> None:
    link = tree / "links" / "tobin"
    link.symlink_to(tree / "proj" / "bin")
    path = f"{link}:{SYSTEM_PATH}"
    assert hook_path(tree, path) == SYSTEM_PATH
    assert finds_planted(tree, path) == b"none\n"


def test_a_dangling_link_is_dropped(tree: Path) -> None:
    link = tree / "links" / "later"
    link.symlink_to(tree / "nowhere-yet")
    assert hook_path(tree, f"{link}:{SYSTEM_PATH}") == SYSTEM_PATH


def test_an_entry_outside_every_writable_folder_is_kept(tree: Path) -> None:
    path = f"{tree / 'tools'}:{tree / 'proj/bin'}:{SYSTEM_PATH}"
    assert hook_path(tree, path) == f"{tree / 'tools'}:{SYSTEM_PATH}"
    assert finds_planted(tree, path) == b"planted in tools\n"


def test_with_every_entry_dropped_the_hook_has_no_path_at_all(tree: Path) -> None:
    path = f".::{tree / 'proj/bin'}:{tree / 'ptmp'}"
    env = hook_env(policy(tree, {"PATH": path, "KEEP": "kept"}))
    assert "PATH" not in env
    assert env["KEEP"] == "kept"


def test_with_no_path_given_the_hook_has_no_path(tree: Path) -> None:
    assert "PATH" not in hook_env(policy(tree, {"KEEP": "kept"}))


def test_with_no_sandbox_path_is_passed_unchanged(tree: Path) -> None:
    path = f".::{tree / 'proj/bin'}:{tree / 'ptmp'}:{SYSTEM_PATH}"
    assert hook_path(tree, path, boxed=False) == path
    assert finds_planted(tree, path, boxed=False) == b"planted in proj/bin\n"
