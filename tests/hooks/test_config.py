"""The user config: where it is found, what [[hooks]] and [sandbox] may hold, the
load errors (exact text), the warnings, and the banner line."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.config import (
    TOOLS,
    Config,
    ConfigError,
    HookSpec,
    Located,
    SandboxSettings,
    banner,
    discover,
    load,
    locate,
)


def write(tmp_path: Path, text: str, name: str = "config.toml") -> str:
    d = tmp_path / "cfg"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text(text, encoding="utf-8")
    return str(f)


def error_of(tmp_path: Path, project: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load(path, project=str(project))
    return str(info.value)


def hook_error(tmp_path: Path, project: Path, text: str) -> str:
    """The load error of ``text``, whose hook is "h", after the words that name the file
    and the hook (checked too)."""
    said = error_of(tmp_path, project, text)
    prefix = f'{tmp_path}/cfg/config.toml: hook "h": '
    assert said.startswith(prefix), said
    return said[len(prefix):]


HOOK = '[[hooks]]\nname = "h"\nevent = "PreToolUse"\ncommand = ["/bin/true"]\n'


# -- discovery ------------------------------------------------------------------------

def test_harness_home_is_looked_at_first() -> None:
    env = {"HARNESS_HOME": "/h", "XDG_CONFIG_HOME": "/x", "HOME": "/home/u"}
    assert discover(env) == "/h/config.toml"
    assert locate(env) == Located("/h/config.toml", "HARNESS_HOME")


def test_xdg_config_home_comes_next() -> None:
    env = {"XDG_CONFIG_HOME": "/x", "HOME": "/home/u"}
    assert discover(env) == "/x/harness/config.toml"
    assert locate(env) == Located("/x/harness/config.toml", "XDG_CONFIG_HOME")


def test_home_config_folder_is_the_last_rule() -> None:
    assert discover({"HOME": "/home/u"}) == "/home/u/.config/harness/config.toml"
    assert discover({}, home="/home/v") == "/home/v/.config/harness/config.toml"
    assert locate({"HOME": "/home/u"}) == Located(
        "/home/u/.config/harness/config.toml", "HOME")


def test_empty_variables_do_not_count() -> None:
    env = {"HARNESS_HOME": "", "XDG_CONFIG_HOME": "", "HOME": "/home/u"}
    assert discover(env) == "/home/u/.config/harness/config.toml"


def test_a_relative_xdg_config_home_is_ignored() -> None:
    assert discover({"XDG_CONFIG_HOME": "rel", "HOME": "/home/u"}) == (
        "/home/u/.config/harness/config.toml")


def test_no_home_at_all_finds_nothing() -> None:
    # Only the mapping given is read, never the process environment.
    assert discover({}) is None
    assert locate({}, home="") is None


def test_discovery_picks_a_path_that_does_not_exist_yet(tmp_path: Path) -> None:
    path = discover({"HARNESS_HOME": str(tmp_path / "nothing")})
    assert path == str(tmp_path / "nothing" / "config.toml")


def test_config_option_overrides_discovery() -> None:
    env = {"HARNESS_HOME": "/h"}
    assert locate(env, explicit="/c/my.toml") == Located("/c/my.toml", "--config")


# -- loading what is valid ---------------------------------------------------------------

def test_a_missing_file_is_a_config_without_hooks(tmp_path: Path, project: Path) -> None:
    assert load(str(tmp_path / "none.toml"), project=str(project)) == Config(path=None)
    assert load(None, project=str(project)) == Config(path=None)


def test_every_key_is_read(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '''
[[hooks]]
name = "no-force-push"
event = "PreToolUse"
tools = ["bash", "exec"]
command = ["/usr/local/bin/no-force-push.sh", "--strict"]
timeout = 10
sandbox = false
on_failure = "continue"

[sandbox]
writable = ["~/.cache/pip", "/srv/build"]
hidden = ["~/secrets"]
hide_defaults = false
protect = false
network = true
enabled = false
scrub = ["GITHUB_TOKEN", "*_SECRET"]
allow_unix_sockets = ["~/.colima/default/docker.sock", "/run/user/1000/gnupg"]
''')
    config = load(path, project=str(project))
    assert config.path == path
    assert config.hooks == (HookSpec(
        name="no-force-push", event="PreToolUse",
        command=("/usr/local/bin/no-force-push.sh", "--strict"), tools=("bash", "exec"),
        timeout=10, sandbox=False, on_failure="continue"),)
    assert config.sandbox == SandboxSettings(
        writable=("~/.cache/pip", "/srv/build"), hidden=("~/secrets",),
        hide_defaults=False, protect=False, network=True, enabled=False,
        scrub=("GITHUB_TOKEN", "*_SECRET"),
        allow_unix_sockets=("~/.colima/default/docker.sock", "/run/user/1000/gnupg"))
    assert config.warnings == ()


def test_defaults_apply_to_keys_left_out(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '[[hooks]]\nname = "k"\nevent = "UserPromptSubmit"\n'
                           'command = ["python3", "/opt/k.py"]\n')
    (spec,) = load(path, project=str(project)).hooks
    assert spec == HookSpec(name="k", event="UserPromptSubmit",
                            command=("python3", "/opt/k.py"))
    assert (spec.tools, spec.timeout, spec.sandbox, spec.on_failure) == (
        None, 30, True, "block")
    assert load(path, project=str(project)).sandbox == SandboxSettings()


def test_hooks_keep_the_order_of_the_file(tmp_path: Path, project: Path) -> None:
    names = ["zeta", "alpha", "mid", "b_2", "a-1"]
    text = "".join(f'[[hooks]]\nname = "{n}"\nevent = "PreToolUse"\ncommand = ["/x"]\n'
                   for n in names)
    config = load(write(tmp_path, text), project=str(project))
    assert [h.name for h in config.hooks] == names


def test_the_harness_own_tables_are_not_errors(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '''
model = "big"
[mcp_servers.github]
command = "gh-mcp"
[skills]
extra_roots = ["~/skills"]
''' + HOOK)
    config = load(path, project=str(project))
    assert [h.name for h in config.hooks] == ["h"]


def test_a_name_of_32_characters_is_accepted(tmp_path: Path, project: Path) -> None:
    name = "a" * 30 + "-_"
    path = write(tmp_path, f'[[hooks]]\nname = "{name}"\nevent = "PreToolUse"\n'
                           'command = ["/x"]\n')
    assert load(path, project=str(project)).hooks[0].name == name


def test_timeout_bounds_are_accepted(tmp_path: Path, project: Path) -> None:
    for t in (1, 600):
        path = write(tmp_path, HOOK + f"timeout = {t}\n")
        assert load(path, project=str(project)).hooks[0].timeout == t


def test_an_empty_later_argument_is_kept(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '[[hooks]]\nname = "h"\nevent = "PreToolUse"\n'
                           'command = ["/x", ""]\n')
    assert load(path, project=str(project)).hooks[0].command == ("/x", "")


# -- warnings ------------------------------------------------------------------------------

def tools_warnings(tmp_path: Path, project: Path, tools: str) -> tuple[str, ...]:
    path = write(tmp_path, '[[hooks]]\nname = "no-force-push"\nevent = "PreToolUse"\n'
                           f'tools = {tools}\ncommand = ["/x"]\n')
    return load(path, project=str(project)).warnings


def test_a_capitalised_tool_name_warns_as_the_seed_says(tmp_path: Path,
                                                         project: Path) -> None:
    assert tools_warnings(tmp_path, project, '["Bash"]') == (
        '⚠ hook no-force-push lists "Bash", which is not a tool here; tool names are '
        'lower case, such as bash.',)


def test_a_claude_code_tool_name_warns_with_the_tool_meant_here(tmp_path: Path,
                                                                project: Path) -> None:
    assert tools_warnings(tmp_path, project, '["Read", "Grep"]') == (
        '⚠ hook no-force-push lists "Read", which is not a tool here; tool names are '
        'lower case, such as read_file.',
        '⚠ hook no-force-push lists "Grep", which is not a tool here; tool names are '
        'lower case, such as search.',
    )


def test_an_mcp_tool_name_warns_to_list_mcp(tmp_path: Path, project: Path) -> None:
    assert tools_warnings(tmp_path, project, '["mcp__github__create_issue"]') == (
        '⚠ hook no-force-push lists "mcp__github__create_issue", which is not a tool '
        "here; an MCP server's tools are called through the mcp tool, so list mcp.",)


def test_an_unknown_tool_name_warns_with_the_list_of_tools(tmp_path: Path,
                                                           project: Path) -> None:
    assert tools_warnings(tmp_path, project, '["bash", "frobnicate"]') == (
        '⚠ hook no-force-push lists "frobnicate", which is not a tool here; the tools '
        "are bash, exec, read_file, write_file, edit_file, glob, search, skill, agent, "
        "script, mcp, mcp_schema.",)


def test_an_unknown_tool_is_kept_so_a_later_harness_config_still_starts(
        tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '[[hooks]]\nname = "h"\nevent = "PreToolUse"\n'
                           'tools = ["future_tool"]\ncommand = ["/x"]\n')
    assert load(path, project=str(project)).hooks[0].tools == ("future_tool",)


def test_every_tool_here_is_accepted_without_a_warning(tmp_path: Path,
                                                       project: Path) -> None:
    tools = "[" + ", ".join(f'"{t}"' for t in TOOLS) + "]"
    assert tools_warnings(tmp_path, project, tools) == ()


# -- load errors, exact text ---------------------------------------------------------------

def test_toml_syntax_error_names_the_file_and_line(tmp_path: Path, project: Path) -> None:
    msg = error_of(tmp_path, project, '[[hooks]]\nname = "h"\nevent PreToolUse\n')
    assert msg == (f"{tmp_path}/cfg/config.toml: not valid TOML: Expected '=' after a key "
                   "in a key/value pair (at line 3, column 7).")


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path, project: Path) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "config.toml").write_bytes(b'name = "\xff"\n')
    with pytest.raises(ConfigError) as info:
        load(str(d / "config.toml"), project=str(project))
    assert str(info.value) == (f"{d}/config.toml: not valid TOML: the file is not UTF-8 "
                               "text.")


def test_a_folder_in_place_of_the_file_cannot_be_read(tmp_path: Path,
                                                      project: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(ConfigError) as info:
        load(str(tmp_path / "config.toml"), project=str(project))
    assert str(info.value) == f"{tmp_path}/config.toml: cannot be read: Is a directory."


def test_a_config_that_links_to_nothing_is_refused(tmp_path: Path, project: Path) -> None:
    (tmp_path / "config.toml").symlink_to(tmp_path / "gone.toml")
    with pytest.raises(ConfigError) as info:
        load(str(tmp_path / "config.toml"), project=str(project))
    assert str(info.value) == (f"{tmp_path}/config.toml: is a link to {tmp_path}/gone.toml, "
                               "which does not exist.")


@pytest.mark.parametrize(("text", "message"), [
    ('hooks = "x"\n', 'key "hooks": must be an array of tables ([[hooks]]), not a string.'),
    ('[hooks]\nname = "h"\n',
     'key "hooks": must be an array of tables ([[hooks]]), not a table.'),
    ("hooks = [1]\n",
     "hook #1: must be a table, not an integer; write each hook as a [[hooks]] table."),
])
def test_hooks_must_be_an_array_of_tables(tmp_path: Path, project: Path, text: str,
                                          message: str) -> None:
    assert error_of(tmp_path, project, text) == f"{tmp_path}/cfg/config.toml: {message}"


def test_a_missing_name_is_named_by_position(tmp_path: Path, project: Path) -> None:
    text = HOOK + '[[hooks]]\nevent = "PreToolUse"\ncommand = ["/x"]\n'
    assert error_of(tmp_path, project, text) == (
        f'{tmp_path}/cfg/config.toml: hook #2: key "name": missing; every hook needs a '
        'name of 1–32 of a-z, 0-9, "-", "_".')


@pytest.mark.parametrize(("name", "shown"), [
    ('"No-Force"', '"No-Force"'),
    ('"no force"', '"no force"'),
    ('""', '""'),
    ('"' + "a" * 33 + '"', '"' + "a" * 33 + '"'),
    ('"café"', '"café"'),
    ('"x\\n"', '"x\\n"'),
])
def test_a_malformed_name_is_refused(tmp_path: Path, project: Path, name: str,
                                     shown: str) -> None:
    text = f'[[hooks]]\nname = {name}\nevent = "PreToolUse"\ncommand = ["/x"]\n'
    assert error_of(tmp_path, project, text) == (
        f'{tmp_path}/cfg/config.toml: hook #1: key "name": {shown} is not a valid name; '
        'use 1–32 of a-z, 0-9, "-", "_".')


def test_a_name_that_is_not_a_string_is_refused(tmp_path: Path, project: Path) -> None:
    text = '[[hooks]]\nname = 7\nevent = "PreToolUse"\ncommand = ["/x"]\n'
    assert error_of(tmp_path, project, text) == (
        f'{tmp_path}/cfg/config.toml: hook #1: key "name": must be a string, not an '
        "integer.")


def test_a_duplicate_name_is_refused(tmp_path: Path, project: Path) -> None:
    other = '[[hooks]]\nname = "k"\nevent = "UserPromptSubmit"\ncommand = ["/y"]\n'
    assert error_of(tmp_path, project, HOOK + other + HOOK) == (
        f'{tmp_path}/cfg/config.toml: hook #3: key "name": "h" is also the name of hook '
        "#1; each hook needs its own name.")


def test_an_unknown_key_is_refused(tmp_path: Path, project: Path) -> None:
    assert error_of(tmp_path, project, HOOK + "retries = 3\n") == (
        f'{tmp_path}/cfg/config.toml: hook "h": unknown key "retries"; a hook\'s keys are '
        "name, event, tools, command, timeout, sandbox, on_failure.")


def test_matcher_is_refused_with_a_pointer_to_tools(tmp_path: Path, project: Path) -> None:
    assert error_of(tmp_path, project, HOOK + 'matcher = "Bash"\n') == (
        f'{tmp_path}/cfg/config.toml: hook "h": unknown key "matcher"; harness hooks '
        'choose tools with tools = ["bash", ...], not matcher.')


@pytest.mark.parametrize("key", ["type", "if"])
def test_claude_code_type_and_if_are_unknown_keys(tmp_path: Path, project: Path,
                                                  key: str) -> None:
    assert error_of(tmp_path, project, HOOK + f'{key} = "command"\n') == (
        f'{tmp_path}/cfg/config.toml: hook "h": unknown key "{key}"; a hook\'s keys are '
        "name, event, tools, command, timeout, sandbox, on_failure.")


@pytest.mark.parametrize(("line", "message"), [
    ('event = "PostToolUse"',
     'key "event": "PostToolUse" is not an event here; use "PreToolUse" or '
     '"UserPromptSubmit".'),
    ("event = 1", 'key "event": must be "PreToolUse" or "UserPromptSubmit", not an integer.'),
    ("", 'key "event": missing; use "PreToolUse" or "UserPromptSubmit".'),
])
def test_an_event_other_than_the_two_is_refused(tmp_path: Path, project: Path, line: str,
                                                message: str) -> None:
    text = f'[[hooks]]\nname = "h"\n{line}\ncommand = ["/x"]\n'
    assert hook_error(tmp_path, project, text) == message


@pytest.mark.parametrize(("line", "message"), [
    ("command = []", 'key "command": the list is empty; give the program and its '
                     'arguments, such as ["/path/to/hook.sh"].'),
    ("", 'key "command": missing; give the program and its arguments as a list, such as '
         '["/path/to/hook.sh"].'),
    ('command = "/x.sh --strict"',
     'key "command": must be a list of strings (an argv, run with no shell), not a '
     'string; write it as an argv: ["/x.sh", "--strict"].'),
    ('command = "jq -r .tool_input.command | tee -a ~/log"',
     'key "command": must be a list of strings (an argv, run with no shell), not a '
     'string; write it as an argv: ["/bin/sh", "-c", "jq -r .tool_input.command | tee -a '
     '~/log"].'),
    ('command = ["/x", 3]', 'key "command": element 2 must be a string, not an integer.'),
    ('command = ["", "/x"]', 'key "command": the program (the first element) is empty.'),
    ("command = {a = 1}", 'key "command": must be a list of strings, not a table.'),
])
def test_a_bad_command_is_refused(tmp_path: Path, project: Path, line: str,
                                  message: str) -> None:
    text = f'[[hooks]]\nname = "h"\nevent = "PreToolUse"\n{line}\n'
    assert hook_error(tmp_path, project, text) == message


def test_tools_on_a_prompt_hook_is_refused(tmp_path: Path, project: Path) -> None:
    text = ('[[hooks]]\nname = "k"\nevent = "UserPromptSubmit"\ntools = ["bash"]\n'
            'command = ["/x"]\n')
    assert error_of(tmp_path, project, text) == (
        f'{tmp_path}/cfg/config.toml: hook "k": key "tools": only a PreToolUse hook lists '
        "tools; a UserPromptSubmit hook runs for every prompt.")


@pytest.mark.parametrize(("line", "message"), [
    ('tools = "bash"', 'key "tools": must be a list of strings, not a string.'),
    ('tools = ["bash", true]', 'key "tools": element 2 must be a string, not a boolean.'),
    ("tools = []", 'key "tools": the list is empty; leave tools out to cover every tool.'),
])
def test_bad_tools_are_refused(tmp_path: Path, project: Path, line: str,
                               message: str) -> None:
    text = f'[[hooks]]\nname = "h"\nevent = "PreToolUse"\n{line}\ncommand = ["/x"]\n'
    assert hook_error(tmp_path, project, text) == message


@pytest.mark.parametrize(("value", "message"), [
    ("0", 'key "timeout": 0 is out of range; use whole seconds from 1 to 600.'),
    ("601", 'key "timeout": 601 is out of range; use whole seconds from 1 to 600.'),
    ("-5", 'key "timeout": -5 is out of range; use whole seconds from 1 to 600.'),
    ("2.5", 'key "timeout": must be whole seconds from 1 to 600, not a float.'),
    ("true", 'key "timeout": must be whole seconds from 1 to 600, not a boolean.'),
    ('"10"', 'key "timeout": must be whole seconds from 1 to 600, not a string.'),
])
def test_a_timeout_out_of_range_or_of_the_wrong_type_is_refused(
        tmp_path: Path, project: Path, value: str, message: str) -> None:
    assert hook_error(tmp_path, project, HOOK + f"timeout = {value}\n") == message


@pytest.mark.parametrize(("line", "message"), [
    ('sandbox = "no"', 'key "sandbox": must be true or false, not a string.'),
    ("sandbox = 0", 'key "sandbox": must be true or false, not an integer.'),
    ('on_failure = "ignore"',
     'key "on_failure": "ignore" is not allowed; use "block" or "continue".'),
    ("on_failure = false", 'key "on_failure": must be "block" or "continue", not a boolean.'),
])
def test_wrong_values_for_sandbox_and_on_failure_are_refused(
        tmp_path: Path, project: Path, line: str, message: str) -> None:
    assert hook_error(tmp_path, project, HOOK + line + "\n") == message


def test_the_error_carries_file_hook_and_key(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, HOOK + "timeout = 0\n")
    with pytest.raises(ConfigError) as info:
        load(path, project=str(project))
    assert (info.value.file, info.value.hook, info.value.key) == (path, "h", "timeout")


# -- [sandbox] -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("sandbox = true\n", 'key "sandbox": must be a table ([sandbox]), not a boolean.'),
    ("[sandbox]\nnetwrok = true\n",
     '[sandbox]: unknown key "netwrok"; the keys are writable, hidden, hide_defaults, '
     "protect, network, enabled, scrub, processes, memory, tmp_size, shm_size, "
     "allow_unix_sockets, allow_tool_configs, box."),
    ('[sandbox]\nallow_tool_configs = [".vscodee"]\n',
     '[sandbox]: key "allow_tool_configs": ".vscodee" is not a project config the box '
     "guards; the names are "
     + ", ".join(__import__("sandbox.policy.toolconfigs").policy.toolconfigs.NAMES)
     + "."),
    ('[sandbox]\nallow_tool_configs = ".vscode"\n',
     '[sandbox]: key "allow_tool_configs": must be a list of names, not a string.'),
    ('[sandbox]\nprocesses = "many"\n',
     '[sandbox]: key "processes": must be a whole number from 16 to 4194304, not a string.'),
    ("[sandbox]\nprocesses = 8\n",
     '[sandbox]: key "processes": 8 is out of range; use a whole number from 16 to 4194304.'),
    ("[sandbox]\nmemory = true\n",
     '[sandbox]: key "memory": must be a size such as 512M, 8G or 50% (of the machine\'s '
     "memory), not a boolean."),
    ('[sandbox]\ntmp_size = "lots"\n',
     '[sandbox]: key "tmp_size": "lots" is not a size; write bytes, or a number with K, M, '
     "G or T, or a percentage of the machine's memory such as 50%."),
    ('[sandbox]\nshm_size = "150%"\n',
     '[sandbox]: key "shm_size": 150% is not a percentage from 1% to 100%.'),
    ("[sandbox]\nmemory = 512\n",
     '[sandbox]: key "memory": 512 is below 1M, too small for any command.'),
    ('[sandbox]\nallow_unix_sockets = "/var/run/docker.sock"\n',
     '[sandbox]: key "allow_unix_sockets": must be a list of paths, not a string.'),
    ('[sandbox]\nallow_unix_sockets = ["run/agent.sock"]\n',
     '[sandbox]: key "allow_unix_sockets": "run/agent.sock" is not an absolute path; '
     "write it from / or ~/."),
    ('[sandbox]\nscrub = "GITHUB_TOKEN"\n',
     '[sandbox]: key "scrub": must be a list of environment names, not a string.'),
    ("[sandbox]\nscrub = [7]\n",
     '[sandbox]: key "scrub": element 1 must be a string, not an integer.'),
    ('[sandbox]\nscrub = ["MY TOKEN"]\n',
     '[sandbox]: key "scrub": "MY TOKEN" is not an environment name; use letters, digits '
     "and _, with * or ? for any characters."),
    ('[sandbox]\nwritable = "/srv"\n',
     '[sandbox]: key "writable": must be a list of paths, not a string.'),
    ("[sandbox]\nhidden = [1]\n",
     '[sandbox]: key "hidden": element 1 must be a string, not an integer.'),
    ('[sandbox]\nwritable = ["build"]\n',
     '[sandbox]: key "writable": "build" is not an absolute path; write it from / or ~/.'),
    ('[sandbox]\nhidden = ["~user/x"]\n',
     '[sandbox]: key "hidden": "~user/x" is not an absolute path; write it from / or ~/.'),
    ('[sandbox]\nnetwork = "yes"\n',
     '[sandbox]: key "network": must be true, false or a list of host names, not a string.'),
    ("[sandbox]\nnetwork = [443]\n",
     '[sandbox]: key "network": element 1 must be a string, not an integer.'),
    ('[sandbox]\nnetwork = ["pypi.org:http"]\n',
     "[sandbox]: key \"network\": element 1: 'pypi.org:http': the port must be a number "
     "from 1 to 65535; write a host name, *.name or an address, with :port if not 80 and "
     "443."),
    ('[sandbox]\nnetwork = ["https://pypi.org"]\n',
     "[sandbox]: key \"network\": element 1: 'https://pypi.org' is a URL or a path; write "
     "the host name alone; write a host name, *.name or an address, with :port if not 80 "
     "and 443."),
    ('[sandbox]\nnetwork = ["*.10.0.0.1"]\n',
     "[sandbox]: key \"network\": element 1: '*.10.0.0.1': *. goes before a name, not an "
     "address; write a host name, *.name or an address, with :port if not 80 and 443."),
    ("[sandbox]\nenabled = 0\n",
     '[sandbox]: key "enabled": must be true or false, not an integer.'),
    ("[sandbox]\nhide_defaults = []\n",
     '[sandbox]: key "hide_defaults": must be true or false, not a list.'),
    ("[sandbox]\nprotect = 1.0\n",
     '[sandbox]: key "protect": must be true or false, not a float.'),
])
def test_sandbox_table_errors_name_the_key(tmp_path: Path, project: Path, text: str,
                                           message: str) -> None:
    assert error_of(tmp_path, project, text) == f"{tmp_path}/cfg/config.toml: {message}"


def test_sandbox_limits_are_read_as_written(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '[sandbox]\nprocesses = 512\nmemory = "2G"\ntmp_size = 1073741824\n'
                           'shm_size = "10%"\n')
    got = load(path, project=str(project)).sandbox
    assert (got.processes, got.memory, got.tmp_size, got.shm_size) == (512, "2G", 1 << 30,
                                                                       "10%")


def test_sandbox_home_paths_are_kept_as_written(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '[sandbox]\nwritable = ["~", "~/x"]\n')
    assert load(path, project=str(project)).sandbox.writable == ("~", "~/x")


# -- a config inside the project -------------------------------------------------------

def inside_message(file: str, project: Path, suffix: str) -> str:
    return (f"{file}: this config is inside the project ({project}), so the agent could "
            "change it; its hooks and sandbox settings are refused. Keep the user config "
            f"outside the project{suffix}")


def test_a_config_in_the_project_found_through_harness_home_is_refused(
        project: Path) -> None:
    (project / ".harness").mkdir()
    (project / ".harness" / "config.toml").write_text(HOOK)
    found = locate({"HARNESS_HOME": str(project / ".harness")})
    assert found is not None
    with pytest.raises(ConfigError) as info:
        load(found.path, project=str(project), source=found.source)
    assert str(info.value) == inside_message(
        f"{project}/.harness/config.toml", project,
        " (it was found through HARNESS_HOME).")


def test_a_config_in_the_project_found_through_xdg_is_refused(project: Path) -> None:
    (project / "x" / "harness").mkdir(parents=True)
    (project / "x" / "harness" / "config.toml").write_text("")
    found = locate({"XDG_CONFIG_HOME": str(project / "x")})
    assert found is not None
    with pytest.raises(ConfigError) as info:
        load(found.path, project=str(project), source=found.source)
    assert str(info.value) == inside_message(
        f"{project}/x/harness/config.toml", project,
        " (it was found through XDG_CONFIG_HOME).")


def test_a_project_that_holds_the_home_folder_refuses_its_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "harness").mkdir(parents=True)
    (home / ".config" / "harness" / "config.toml").write_text(HOOK)
    found = locate({"HOME": str(home)})
    assert found is not None
    with pytest.raises(ConfigError) as info:
        load(found.path, project=str(home), source=found.source)
    assert str(info.value) == inside_message(
        f"{home}/.config/harness/config.toml", home,
        " (it was found under your home folder; set HARNESS_HOME to a folder outside "
        "the project).")


def test_the_rule_holds_for_a_config_named_on_the_command_line(project: Path) -> None:
    (project / "my.toml").write_text(HOOK)
    found = locate({}, explicit=str(project / "my.toml"))
    assert found is not None
    with pytest.raises(ConfigError) as info:
        load(found.path, project=str(project), source=found.source)
    assert str(info.value) == inside_message(f"{project}/my.toml", project,
                                             " (--config names it).")


def test_a_config_inside_the_project_is_refused_without_a_source(project: Path) -> None:
    (project / "c.toml").write_text("")
    with pytest.raises(ConfigError) as info:
        load(str(project / "c.toml"), project=str(project))
    assert str(info.value) == inside_message(f"{project}/c.toml", project, ".")


def test_a_config_folder_that_links_into_the_project_is_refused(tmp_path: Path,
                                                                project: Path) -> None:
    (project / "cfg").mkdir()
    (project / "cfg" / "config.toml").write_text(HOOK)
    (tmp_path / "harness").symlink_to(project / "cfg")
    path = str(tmp_path / "harness" / "config.toml")
    with pytest.raises(ConfigError) as info:
        load(path, project=str(project))
    assert str(info.value) == inside_message(path, project, ".")


def test_a_config_file_that_links_into_the_project_is_refused(tmp_path: Path,
                                                              project: Path) -> None:
    (project / "config.toml").write_text(HOOK)
    (tmp_path / "config.toml").symlink_to(project / "config.toml")
    path = str(tmp_path / "config.toml")
    with pytest.raises(ConfigError) as info:
        load(path, project=str(project))
    assert str(info.value) == inside_message(path, project, ".")


def test_a_project_reached_through_a_link_still_holds_its_config(tmp_path: Path,
                                                                 project: Path) -> None:
    (project / "config.toml").write_text(HOOK)
    (tmp_path / "via").symlink_to(project)
    # The project named through the link, the config through the real folder.
    with pytest.raises(ConfigError) as info:
        load(str(project / "config.toml"), project=str(tmp_path / "via"))
    assert str(info.value) == inside_message(f"{project}/config.toml", tmp_path / "via",
                                             ".")


def test_a_config_whose_name_merely_starts_like_the_project_is_outside(
        tmp_path: Path, project: Path) -> None:
    sibling = tmp_path / "proj-config"
    sibling.mkdir()
    (sibling / "config.toml").write_text(HOOK)
    assert load(str(sibling / "config.toml"), project=str(project)).hooks[0].name == "h"


def test_a_missing_config_inside_the_project_is_no_hooks(project: Path) -> None:
    assert load(str(project / "none.toml"), project=str(project)) == Config(path=None)


# -- the banner ----------------------------------------------------------------------------

def spec(name: str, event: str = "PreToolUse", tools: tuple[str, ...] | None = None,
         sandbox: bool = True) -> HookSpec:
    return HookSpec(name=name, event=event, command=("/x",), tools=tools,  # type: ignore[arg-type]
                    sandbox=sandbox)


def test_the_banner_lists_the_hooks_as_the_seed_shows() -> None:
    config = Config(path="/c", hooks=(
        spec("no-force-push", tools=("bash", "exec")),
        spec("keywords", event="UserPromptSubmit"),
        spec("notify", sandbox=False),
    ))
    assert banner(config) == ("hooks: no-force-push (bash, exec) · keywords (prompts) · "
                              "notify (every tool, on the host)")


def test_the_banner_says_off_under_no_hooks() -> None:
    config = Config(path="/c", hooks=(spec("a"),))
    assert banner(config, no_hooks=True) == "hooks: off (--no-hooks)"


def test_the_banner_says_none_without_hooks() -> None:
    assert banner(Config(path=None)) == "hooks: none"
    assert banner(Config(path="/c")) == "hooks: none"


def test_every_hook_is_on_the_host_in_a_session_without_a_sandbox() -> None:
    config = Config(path="/c", hooks=(spec("keywords", event="UserPromptSubmit"),
                                      spec("a", tools=("bash",))))
    expected = "hooks: keywords (prompts, on the host) · a (bash, on the host)"
    assert banner(config, boxed=False) == expected
    off = Config(path="/c", hooks=config.hooks, sandbox=SandboxSettings(enabled=False))
    assert banner(off) == expected


def test_the_banner_reads_a_loaded_config(tmp_path: Path, project: Path) -> None:
    path = write(tmp_path, '''
[[hooks]]
name = "no-force-push"
event = "PreToolUse"
tools = ["bash", "exec"]
command = ["/a"]
[[hooks]]
name = "keywords"
event = "UserPromptSubmit"
command = ["/b"]
[[hooks]]
name = "notify"
event = "PreToolUse"
command = ["/c"]
sandbox = false
''')
    assert banner(load(path, project=str(project))) == (
        "hooks: no-force-push (bash, exec) · keywords (prompts) · notify (every tool, on "
        "the host)")
