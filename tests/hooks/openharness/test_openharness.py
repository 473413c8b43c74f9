"""openHarness hooks: the .oh/config.yaml loader (exact error texts), the OH_* variables,
the exit-status gates, JSON-I/O and HTTP modes against real processes and a real HTTP
server, match, the merge rules, the box, the path guard, and the hook command."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers.trusting import data_home, trust_file

from launchers import openharness as oh
from launchers.cli.hook_openharness import cmd_hook_openharness, describe
from launchers.cli.main import main, parser
from launchers.openharness import (
    EVENTS,
    TOOL_EVENTS,
    Context,
    OhConfig,
    OhConfigError,
    Result,
)
from launchers.openharness.answers import PROMPT_BLOCKED
from sandbox.errors import SandboxUnavailable
from sandbox.policy import Policy
from sandbox.session import Session

# -- set-up ---------------------------------------------------------------------------


@pytest.fixture
def policy(tmp_path: Path, project: Path) -> Policy:
    private = tmp_path / "private-tmp"
    private.mkdir()
    return Policy.create(str(project), private_tmp=str(private))


@pytest.fixture
def session(project: Path) -> Iterator[Session]:
    """A session with the box, whose environment holds a provider key (which no hook
    may receive)."""
    with Session.open(str(project), env=dict(os.environ, ANTHROPIC_API_KEY="sk-ant-secret")
                      ) as s:
        yield s


@pytest.fixture
def runner(session: Session) -> oh.CommandRunner:
    """The runner a session uses: host hooks from /, boxed ones in its box."""
    return oh.session_runner(session)


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test has a trust store of its own; :func:`write` trusts what it writes."""
    with data_home(monkeypatch) as d:
        yield d


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> str:
    d = tmp_path / ".oh"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text(text, encoding="utf-8")
    trust_file(f)
    return str(f)


def config(tmp_path: Path, text: str) -> OhConfig:
    return oh.load(write(tmp_path, text))


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(OhConfigError) as info:
        oh.load(path)
    return str(info.value)


def q(text: str) -> str:
    """``text`` as a single-quoted YAML scalar."""
    return "'" + text.replace("'", "''") + "'"


def one_hook(event: str, command: str, extra: str = "") -> str:
    return f"hooks:\n  {event}:\n    - command: {q(command)}\n{extra}"


def ctx_for(event: str, **kw: Any) -> Context:
    if event in TOOL_EVENTS:
        kw.setdefault("tool_name", "Bash")
    return Context(**kw)


def read_env(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition("=")
        out[name] = value
    return out


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


# -- env mode: the exit-status gates --------------------------------------------------

GATES: dict[str, tuple[str | None, str | None]] = {
    "preToolUse": ("allow", "deny"),
    "userPromptSubmit": ("allow", "deny"),
    "permissionRequest": ("ask", "deny"),
}


@pytest.mark.parametrize("code", [0, 3])
@pytest.mark.parametrize("event", EVENTS)
def test_env_mode_exit_status_gates_as_the_table_says(
    tmp_path: Path, runner: oh.CommandRunner, event: str, code: int
) -> None:
    marker = tmp_path / "ran"
    cfg = config(tmp_path, one_hook(event, f"echo $OH_EVENT > {marker}; exit {code}"))
    result = oh.fire(cfg, event, ctx_for(event), runner=runner)
    expected = GATES.get(event, (None, None))[0 if code == 0 else 1]
    assert result.decision == expected
    assert result.ran == (f"{event}[0]",)
    assert marker.read_text() == f"{event}\n"
    if expected is None:
        assert result.reason is None


def test_a_denied_prompt_gets_the_generic_message(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("userPromptSubmit", "echo secret detail >&2; exit 1"))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="hi"), runner=runner)
    assert (result.decision, result.reason) == (
        "deny", "prompt blocked by hook userPromptSubmit[0]")
    assert PROMPT_BLOCKED.format(label="userPromptSubmit[0]") == result.reason


def test_a_denied_tool_call_gives_the_hooks_stderr_as_reason(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("preToolUse", "echo '  no rm -rf here ' >&2; exit 2"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "no rm -rf here")


def test_a_silent_deny_names_the_hook_and_code(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, one_hook("permissionRequest", "exit 7"))
    result = oh.fire(cfg, "permissionRequest", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "deny", "hook permissionRequest[0] exited with code 7", "permissionRequest[0]")


def test_a_failing_notify_hook_is_ignored_with_a_warning(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("postToolUseFailure", "exit 4"))
    result = oh.fire(cfg, "postToolUseFailure", Context(tool_name="Bash"), runner=runner)
    assert result.decision is None
    assert result.warnings == ("hook postToolUseFailure[0] failed (exited with code 4)",)


def test_a_gating_hook_that_times_out_denies(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, one_hook("preToolUse", "sleep 30", "      timeout: 300\n"))
    start = time.monotonic()
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert time.monotonic() - start < 5
    assert (result.decision, result.reason) == (
        "deny", "hook preToolUse[0] failed (timed out after 300 ms)")
    assert result.warnings == ("hook preToolUse[0] failed (timed out after 300 ms)",)


def test_a_notify_hook_that_times_out_changes_nothing(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook("sessionEnd", "sleep 30", "      timeout: 200\n"))
    result = oh.fire(cfg, "sessionEnd", Context(), runner=runner)
    assert result.decision is None
    assert result.warnings == ("hook sessionEnd[0] failed (timed out after 200 ms)",)


# -- env mode: the variables ----------------------------------------------------------

COMMON = {"OH_EVENT", "OH_SESSION_ID", "OH_MODEL", "OH_PROVIDER", "OH_PERMISSION_MODE"}
TOOL_VARS = {"OH_TOOL_NAME", "OH_TOOL_ARGS", "OH_TOOL_OUTPUT", "OH_TOOL_INPUT_JSON"}
EXPECTED_VARS: dict[str, set[str]] = {
    "preToolUse": TOOL_VARS,
    "postToolUse": TOOL_VARS,
    "postToolUseFailure": TOOL_VARS | {"OH_TOOL_ERROR", "OH_ERROR_MESSAGE"},
    "permissionRequest": TOOL_VARS | {"OH_PERMISSION_ACTION"},
    "fileChanged": TOOL_VARS,
    "userPromptSubmit": {"OH_PROMPT"},
    "turnStart": {"OH_TURN_NUMBER"},
    "turnStop": {"OH_TURN_NUMBER", "OH_TURN_REASON"},
}


@pytest.mark.parametrize("event", EVENTS)
def test_each_event_sets_its_oh_variables(
    tmp_path: Path, runner: oh.CommandRunner, event: str
) -> None:
    dump = tmp_path / "env"
    cfg = config(tmp_path, one_hook(event, f"env > {dump}"))
    ctx = Context(
        session_id="s-1", model="anthropic/claude-opus-4-7", provider="anthropic",
        permission_mode="ask", tool_name="Bash", tool_input={"command": "ls -l"},
        tool_output="out", error_message="boom", prompt="hello", permission_action="ask",
        turn_number=4, turn_reason="max_turns",
    )
    oh.fire(cfg, event, ctx, runner=runner)
    env = read_env(dump)
    got = {k for k in env if k.startswith("OH_")}
    assert got == COMMON | EXPECTED_VARS.get(event, set())
    assert env["OH_EVENT"] == event
    assert (env["OH_SESSION_ID"], env["OH_MODEL"], env["OH_PROVIDER"],
            env["OH_PERMISSION_MODE"]) == ("s-1", "anthropic/claude-opus-4-7", "anthropic", "ask")
    if event in TOOL_EVENTS:
        assert env["OH_TOOL_NAME"] == "Bash"
        assert json.loads(env["OH_TOOL_INPUT_JSON"]) == {"command": "ls -l"}
        assert json.loads(env["OH_TOOL_ARGS"]) == {"command": "ls -l"}
        assert env["OH_TOOL_OUTPUT"] == "out"
    if event == "postToolUseFailure":
        assert (env["OH_TOOL_ERROR"], env["OH_ERROR_MESSAGE"]) == ("true", "boom")
    if event == "permissionRequest":
        assert env["OH_PERMISSION_ACTION"] == "ask"
    if event in ("turnStart", "turnStop"):
        assert env["OH_TURN_NUMBER"] == "4"
    if event == "turnStop":
        assert env["OH_TURN_REASON"] == "max_turns"
    if event == "userPromptSubmit":
        assert env["OH_PROMPT"] == "hello"


def test_oh_prompt_is_cut_at_8192_bytes_without_splitting_a_character(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    count = tmp_path / "count"
    seen = tmp_path / "envelope"
    cfg = config(tmp_path, one_hook(
        "userPromptSubmit", f'printf %s "$OH_PROMPT" | wc -c > {count}; cat > {seen}',
        "      jsonIO: true\n"))
    # 8,191 ASCII bytes, then a 2-byte character across the 8,192 boundary.
    prompt = "a" * 8191 + "é" + "tail"
    oh.fire(cfg, "userPromptSubmit", Context(prompt=prompt), runner=runner)
    assert int(count.read_text()) == 8191
    # The JSON envelope carries the whole prompt.
    assert json.loads(seen.read_text())["prompt"] == prompt


def test_cut_utf8_keeps_a_character_that_ends_on_the_limit() -> None:
    assert oh.cut_utf8("a" * 8190 + "é" + "zzz", 8192) == "a" * 8190 + "é"
    assert oh.cut_utf8("a" * 8191 + "é", 8192) == "a" * 8191
    assert oh.cut_utf8("a" * 8189 + "€x", 8192) == "a" * 8189 + "€"
    assert oh.cut_utf8("a" * 8190 + "€", 8192) == "a" * 8190
    assert oh.cut_utf8("short", 8192) == "short"
    assert oh.cut_utf8("nul\0here", 8192) == "nulhere"


def test_a_host_hook_runs_from_root_without_provider_keys(
    tmp_path: Path, project: Path
) -> None:
    private = tmp_path / "p2"
    private.mkdir()
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-secret", MY_API_KEY="k")
    out = tmp_path / "out"
    keys = "${ANTHROPIC_API_KEY:-none}${MY_API_KEY:-none}"
    cfg = config(tmp_path, one_hook("sessionStart", f'pwd > {out}; echo "{keys}" >> {out}'))
    with Session.open(str(project), env=env) as session:
        oh.fire(cfg, "sessionStart", Context(), runner=oh.session_runner(session))
    assert out.read_text() == "/\nnonenone\n"


# -- JSON-I/O mode --------------------------------------------------------------------


def json_hook(event: str, answer: dict[str, Any] | str, extra: str = "") -> str:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return one_hook(event, f"cat > /dev/null; printf '%s' {shlex.quote(text)}",
                    "      jsonIO: true\n" + extra)


def test_json_mode_receives_the_camelcase_envelope(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    seen = tmp_path / "seen"
    cfg = config(tmp_path, one_hook("preToolUse", f"cat > {seen}", "      jsonIO: true\n"))
    ctx = Context(session_id="s-9", model="m", provider="p", permission_mode="ask",
                  cwd="/work/proj", tool_name="Bash", tool_input={"command": "ls"})
    oh.fire(cfg, "preToolUse", ctx, runner=runner)
    assert json.loads(seen.read_text()) == {
        "event": "preToolUse", "toolName": "Bash", "toolInput": {"command": "ls"},
        "sessionId": "s-9", "model": "m", "provider": "p", "permissionMode": "ask",
        "cwd": "/work/proj",
    }


def test_json_mode_prompt_envelope(tmp_path: Path, runner: oh.CommandRunner) -> None:
    seen = tmp_path / "seen"
    cfg = config(tmp_path, one_hook("userPromptSubmit", f"cat > {seen}", "      jsonIO: true\n"))
    oh.fire(cfg, "userPromptSubmit", Context(prompt="the user's prompt text", session_id="s",
                                             model="m", provider="p", permission_mode="ask"),
            runner=runner)
    assert json.loads(seen.read_text()) == {
        "event": "userPromptSubmit", "prompt": "the user's prompt text", "sessionId": "s",
        "model": "m", "provider": "p", "permissionMode": "ask",
    }


def test_json_mode_deny_with_reason(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", {"decision": "deny", "reason": "nope"}))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "nope")


def test_json_mode_specific_deny_as_in_the_gate_bash_example(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    answer = {"hookSpecificOutput": {"decision": "deny", "reason": "Bash is disabled by policy"}}
    cfg = config(tmp_path, json_hook("permissionRequest", answer, '      match: "Bash"\n'))
    result = oh.fire(cfg, "permissionRequest", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "Bash is disabled by policy")
    other = oh.fire(cfg, "permissionRequest", Context(tool_name="Read"), runner=runner)
    assert (other.decision, other.ran) == (None, ())


def test_json_mode_additional_context(tmp_path: Path, runner: oh.CommandRunner) -> None:
    text = "[system: always respond in under 200 words unless asked otherwise]"
    cfg = config(tmp_path, json_hook(
        "userPromptSubmit", {"hookSpecificOutput": {"additionalContext": text}}))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="hi"), runner=runner)
    assert (result.decision, result.additional_context) == (None, text)


@pytest.mark.parametrize("output", ["not json", "", "[1, 2]", '"deny"', '{"decision": '])
def test_json_mode_malformed_output_is_an_empty_answer(
    tmp_path: Path, runner: oh.CommandRunner, output: str
) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", output))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.ran) == (None, ("preToolUse[0]",))


def test_json_mode_unknown_fields_are_ignored(tmp_path: Path, runner: oh.CommandRunner) -> None:
    cfg = config(tmp_path, json_hook("preToolUse", {"decision": "allow", "x": {"y": 1}}))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert result.decision == "allow"


def test_json_mode_nonzero_exit_denies_whatever_it_printed(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, one_hook(
        "preToolUse", 'cat >/dev/null; echo \'{"decision":"allow"}\'; exit 1',
        "      jsonIO: true\n"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.reason) == ("deny", "hook preToolUse[0] exited with code 1")


def test_json_mode_answers_on_a_notify_event_change_nothing(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    cfg = config(tmp_path, json_hook("postToolUse", {"decision": "deny"}))
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.ran) == (None, ("postToolUse[0]",))


def test_parse_answer_reads_every_field() -> None:
    a = oh.parse_answer(json.dumps({
        "decision": "allow", "reason": "r",
        "hookSpecificOutput": {"decision": "ask", "reason": "  why  ", "additionalContext": "c"},
    }))
    assert a == oh.OhAnswer("ask", "why", "c")
    assert oh.parse_answer('{"allowed": false}') == oh.OhAnswer("deny", None, None)
    assert oh.parse_answer('{"reason": "' + "x" * 3000 + '", "decision": "deny"}') == (
        oh.OhAnswer("deny", "x" * 2000, None))
    assert oh.parse_answer("{}") == oh.OhAnswer("none")
    assert oh.parse_answer("nope") is None


# -- HTTP mode ------------------------------------------------------------------------


class Server:
    """A real HTTP server on 127.0.0.1 whose answers are picked by path."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                server.requests.append((self.path, dict(self.headers.items()), body))
                # The client may have given up (the slow paths).
                with contextlib.suppress(OSError):
                    server.answer(self, self.path)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    @staticmethod
    def reply(h: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    # Paths that answer with a fixed status and body.
    FIXED: ClassVar[dict[str, tuple[int, bytes]]] = {
        "/allow": (200, b'{"decision": "allow"}'),
        "/deny": (200, b'{"decision": "deny", "reason": "policy says no"}'),
        "/ask": (200, b'{"hookSpecificOutput": {"decision": "ask"}}'),
        "/context": (201, b'{"hookSpecificOutput": {"additionalContext": "from http"}}'),
        "/legacy": (200, b'{"allowed": false}'),
        "/legacy-ok": (200, b'{"allowed": true}'),
        "/500": (500, b'{"decision": "allow"}'),
        "/garbage": (200, b"<html>not json</html>"),
    }

    def answer(self, h: BaseHTTPRequestHandler, path: str) -> None:
        if path in self.FIXED:
            self.reply(h, *self.FIXED[path])
        elif path == "/redirect":
            h.send_response(302)
            h.send_header("Location", self.url("/allow"))
            h.send_header("Content-Length", "0")
            h.end_headers()
        elif path == "/slow":
            time.sleep(3)
            self.reply(h, 200, b'{"decision": "allow"}')
        elif path == "/trickle":
            h.send_response(200)
            h.send_header("Content-Length", "100")
            h.end_headers()
            for _ in range(30):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.1)
        else:
            self.reply(h, 404, b"{}")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def http_hook(event: str, url: str, extra: str = "") -> str:
    return f"hooks:\n  {event}:\n    - http: {url}\n{extra}"


def fire_http(tmp_path: Path, runner: oh.CommandRunner, url: str, extra: str = "",
              event: str = "preToolUse") -> Result:
    cfg = config(tmp_path, http_hook(event, url, extra))
    return oh.fire(cfg, event, ctx_for(event, prompt="p"), runner=runner)


def test_http_allow(tmp_path: Path, runner: oh.CommandRunner, server: Server) -> None:
    result = fire_http(tmp_path, runner, server.url("/allow"))
    assert (result.decision, result.ran) == ("allow", ("preToolUse[0]",))


def test_http_posts_the_envelope_as_json(
    tmp_path: Path, runner: oh.CommandRunner, server: Server
) -> None:
    cfg = config(tmp_path, http_hook("permissionRequest", server.url("/ask")))
    ctx = Context(session_id="s", model="m", provider="p", permission_mode="ask",
                  tool_name="Bash", tool_input={"command": "ls"})
    result = oh.fire(cfg, "permissionRequest", ctx, runner=runner)
    assert result.decision == "ask"
    ((path, headers, body),) = server.requests
    assert path == "/ask"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == oh.envelope("permissionRequest", ctx) == {
        "event": "permissionRequest", "toolName": "Bash", "toolInput": {"command": "ls"},
        "permissionAction": "ask", "sessionId": "s", "model": "m", "provider": "p",
        "permissionMode": "ask",
    }


def test_http_deny_body(tmp_path: Path, runner: oh.CommandRunner, server: Server) -> None:
    result = fire_http(tmp_path, runner, server.url("/deny"))
    assert (result.decision, result.reason) == ("deny", "policy says no")


def test_http_context_from_any_2xx(
    tmp_path: Path, runner: oh.CommandRunner, server: Server
) -> None:
    result = fire_http(tmp_path, runner, server.url("/context"), event="userPromptSubmit")
    assert (result.decision, result.additional_context) == (None, "from http")


def test_http_500_denies(tmp_path: Path, runner: oh.CommandRunner, server: Server) -> None:
    url = server.url("/500")
    result = fire_http(tmp_path, runner, url)
    assert (result.decision, result.reason) == (
        "deny", f"hook preToolUse[0] failed ({url} answered HTTP 500)")


def test_http_redirect_is_not_followed_and_denies(
    tmp_path: Path, runner: oh.CommandRunner, server: Server
) -> None:
    url = server.url("/redirect")
    result = fire_http(tmp_path, runner, url)
    assert (result.decision, result.reason) == (
        "deny", f"hook preToolUse[0] failed ({url} answered HTTP 302)")
    assert [p for p, _, _ in server.requests] == ["/redirect"]


def test_http_closed_port_denies(tmp_path: Path, runner: oh.CommandRunner) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}/hook"
    result = fire_http(tmp_path, runner, url)
    assert (result.decision, result.reason) == (
        "deny", f"hook preToolUse[0] failed ({url} could not be reached: Connection refused)")


def test_http_garbage_body_denies(tmp_path: Path, runner: oh.CommandRunner, server: Server) -> None:
    url = server.url("/garbage")
    result = fire_http(tmp_path, runner, url)
    assert (result.decision, result.reason) == (
        "deny", f"hook preToolUse[0] failed ({url} answered with malformed JSON)")


def test_http_legacy_allowed_false_denies(
    tmp_path: Path, runner: oh.CommandRunner, server: Server
) -> None:
    result = fire_http(tmp_path, runner, server.url("/legacy"))
    assert (result.decision, result.reason) == ("deny", "denied by hook preToolUse[0]")
    assert fire_http(tmp_path, runner, server.url("/legacy-ok")).decision == "allow"


@pytest.mark.parametrize("path", ["/slow", "/trickle"])
def test_http_slower_than_the_timeout_denies_near_the_timeout(
    tmp_path: Path, runner: oh.CommandRunner, server: Server, path: str
) -> None:
    start = time.monotonic()
    result = fire_http(tmp_path, runner, server.url(path), "      timeout: 400\n")
    elapsed = time.monotonic() - start
    assert (result.decision, result.reason) == (
        "deny", "hook preToolUse[0] failed (timed out after 400 ms)")
    # The server would take 3 s; the hook is given up on at its timeout.
    assert elapsed < 2.0


def test_http_failure_on_a_notify_event_is_only_a_warning(
    tmp_path: Path, runner: oh.CommandRunner, server: Server
) -> None:
    url = server.url("/500")
    result = fire_http(tmp_path, runner, url, event="sessionStart")
    assert result.decision is None
    assert result.warnings == (f"hook sessionStart[0] failed ({url} answered HTTP 500)",)


# -- the merge ------------------------------------------------------------------------


def marked(marker: Path, answer: dict[str, Any] | None, *, code: int = 0) -> str:
    """A jsonIO hook entry that leaves ``marker`` and answers ``answer``."""
    body = f"cat > /dev/null; touch {marker}"
    if answer is not None:
        body += f"; printf '%s' {shlex.quote(json.dumps(answer))}"
    body += f"; exit {code}"
    return f"    - command: {q(body)}\n      jsonIO: true\n"


def test_first_deny_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(4)]
    text = "hooks:\n  preToolUse:\n" + (
        marked(m[0], {"decision": "allow"})
        + marked(m[1], None)
        + marked(m[2], {"decision": "deny", "reason": "second opinion: no"})
        + marked(m[3], {"decision": "deny", "reason": "never reached"})
    )
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "deny", "second opinion: no", "preToolUse[2]")
    assert result.ran == ("preToolUse[0]", "preToolUse[1]", "preToolUse[2]")
    assert [p.exists() for p in m] == [True, True, True, False]


def test_a_specific_deny_short_circuits_too(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], {"hookSpecificOutput": {"decision": "ask"}})
        + marked(m[1], {"hookSpecificOutput": {"decision": "deny"}})
        + marked(m[2], {"hookSpecificOutput": {"decision": "allow"}})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason) == ("deny", "denied by hook permissionRequest[1]")
    assert [p.exists() for p in m] == [True, True, False]


def test_an_env_mode_deny_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    later = tmp_path / "later"
    text = (
        "hooks:\n  preToolUse:\n    - command: 'exit 1'\n"
        f"    - command: 'touch {later}'\n"
    )
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result.decision == "deny"
    assert not later.exists()


def test_first_specific_allow_short_circuits(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], {"decision": "allow"})
        + marked(m[1], {"hookSpecificOutput": {"decision": "allow", "reason": "trusted"}})
        + marked(m[2], {"decision": "deny"})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "allow", "trusted", "permissionRequest[1]")
    assert [p.exists() for p in m] == [True, True, False]


def test_a_top_level_allow_does_not_short_circuit(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(2)]
    text = "hooks:\n  preToolUse:\n" + (
        marked(m[0], {"decision": "allow"}) + marked(m[1], {"decision": "deny"}))
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result.decision == "deny"
    assert all(p.exists() for p in m)


@pytest.mark.parametrize("event", ["preToolUse", "permissionRequest"])
def test_context_is_given_for_prompts_only(
    tmp_path: Path, runner: oh.CommandRunner, event: str
) -> None:
    cfg = config(tmp_path, json_hook(event, {"hookSpecificOutput": {
        "additionalContext": "not for a tool call", "decision": "allow"}}))
    result = oh.fire(cfg, event, Context(tool_name="Bash"), runner=runner)
    assert (result.decision, result.additional_context) == ("allow", None)
    assert "added context:" not in describe(result)


def test_contexts_join_in_list_order(tmp_path: Path, runner: oh.CommandRunner) -> None:
    m = [tmp_path / f"m{i}" for i in range(4)]
    text = "hooks:\n  userPromptSubmit:\n" + (
        marked(m[0], {"hookSpecificOutput": {"additionalContext": "one"}})
        + marked(m[1], None)
        + marked(m[2], {"hookSpecificOutput": {"additionalContext": "two\nlines"}})
        + marked(m[3], {"decision": "allow",
                        "hookSpecificOutput": {"additionalContext": "three"}})
    )
    result = oh.fire(config(tmp_path, text), "userPromptSubmit", Context(prompt="hi"),
                     runner=runner)
    assert result.additional_context == "one\n\ntwo\nlines\n\nthree"
    assert result.decision == "allow"
    assert all(p.exists() for p in m)


def test_ask_when_a_hook_asks_and_none_denies_or_allows(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(3)]
    text = "hooks:\n  permissionRequest:\n" + (
        marked(m[0], None)
        + marked(m[1], {"hookSpecificOutput": {"decision": "ask", "reason": "check this"}})
        + marked(m[2], {"decision": "allow"})
    )
    result = oh.fire(config(tmp_path, text), "permissionRequest", Context(tool_name="Bash"),
                     runner=runner)
    assert (result.decision, result.reason, result.decided_by) == (
        "ask", "check this", "permissionRequest[1]")
    assert all(p.exists() for p in m)


def test_no_hooks_is_no_decision(tmp_path: Path, runner: oh.CommandRunner) -> None:
    result = oh.fire(config(tmp_path, "hooks: {}\n"), "preToolUse", Context(tool_name="Bash"),
                     runner=runner)
    assert result == Result("preToolUse")


def test_a_deny_on_a_notify_event_does_not_stop_later_hooks(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    m = [tmp_path / f"m{i}" for i in range(2)]
    text = "hooks:\n  sessionStart:\n" + (
        marked(m[0], {"decision": "deny"}, code=1) + marked(m[1], None))
    result = oh.fire(config(tmp_path, text), "sessionStart", Context(), runner=runner)
    assert result.decision is None
    assert all(p.exists() for p in m)


# -- the box --------------------------------------------------------------------------


@pytest.mark.isolation
def test_a_boxed_hook_runs_in_the_project_without_provider_keys(
    tmp_path: Path, project: Path, session: Session
) -> None:
    cfg = config(tmp_path, one_hook(
        "postToolUse", 'echo "key=${ANTHROPIC_API_KEY:-none} tool=$OH_TOOL_NAME" > out.txt; '
        "pwd >> out.txt", "      sandbox: true\n"))
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.warnings == ()
    assert (project / "out.txt").read_text() == f"key=none tool=Bash\n{session.policy.project}\n"


@pytest.mark.isolation
def test_a_boxed_hook_cannot_write_outside_the_project(
    tmp_path: Path, outside: Path, session: Session
) -> None:
    target = outside / "planted"
    cfg = config(tmp_path, one_hook("preToolUse", f"touch {target}", "      sandbox: true\n"))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.decision == "deny"
    assert not target.exists()


@pytest.mark.isolation
def test_a_host_hook_in_a_boxed_session_runs_from_root_and_can_write_outside(
    tmp_path: Path, outside: Path, session: Session
) -> None:
    target = outside / "written"
    cfg = config(tmp_path, one_hook(
        "preToolUse", f'pwd > {target}; echo "${{ANTHROPIC_API_KEY:-none}}" >> {target}'))
    result = oh.fire(cfg, "preToolUse", Context(tool_name="Bash"),
                     runner=oh.session_runner(session))
    assert result.decision == "allow"
    assert target.read_text() == "/\nnone\n"


@pytest.mark.isolation
def test_a_boxed_json_hook_answers_through_the_box(tmp_path: Path, session: Session) -> None:
    cfg = config(tmp_path, json_hook(
        "userPromptSubmit", {"hookSpecificOutput": {"additionalContext": "boxed"}},
        "      sandbox: true\n"))
    result = oh.fire(cfg, "userPromptSubmit", Context(prompt="x"),
                     runner=oh.session_runner(session))
    assert result.additional_context == "boxed"


# -- the path guard -------------------------------------------------------------------


def script(folder: Path, name: str = "gate.sh") -> Path:
    p = folder / name
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o755)
    return p


def test_guard_words_split_like_a_shell() -> None:
    g = oh.guard_words
    assert g('echo "$OH_TOOL_NAME" >&2; exit 3') == ("echo", "$OH_TOOL_NAME", "exit", "3")
    assert g("exit 1") == ("/bin/sh", "exit", "1")
    assert g("FOO=./a python3 x.py 2>/dev/null") == ("python3", "x.py", "/dev/null", "FOO=./a")
    assert g("/opt/h/gate.sh --rules=r.yaml|tee /x") == (
        "/opt/h/gate.sh", "--rules=r.yaml", "tee", "/x")
    assert g("sh -c 'cat ./inner.sh'") == ("sh", "-c", "cat ./inner.sh")


def test_a_boxed_hook_whose_script_is_in_the_project_is_refused(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    s = script(project)
    path = write(tmp_path, one_hook("preToolUse", f"{s} --check", "      sandbox: true\n"))
    ((label, verdict),) = oh.check(oh.load(path), policy=policy)
    assert label == "preToolUse[0]"
    assert verdict.refusals == (
        f"hook preToolUse[0]: {s} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks.",
    )


def test_a_host_hook_whose_script_is_in_the_project_is_refused_too(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    s = script(project)
    path = write(tmp_path, one_hook("preToolUse", f"/bin/sh {s}"))
    ((_, verdict),) = oh.check(oh.load(path), policy=policy)
    assert verdict.refusals == (
        f"hook preToolUse[0]: {s} is in the project, so the agent could change it. "
        "Move it outside (for example ~/.local/share/harness/hooks/), or start with --no-hooks.",
    )


def test_a_relative_command_is_refused(tmp_path: Path, project: Path, policy: Policy) -> None:
    path = write(tmp_path, one_hook("preToolUse", "./log.sh", "      match: Bash\n"))
    ((_, verdict),) = oh.check(oh.load(path), policy=policy)
    assert verdict.refusals == (
        "hook preToolUse[0]: ./log.sh must be an absolute path "
        "(a command with a / is not looked up on PATH).",
    )


def test_a_boxed_hook_under_tmp_is_refused_a_host_one_is_not(
    tmp_path: Path, project: Path, policy: Policy
) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    s = script(loose)
    text = (
        f"hooks:\n  preToolUse:\n    - command: {s}\n      sandbox: true\n"
        f"    - command: {s}\n"
    )
    (boxed, host) = oh.check(oh.load(write(tmp_path, text)), policy=policy)
    assert boxed[1].refusals == (
        f"hook preToolUse[0]: {s} is in the system temp folder (/tmp), so the agent could "
        "change it. Move it outside (for example ~/.local/share/harness/hooks/), "
        "or start with --no-hooks.",
    )
    assert host[1].ok


def test_a_boxed_hook_outside_every_writable_folder_passes(
    tmp_path: Path, project: Path, policy: Policy, outside: Path
) -> None:
    s = script(outside)
    text = (
        "hooks:\n  preToolUse:\n"
        f"    - command: '{s} --mode strict 2>/dev/null'\n      sandbox: true\n"
        "    - http: http://127.0.0.1:9/\n"
        "  sessionStart:\n    - command: 'exit 0'\n"
    )
    path = write(tmp_path, text)
    verdicts = oh.check(oh.load(path), policy=policy)
    assert [(label, v.ok) for label, v in verdicts] == [
        ("preToolUse[0]", True), ("sessionStart[0]", True)]
    assert [(h.label, h.words, h.sandbox) for h in oh.load(path).all_hooks() if h.command] == [
        ("preToolUse[0]", (str(s), "--mode", "strict", "/dev/null"), True),
        ("sessionStart[0]", ("/bin/sh", "exit", "0"), False),
    ]


# -- harness-sandbox hook --openharness FILE EVENT ------------------------------------


def hook_cmd(*argv: str) -> int:
    return cmd_hook_openharness(parser().parse_args(["hook", *argv]))


def test_cmd_hook_json_document_and_exit_0(
    tmp_path: Path, project: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = outside / "ctx.sh"
    s.write_text("#!/bin/sh\ncat >/dev/null\n"
                 "echo '{\"hookSpecificOutput\":{\"additionalContext\":\"be brief\"}}'\n")
    s.chmod(0o755)
    path = write(tmp_path, one_hook("userPromptSubmit", str(s), "      jsonIO: true\n"))
    code = hook_cmd("userPromptSubmit", "--openharness", path, "--project", str(project),
                    "--prompt", "hello", "--no-sandbox", "--json")
    out = capsys.readouterr()
    assert code == 0
    assert json.loads(out.out) == {
        "version": 1, "event": "userPromptSubmit", "decision": None, "reason": None,
        "additionalContext": "be brief", "ran": ["userPromptSubmit[0]"],
    }


def test_cmd_hook_deny_exits_1_and_says_why(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", 'echo "no $OH_TOOL_NAME today" >&2; exit 1'))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--input", '{"command": "ls"}', "--no-sandbox")
    assert code == 1
    assert capsys.readouterr().err == "preToolUse: denied by preToolUse[0]: no Bash today\n"


def test_cmd_hook_config_error_exits_2(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "hooks:\n  preToolUse:\n    - command: /bin/true\n      foo: 1\n")
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert code == 2
    assert capsys.readouterr().err == (
        f'harness-sandbox: {path}: hooks.preToolUse[0]: unknown key "foo"\n')


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["PreToolUse", "--tool", "Bash"], 'unknown event "PreToolUse" (did you mean preToolUse?)'),
        (["preToolUse"], "preToolUse needs --tool NAME"),
        (["preToolUse", "--tool", "Bash", "--input", "[1]"], "--input must be a JSON object"),
    ],
)
def test_cmd_hook_usage_errors_exit_2(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str],
    argv: list[str], message: str,
) -> None:
    path = write(tmp_path, "hooks: {}\n")
    code = hook_cmd(*argv, "--openharness", path, "--project", str(project), "--no-sandbox")
    assert code == 2
    assert capsys.readouterr().err == f"harness-sandbox: {message}\n"


def test_cmd_hook_refuses_a_hook_the_guard_refuses(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = script(project)
    marker = project / "ran"
    s.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path = write(tmp_path, one_hook("preToolUse", str(s), "      sandbox: true\n"))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert code == 2
    assert capsys.readouterr().err == (
        f"harness-sandbox: hook preToolUse[0]: {s} is in the project, so the agent could "
        "change it. Move it outside (for example ~/.local/share/harness/hooks/), "
        "or start with --no-hooks.\n")
    assert not marker.exists()


def test_cmd_hook_with_hooks_off_runs_nothing(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", "exit 1"))
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-hooks", "--json")
    assert code == 0
    assert json.loads(capsys.readouterr().out)["ran"] == []


@pytest.mark.isolation
def test_cmd_hook_runs_a_boxed_hook_in_the_box(
    tmp_path: Path, project: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = outside / "gate.sh"
    s.write_text('#!/bin/sh\necho "$OH_TOOL_NAME" > seen.txt\nexit 0\n')
    s.chmod(0o755)
    path = write(tmp_path, one_hook("preToolUse", str(s), "      sandbox: true\n"))
    try:
        code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                        "--tool", "Bash", "--json")
    except SandboxUnavailable as err:  # pragma: no cover - machine without a box
        pytest.skip(str(err))
    out = capsys.readouterr()
    if code == 2 and "bwrap" in out.err:  # pragma: no cover
        pytest.skip(out.err)
    assert code == 0
    assert json.loads(out.out)["decision"] == "allow"
    assert (project / "seen.txt").read_text() == "Bash\n"


def test_describe_has_one_line_per_outcome() -> None:
    assert describe(Result("preToolUse", "ask", "check", None, ("preToolUse[0]",),
                              "preToolUse[0]")) == ["preToolUse: ask (from preToolUse[0]: check)"]
    assert describe(Result("sessionStart", ran=("sessionStart[0]",),
                              warnings=("hook sessionStart[0] failed (exited with code 1)",))) == [
        "warning: hook sessionStart[0] failed (exited with code 1)",
        "sessionStart: no objection (ran sessionStart[0])",
    ]



def test_cancel_ends_the_running_hook_and_starts_no_other(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    later = tmp_path / "later"
    text = (
        "hooks:\n  preToolUse:\n    - command: 'sleep 30'\n"
        f"    - command: 'touch {later}'\n"
    )
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    result = oh.fire(config(tmp_path, text), "preToolUse", Context(tool_name="Bash"),
                     runner=runner, cancel=cancel)
    assert time.monotonic() - start < 5
    assert (result.decision, result.reason) == ("deny", "hook preToolUse[0] failed (cancelled)")
    assert not later.exists()


def test_ctrl_c_during_cmd_hook_ends_the_hook_and_exits_130(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("preToolUse", "sleep 30"))
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    code = hook_cmd("preToolUse", "--openharness", path, "--project", str(project),
                    "--tool", "Bash", "--no-sandbox")
    assert time.monotonic() - start < 5
    assert code == 130
    assert capsys.readouterr().err == (
        "harness-sandbox: preToolUse: interrupted; the running hook was ended\n")


def test_the_cli_hook_command_hands_openharness_files_here(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, one_hook("permissionRequest", "exit 0"))
    code = main(["hook", "permissionRequest", "--openharness", path, "--project",
                 str(project), "--tool", "Bash", "--session-id", "s-1", "--no-sandbox",
                 "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": 1, "event": "permissionRequest", "decision": "ask", "reason": None,
        "additionalContext": None, "ran": ["permissionRequest[0]"],
    }


def test_a_huge_tool_output_is_cut_so_the_hook_still_starts(
    tmp_path: Path, runner: oh.CommandRunner
) -> None:
    count = tmp_path / "count"
    cfg = config(tmp_path, one_hook(
        "postToolUse", f'printf %s "$OH_TOOL_OUTPUT" | wc -c > {count}'))
    # Past Linux's 128 KiB limit for one environment string.
    result = oh.fire(cfg, "postToolUse", Context(tool_name="Bash", tool_output="x" * 200_000),
                     runner=runner)
    assert result.warnings == ()
    assert int(count.read_text()) == oh.ENV_VALUE_CAP == 65536
