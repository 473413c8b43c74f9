"""openHarness ``.oh/config.yaml``: what a file may hold (every load error by its exact
text), and which hooks a ``match`` picks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.oh_files import config, error_of, write

from launchers import openharness as oh
from launchers.openharness import EVENTS, Context, OhConfigError

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


# -- loading: what a file may hold -----------------------------------------------------


def test_every_documented_event_loads(tmp_path: Path) -> None:
    text = "hooks:\n" + "".join(f"  {e}:\n    - command: /bin/true\n" for e in EVENTS)
    cfg = config(tmp_path, text)
    assert len(EVENTS) == 17
    assert [h.label for h in cfg.all_hooks()] == [f"{e}[0]" for e in EVENTS]


def test_defaults_are_env_mode_ten_seconds_on_the_host(tmp_path: Path) -> None:
    (hook,) = config(tmp_path, "hooks:\n  preToolUse:\n    - command: /bin/true\n").all_hooks()
    assert (hook.json_io, hook.timeout_ms, hook.sandbox, hook.match) == (False, 10000, False, None)


def test_every_key_is_read(tmp_path: Path) -> None:
    text = (
        "model: anthropic/claude\nhooks:\n  preToolUse:\n"
        "    - command: /bin/true\n      jsonIO: true\n      match: Bash\n"
        "      timeout: 250\n      sandbox: true\n"
        "    - http: http://127.0.0.1:9/hook\n"
    )
    a, b = config(tmp_path, text).for_event("preToolUse")
    assert (a.command, a.json_io, a.match, a.timeout_ms, a.sandbox) == (
        "/bin/true", True, "Bash", 250, True)
    assert (b.http, b.command, b.label) == ("http://127.0.0.1:9/hook", None, "preToolUse[1]")


def test_a_file_without_hooks_has_none(tmp_path: Path) -> None:
    assert list(config(tmp_path, "model: x\n").all_hooks()) == []
    assert list(config(tmp_path, "").all_hooks()) == []
    assert list(config(tmp_path, "hooks:\n  preToolUse:\n").all_hooks()) == []


def test_unknown_key_names_file_event_and_index(tmp_path: Path) -> None:
    text = (
        "hooks:\n  preToolUse:\n    - command: /bin/true\n    - command: /bin/true\n"
        "    - command: /bin/true\n      foo: 1\n"
    )
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == f'{path}: hooks.preToolUse[2]: unknown key "foo"'


def test_relative_file_name_is_kept_as_given(tmp_path: Path) -> None:
    write(tmp_path, "hooks:\n  preToolUse:\n    - command: /bin/true\n      foo: 1\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(OhConfigError) as info:
            oh.load(".oh/config.yaml")
    finally:
        os.chdir(cwd)
    assert str(info.value) == '.oh/config.yaml: hooks.preToolUse[0]: unknown key "foo"'
    assert (info.value.file, info.value.event, info.value.index) == (
        ".oh/config.yaml", "preToolUse", 0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("command: /bin/true\n      http: http://x/",
         "has both command and http; give exactly one"),
        ("jsonIO: true", "needs command or http"),
        ("command: ['/bin/true']", "command must be a string (a shell command)"),
        ("command: '  '", "command is empty"),
        ("command: \"echo 'unclosed\"", "command cannot be split into words: No closing quotation"),
        ("http: 5", "http must be a URL string"),
        ("http: ftp://x/h", 'http must be an http:// or https:// URL, not "ftp://x/h"'),
        ("http: x", 'http must be an http:// or https:// URL, not "x"'),
        ("command: /bin/true\n      jsonIO: 'yes please'", "jsonIO must be true or false"),
        ("command: /bin/true\n      sandbox: 1", "sandbox must be true or false"),
        ("http: http://x/\n      sandbox: true", "sandbox applies to command hooks only"),
        ("command: /bin/true\n      timeout: 0",
         "timeout must be a whole number of milliseconds greater than 0"),
        ("command: /bin/true\n      timeout: -5",
         "timeout must be a whole number of milliseconds greater than 0"),
        ("command: /bin/true\n      timeout: 5s",
         "timeout must be a whole number of milliseconds greater than 0"),
        ("command: /bin/true\n      timeout: 1.5",
         "timeout must be a whole number of milliseconds greater than 0"),
        ("command: /bin/true\n      timeout: true",
         "timeout must be a whole number of milliseconds greater than 0"),
        ("command: /bin/true\n      match: 3", "match must be a string"),
        ("command: /bin/true\n      match: ''", "match is empty"),
        ("command: /bin/true\n      match: '/[a/'",
         'match "/[a/" is not a valid regular expression: '
         "unterminated character set at position 0"),
    ],
)
def test_hook_errors_have_exact_texts(tmp_path: Path, entry: str, message: str) -> None:
    text = f"hooks:\n  preToolUse:\n    - {entry}\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == f"{path}: hooks.preToolUse[0]: {message}"


def test_an_entry_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    text = "hooks:\n  userPromptSubmit:\n    - /bin/true\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f"{path}: hooks.userPromptSubmit[0]: must be a mapping with command or http")


def test_match_on_an_event_without_a_tool_is_an_error(tmp_path: Path) -> None:
    text = "hooks:\n  sessionStart:\n    - command: /bin/true\n      match: Bash\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f"{path}: hooks.sessionStart[0]: match applies only to tool events "
        "(preToolUse, postToolUse, postToolUseFailure, permissionRequest, fileChanged)")


def test_unknown_event_close_to_a_known_one_suggests_it(tmp_path: Path) -> None:
    text = "hooks:\n  PreToolUse:\n    - command: /bin/true\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f'{path}: hooks.PreToolUse: unknown event "PreToolUse" (did you mean preToolUse?)')


def test_unknown_event_lists_the_events(tmp_path: Path) -> None:
    text = "hooks:\n  onSave:\n    - command: /bin/true\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f'{path}: hooks.onSave: unknown event "onSave"; the events are ' + ", ".join(EVENTS))


def test_event_that_is_not_a_list_is_an_error(tmp_path: Path) -> None:
    text = "hooks:\n  preToolUse:\n    command: /bin/true\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == f"{path}: hooks.preToolUse: must be a list of hooks"


def test_hooks_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    text = "hooks:\n  - command: /bin/true\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f"{path}: hooks must be a mapping of event names to lists of hooks")


def test_a_file_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    assert error_of(tmp_path, "- a\n- b\n") == (
        f"{path}: must be a YAML mapping (with a hooks: key)")


def test_a_repeated_event_is_an_error_not_a_silent_drop(tmp_path: Path) -> None:
    text = (
        "hooks:\n  preToolUse:\n    - command: /bin/true\n"
        "  preToolUse:\n    - command: /bin/false\n"
    )
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f'{path}: not valid YAML: duplicate key "preToolUse" (line 4, column 3)')


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    text = "hooks:\n  preToolUse:\n    - command: [oops\n"
    path = write(tmp_path, text)
    assert error_of(tmp_path, text) == (
        f"{path}: not valid YAML: expected ',' or ']', but got '<stream end>' "
        "(line 4, column 1)")


def test_yaml_tags_that_build_objects_are_refused(tmp_path: Path) -> None:
    text = "hooks: !!python/object/apply:os.system ['true']\n"
    message = error_of(tmp_path, text)
    assert "not valid YAML: could not determine a constructor for the tag" in message


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(OhConfigError) as info:
        oh.load(path)
    assert str(info.value) == f"{path}: cannot read: No such file or directory"


# -- match ----------------------------------------------------------------------------


def test_a_plain_match_is_a_substring() -> None:
    assert oh.match_tool("Bash", "Bash")
    assert oh.match_tool("Bash", "BashOutput")
    assert not oh.match_tool("Bash", "bash")
    assert not oh.match_tool("Bash", "Read")


def test_a_match_with_glob_characters_is_a_glob_over_the_whole_name() -> None:
    assert oh.match_tool("File*", "FileRead")
    assert oh.match_tool("File*", "File")
    assert not oh.match_tool("File*", "ReadFile")
    assert oh.match_tool("Fil?Edit", "FileEdit")
    assert oh.match_tool("[BR]ash", "Rash")


def test_a_slashed_match_is_a_regex_search() -> None:
    assert oh.match_tool("/mcp__.*/", "mcp__github__create_issue")
    assert oh.match_tool("/mcp__.*/", "x_mcp__y")
    assert not oh.match_tool("/mcp__.*/", "Bash")
    assert oh.match_tool("/^(Bash|Edit)$/", "Edit")
    assert not oh.match_tool("/^(Bash|Edit)$/", "BashOutput")


def test_match_picks_which_hooks_run(tmp_path: Path, runner: oh.CommandRunner) -> None:
    text = (
        "hooks:\n  preToolUse:\n"
        "    - command: /bin/true\n      match: Bash\n"
        "    - command: /bin/true\n      match: File*\n"
        "    - command: /bin/true\n      match: /mcp__.*/\n"
        "    - command: /bin/true\n"
    )
    cfg = config(tmp_path, text)

    def ran(tool: str) -> tuple[str, ...]:
        return oh.fire(cfg, "preToolUse", Context(tool_name=tool), runner=runner).ran

    assert ran("Bash") == ("preToolUse[0]", "preToolUse[3]")
    assert ran("BashOutput") == ("preToolUse[0]", "preToolUse[3]")
    assert ran("FileWrite") == ("preToolUse[1]", "preToolUse[3]")
    assert ran("ReadFile") == ("preToolUse[3]",)
    assert ran("mcp__github__x") == ("preToolUse[2]", "preToolUse[3]")
