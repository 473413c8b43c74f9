"""Loader words beyond the table's exact forms: for a host hook, which the seed tells to
change into the project, a relative word in a code-form variable names the agent's
file; it is dropped, as an untraceable path is. npm's variables match in any case."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from launchers.config import Config, HookSpec
from launchers.harness.hooks import HookRunner
from sandbox.policy import Policy
from sandbox.policy.startenv import host_env
from sandbox.session import Session


def policy(project: Path, env: dict[str, str]) -> Policy:
    return Policy.from_settings(str(project), env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.parametrize(("name", "value"), [
    ("NODE_OPTIONS", "--require ./.pnp.cjs"),
    ("NODE_OPTIONS", "--require=./x.js"),
    ("NODE_OPTIONS", "--import tsx"),
    ("PERL5OPT", "-Ilib"),
    ("PERL5OPT", "-I./lib"),
    ("RUBYOPT", "-r./boot"),
    ("JDK_JAVA_OPTIONS", "@args"),
    ("JAVA_TOOL_OPTIONS", "-javaagent:agent.jar"),
    ("LUA_INIT", "@init.lua"),
])
def test_a_relative_word_in_a_code_variable_drops_it(project: Path, name: str,
                                                     value: str) -> None:
    assert name not in host_env(policy(project, {name: value}))


@pytest.mark.parametrize("name", ["JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"])
def test_an_argument_file_in_the_project_drops_the_variable(project: Path, name: str) -> None:
    assert name not in host_env(policy(project, {name: f"@{project}/args"}))


@pytest.mark.parametrize("name", ["npm_config_userconfig", "NPM_CONFIG_USERCONFIG",
                                  "Npm_Config_Userconfig"])
def test_npm_variables_match_in_any_case(project: Path, name: str) -> None:
    assert name not in host_env(policy(project, {name: f"{project}/.npmrc"}))


@pytest.mark.parametrize(("name", "value"), [
    ("NODE_OPTIONS", "--max-old-space-size=4096 --enable-source-maps"),
    ("PERL5OPT", "-Mstrict -I/usr/share/perl5"),
    ("JAVA_TOOL_OPTIONS", "-Xmx512m -javaagent:/usr/share/java/agent.jar"),
])
def test_code_variables_naming_nothing_relative_are_kept(project: Path, name: str,
                                                         value: str) -> None:
    assert host_env(policy(project, {name: value}))[name] == value


@pytest.mark.isolation
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None
                    or shutil.which("node") is None, reason="needs bubblewrap and node")
def test_a_host_hook_in_the_project_does_not_load_the_agents_pnp_file(
        project: Path, outside: Path) -> None:
    marker = outside / "PWNED"
    env = {**os.environ, "NODE_OPTIONS": "--require ./.pnp.cjs"}
    hook = outside / "check.sh"
    node = shutil.which("node")
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\ncd {project} && {node} -e 0\n")
    hook.chmod(0o755)
    with Session.open(str(project), env=env) as session:
        # The agent's step, in the box: a .pnp.cjs that node --require would load.
        done = session.run(["/bin/sh", "-c",
                            f"echo 'require(\"fs\").writeFileSync(\"{marker}\", \"x\")' "
                            "> .pnp.cjs"])
        assert done.ok and (project / ".pnp.cjs").exists()
        spec = HookSpec(name="node-hook", event="PreToolUse", command=(str(hook),),
                        sandbox=False)
        r = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="01MSESSION")
        d = r.pre_tool_use("bash", {"command": "ls"}, tool_use_id="7EX")
        assert d.outcome == "allowed", d.warnings
    assert not marker.exists()


def test_a_command_line_handed_to_env_split_string_is_checked(project: Path) -> None:
    from pathguard.argv import check_command

    (project / "h.sh").write_text("#!/bin/sh\n")
    pol = policy(project, {})
    for flag in ("-S", "--split-string"):
        v = check_command("split", ["/usr/bin/env", flag, f"{project}/h.sh --quiet"],
                          project=str(project), guard=pol.guard(boxed=False),
                          path_env="/usr/bin:/bin")
        assert not v.ok, flag
        assert v.details[0].kind == "project", v.details
