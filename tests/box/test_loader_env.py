"""Loader variables reach a host hook pruned like PATH: no project code through them.

Every row of the table in ``sandbox/policy/env.py`` is checked: a list loses its entries in a
writable folder, a variable naming code goes when it names one, an entry outside stays,
and with no sandbox nothing changes. Then the attack end to end: the agent writes a
``json.py`` into the project from the box, and a host hook run by a user whose
PYTHONPATH names the project imports the standard library's, not the agent's.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.paths import REPO

from launchers.config import Config, HookSpec
from launchers.harness.hooks import HookRunner
from sandbox.policy import Policy
from sandbox.policy.env import LOADER_VARS, LoaderVar, path_words
from sandbox.policy.startenv import host_env
from sandbox.session import Session

OUTSIDE = "/usr/lib"  # exists on every Linux machine and lies in no writable folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = Path(os.path.realpath(tmp_path)) / "proj"
    (p / "lib").mkdir(parents=True)
    return p


def policy(project: Path, env: dict[str, str], *, sandboxed: bool = True) -> Policy:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"}
    return Policy.create(str(project), private_tmp=str(project.parent / "private"),
                         env={**base, **env}, boxed=sandboxed)


def name_of(row: LoaderVar) -> str:
    return row.name[:-1] + "MINE" if row.name.endswith("*") else row.name


ROWS = [pytest.param(row, id=row.name) for row in LOADER_VARS]


@pytest.mark.parametrize("row", ROWS)
def test_each_row_loses_what_names_a_writable_folder(row: LoaderVar, project: Path) -> None:
    name = name_of(row)
    value = f"{project}/lib:{OUTSIDE}" if row.form == "list" else f"{project}/lib"
    env = host_env(policy(project, {name: value}))
    if row.form == "list":
        assert env[name] == OUTSIDE
    else:
        assert name not in env


@pytest.mark.parametrize("row", ROWS)
def test_each_row_keeps_what_lies_outside(row: LoaderVar, project: Path) -> None:
    name = name_of(row)
    assert host_env(policy(project, {name: OUTSIDE}))[name] == OUTSIDE


@pytest.mark.parametrize("row", ROWS)
def test_each_row_is_unchanged_with_no_sandbox(row: LoaderVar, project: Path) -> None:
    name = name_of(row)
    value = f"{project}/lib:{OUTSIDE}"
    assert host_env(policy(project, {name: value}, sandboxed=False))[name] == value


def test_a_list_loses_empty_relative_and_untraceable_entries_as_path_does(
        project: Path) -> None:
    loop = project.parent / "loop"
    loop.symlink_to("loop")
    value = f":lib:./x:{loop}:{OUTSIDE}:{project}"
    assert host_env(policy(project, {"PYTHONPATH": value}))["PYTHONPATH"] == OUTSIDE
    assert "PERL5LIB" not in host_env(policy(project, {"PERL5LIB": f"{project}/lib:"}))


@pytest.mark.parametrize(("name", "value"), [
    ("NODE_OPTIONS", "--max-old-space-size=4096 --require {p}/x.js"),
    ("NODE_OPTIONS", "--import={p}/x.mjs"),
    ("NODE_OPTIONS", "'--require=/usr/lib/x.js' \"--require={p}/my x.js\""),
    ("PERL5OPT", "-Mlib={p}/lib -w"),
    ("RUBYOPT", "-I{p}/lib -rhook"),
    ("JAVA_TOOL_OPTIONS", "-javaagent:{p}/agent.jar=opts"),
    ("LD_PRELOAD", "/usr/lib/libc.so.6 {p}/evil.so"),
    ("LD_PRELOAD", "/usr/lib/libc.so.6:{p}/evil.so"),
    ("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='{p}/fsmonitor'"),
    ("BASH_FUNC_hook%%", "() {{ . {p}/x.sh; }}"),
])
def test_a_path_word_inside_an_option_string_drops_the_variable(
        name: str, value: str, project: Path) -> None:
    assert name not in host_env(policy(project, {name: value.format(p=project)}))


@pytest.mark.parametrize(("name", "value"), [
    ("NODE_OPTIONS", "--max-old-space-size=4096"),
    ("NODE_OPTIONS", "--require /usr/lib/x.js"),
    ("PERL5OPT", "-w -Mstrict"),
    ("LUA_INIT", "print(1)"),
    ("PROMPT_COMMAND", "history -a"),
])
def test_an_option_string_naming_nothing_writable_is_kept(name: str, value: str,
                                                          project: Path) -> None:
    assert host_env(policy(project, {name: value}))[name] == value


def test_the_path_words_of_an_option_string() -> None:
    assert path_words("--require=/a/x.js -I/b -Ilib/c -javaagent:/d.jar=o 'e/f' -w") == \
        ["/a/x.js", "/b", "lib/c", "/d.jar", "e/f"]


def test_a_git_config_set_goes_whole_when_one_value_names_the_project(project: Path) -> None:
    env = host_env(policy(project, {
        "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "dana",
        "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": f"{project}/fsmonitor",
        "GIT_CONFIG_NOSYSTEM": "1"}))
    assert not [n for n in env if n.startswith("GIT_CONFIG_") and n != "GIT_CONFIG_NOSYSTEM"]
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"


def test_the_box_keeps_its_environment(project: Path) -> None:
    # Boxed commands may write the project anyway; the table is for host hooks.
    from sandbox.policy.startenv import box_env

    assert box_env(policy(project, {"PYTHONPATH": str(project)}))["PYTHONPATH"] == str(project)


# -- the attack, end to end ---------------------------------------------------------------


@pytest.fixture
def session_with_pythonpath(project: Path) -> Iterator[Session]:
    env = {**os.environ, "PYTHONPATH": f"{project}:{project}/lib"}
    with Session.open(str(project), env=env) as s:
        yield s


@pytest.mark.isolation
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                    reason="needs bubblewrap on Linux")
def test_a_host_hook_does_not_import_the_agents_json_through_pythonpath(
        project: Path, session_with_pythonpath: Session) -> None:
    session = session_with_pythonpath
    marker = project.parent / "PWNED"
    tools = project.parent / "tools"
    tools.mkdir()
    hook = tools / "check.py"
    hook.write_text("import json, sys\njson.load(sys.stdin)\n")
    # The agent's step, in the box: a json.py in the project, on the user's PYTHONPATH.
    done = session.run(["/bin/sh", "-c", f"echo 'open(\"{marker}\", \"w\")' > json.py"])
    assert done.ok and (project / "json.py").exists()
    spec = HookSpec(name="py-hook", event="PreToolUse",
                    command=(sys.executable, str(hook)), sandbox=False)
    r = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="01MSESSION")
    d = r.pre_tool_use("bash", {"command": "ls"}, tool_use_id="7EX")
    assert d.outcome == "allowed", d.warnings
    assert not marker.exists()


EVIL_C = """
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    int fd = open("%s", O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
"""


@pytest.mark.isolation
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                    reason="needs bubblewrap on Linux")
def test_bwrap_itself_never_loads_a_library_the_agent_built(project: Path) -> None:
    # The marker's folder is the host's /tmp: in the box /tmp is the private one, so
    # only a process on the host can make it there.
    marker = project.parent / "PWNED"
    with Session.open(str(project)) as s:
        (project / "evil.c").write_text(EVIL_C % marker)
        built = s.run(["/bin/sh", "-c", "cc -shared -fPIC -o evil.so evil.c"], timeout=60)
        assert built.ok, built.stderr.decode()
    env = {**os.environ, "LD_PRELOAD": f"{project}/evil.so",
           "LD_LIBRARY_PATH": f"{project}/lib"}
    with Session.open(str(project), env=env) as s:
        done = s.run(["/bin/sh", "-c", 'echo "$LD_PRELOAD $LD_LIBRARY_PATH"'])
    assert done.ok, done.stderr.decode()
    # The command in the box still has them; bwrap, on the host, never loaded them.
    assert done.stdout.decode().split() == [f"{project}/evil.so", f"{project}/lib"]
    assert not marker.exists()


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name) for r in LOADER_VARS
                                 if r.form == "path"])
def test_a_path_row_goes_when_relative(row: LoaderVar, project: Path) -> None:
    # Relative to wherever the program runs: a host hook may cd to the project first.
    assert row.name not in host_env(policy(project, {row.name: ".envrc-local"}))


def test_the_readme_lists_the_table_as_it_is() -> None:
    readme = (REPO / "docs" / "host-hooks.md").read_text()
    for row in LOADER_VARS:
        assert f"| `{row.name}` | {row.form} | {row.loads} |" in readme, row.name
