"""Bad input never crashes: the limits of launchers/bounded.py, where each is applied,
and the two crashes that came first (a hook's 100,000-deep answer; a deep tool call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.hook_programs import install_hooks
from helpers.paths import REPO

import launchers.openharness as oh
from launchers import bounded
from launchers.bounded import MAX_DEPTH, BoundsError
from launchers.config import Config, ConfigError, HookSpec, load
from launchers.harness import protocol
from launchers.harness import records as rec
from launchers.harness.hooks import HookRunner
from sandbox.plan import RunResult
from sandbox.session import Session

DEEP_ANSWER = "[" * 100000 + "]" * 100000
DEEP_CALL = "this call was blocked before the user's hooks ran: its arguments nest deeper " \
    "than 100 levels, so no hook could check them."


def nested(depth: int, leaf: Any = 0) -> Any:
    """A list ``depth`` levels deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module")
def programs() -> Iterator[Path]:
    yield from install_hooks()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


# -- the limits ----------------------------------------------------------------------


def test_json_within_the_depth_limit_parses_and_one_level_more_is_refused() -> None:
    assert bounded.loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) == nested(MAX_DEPTH - 1, [])
    with pytest.raises(BoundsError, match=r"^nests deeper than 100 levels$"):
        bounded.loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(BoundsError):
        bounded.loads_json(DEEP_ANSWER)


def test_brackets_inside_json_strings_do_not_count() -> None:
    text = json.dumps({"a": "[{" * 500, "b": ['\\"[[[' * 50]})
    assert bounded.loads_json(text)["a"] == "[{" * 500


def test_an_unclosed_string_full_of_escaped_quotes_is_scanned_in_linear_time() -> None:
    # A quadratic scan would take minutes on this.
    with pytest.raises(ValueError):
        bounded.loads_json('["' + '\\"' * 300000 + "[" * 200)


def test_json_over_its_size_limit_is_refused() -> None:
    with pytest.raises(BoundsError, match=r"^is larger than 1 MiB$"):
        bounded.loads_json(b" " * (bounded.ANSWER_BYTES + 1), max_bytes=bounded.ANSWER_BYTES)


def test_toml_nesting_is_measured_outside_strings_and_comments() -> None:
    deep = "a = " + "[" * 1000 + "]" * 1000
    with pytest.raises(BoundsError):
        bounded.loads_toml(deep.encode())
    ok = "a = '[[[[' # [[[[[[\nb = \"\"\"\n" + "[" * 300 + '\n"""\n'
    assert bounded.loads_toml(ok.encode())["a"] == "[[[["


def test_toml_dotted_keys_deeper_than_the_limit_are_refused() -> None:
    with pytest.raises(BoundsError, match="deeper"):
        bounded.loads_toml(("a" + ".a" * 5000 + " = 1").encode())


def test_a_yaml_billion_laughs_is_refused_before_it_is_built() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(8):
        me, prev = chr(98 + i), chr(97 + i)
        lines.append(f"{me}: &{me} [" + ", ".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(BoundsError, match=r"^holds more than 1,000,000 values$"):
        bounded.loads_yaml("\n".join(lines), yaml.SafeLoader)


def test_a_yaml_alias_to_the_node_holding_it_is_refused() -> None:
    with pytest.raises(BoundsError, match=r"^refers to itself through an alias$"):
        bounded.loads_yaml("a: &a [1, *a]", yaml.SafeLoader)


def test_yaml_depth_counts_what_an_alias_stands_for() -> None:
    text = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 50 + "*a" + "]" * 50
    with pytest.raises(BoundsError, match="deeper"):
        bounded.loads_yaml(text, yaml.SafeLoader)
    assert bounded.loads_yaml("x: &x {a: 1}\ny: {<<: *x, b: 2}", yaml.SafeLoader) == \
        {"x": {"a": 1}, "y": {"a": 1, "b": 2}}


def test_a_value_in_hand_is_walked_without_recursion() -> None:
    with pytest.raises(BoundsError, match="deeper"):
        bounded.check_value(nested(100000))
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(BoundsError, match="deeper"):
        bounded.check_value(loop)
    shared: Any = [1]
    for _ in range(40):  # 2**40 leaves if walked naively
        shared = [shared, shared]
    with pytest.raises(BoundsError, match="values"):
        bounded.check_value(shared)


def test_one_line_escapes_every_control_character() -> None:
    assert bounded.one_line("a\nb\x1b[31m\x9b") == "a\\x0ab\\x1b[31m\\x9b"


# -- a hook's answer -----------------------------------------------------------------


def test_a_deep_answer_is_output_that_is_not_hook_json() -> None:
    result = RunResult("exited", returncode=0, stdout=DEEP_ANSWER.encode())
    answer = protocol.parse(result, "PreToolUse", timeout=10)
    assert answer == protocol.Answer("failure", failure="printed output that is not hook JSON")


def test_a_real_hook_printing_a_100000_deep_array_fails_and_blocks(
        project: Path, programs: Path) -> None:
    spec = HookSpec(name="deep", event="PreToolUse", command=(str(programs / "deep-json.py"),),
                    sandbox=False)
    with Session.open(str(project)) as session:
        runner = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="S1")
        d = runner.pre_tool_use("bash", {"command": "ls"}, tool_use_id="T1")
    assert d.outcome == "blocked"
    assert d.message == protocol.call_failed("deep", "printed output that is not hook JSON")


def hook_cmd(project: Path, config: Path, *args: str,
             pre: str = "") -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh interpreter; ``pre`` runs first (to turn a defence off)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME")}
    env["HARNESS_HOME"] = str(config.parent)
    code = f"{pre}\nimport sys\nfrom launchers.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "hook", *args, "--project", str(project)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)


@pytest.fixture
def deep_config(tmp_path: Path, programs: Path) -> Path:
    home = tmp_path / "harness-home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text('[[hooks]]\nname = "deep"\nevent = "PreToolUse"\n'
                      f'command = ["{programs / "deep-json.py"}"]\nsandbox = false\n')
    return config


def test_the_cli_with_a_hook_printing_a_deep_array_blocks_with_the_failure_text(
        project: Path, deep_config: Path) -> None:
    r = hook_cmd(project, deep_config, "PreToolUse", "--tool", "bash", "--input", "{}")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        protocol.failing_warning("deep", protocol.NOT_HOOK_JSON, "PreToolUse"),
        protocol.call_failed("deep", protocol.NOT_HOOK_JSON),
    ]


# -- a tool call's arguments ---------------------------------------------------------


def test_relative_input_copies_without_recursion_and_refuses_past_the_limit() -> None:
    within = {"a": nested(MAX_DEPTH - 2, "/p/x")}
    assert protocol.relative_input(within, "/p") == {"a": nested(MAX_DEPTH - 2, "x")}
    with pytest.raises(protocol.EnvelopeError, match=r"^nest deeper than 100 levels$"):
        protocol.relative_input({"a": nested(5000)}, "/p")
    with pytest.raises(protocol.EnvelopeError,
                       match=r"^hold a value JSON cannot hold \(set\)$"):
        protocol.relative_input({"a": {1, 2}}, "/p")
    with pytest.raises(protocol.EnvelopeError, match=r"^are not a JSON object \(list\)$"):
        protocol.relative_input([1, 2], "/p")  # type: ignore[arg-type]


def test_a_deep_tool_call_is_blocked_by_the_runner_whatever_on_failure(
        project: Path, programs: Path) -> None:
    spec = HookSpec(name="marker", event="PreToolUse", tools=("bash",),
                    command=(str(programs / "allow.py"),), sandbox=False,
                    on_failure="continue")
    with Session.open(str(project)) as session:
        runner = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="S1")
        d = runner.pre_tool_use("bash", {"a": nested(5000)}, tool_use_id="T1")
        assert (d.outcome, d.hook, d.message) == ("blocked", "marker", DEEP_CALL)
        assert [r["decision"] for r in d.records] == ["refuse"]
        # No hook covers read_file: no envelope is made, nothing to refuse.
        assert runner.pre_tool_use("read_file", {"a": nested(5000)},
                                   tool_use_id="T2").outcome == "allowed"
        huge = runner.pre_tool_use("bash", {"a": 10 ** 5000}, tool_use_id="T3")
        assert huge.message == ("this call was blocked before the user's hooks ran: its "
                                "arguments hold a value that cannot be written as JSON, so "
                                "no hook could check them.")


def test_a_deep_tool_call_through_the_cli_is_blocked_not_a_crash(
        project: Path, deep_config: Path) -> None:
    deep = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    r = hook_cmd(project, deep_config, "PreToolUse", "--tool", "bash", "--input", deep,
                 "--json")
    assert r.returncode == 1, r.stderr
    assert r.stderr == DEEP_CALL + "\n"
    doc = json.loads(r.stdout)
    assert (doc["outcome"], doc["hook"], doc["message"]) == ("blocked", "deep", DEEP_CALL)


def test_a_deep_prompt_envelope_is_refused_with_the_panel_line() -> None:
    assert protocol.prompt_unreadable("is larger than 32 MiB as JSON") == (
        "✗ prompt blocked before the user's hooks ran: it is larger than 32 MiB as JSON, "
        "so no hook could check it")


# -- a crash in a command ------------------------------------------------------------

# Turns the defence off: the hook's answer is read by the unbounded json.loads again.
UNBOUNDED = ("import json\nfrom launchers import bounded\n"
             "bounded.loads_json = lambda data, **kw: json.loads(data)")


def test_a_crash_is_exit_2_and_one_line_naming_it_and_where_to_report(
        project: Path, deep_config: Path) -> None:
    r = hook_cmd(project, deep_config, "PreToolUse", "--tool", "bash", "--input", "{}",
                 pre=UNBOUNDED)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("harness-sandbox hook: internal error: RecursionError: "
                               "maximum recursion depth exceeded")
    assert "(at launchers/harness/protocol.py:" in lines[0]
    assert lines[0].endswith("This is a bug in harness-sandbox: please report it, with the "
                             "command you ran, to the project's issue tracker.")


def test_a_crash_in_run_is_exit_125() -> None:
    code = ("import sys\nfrom launchers.cli import run\n"
            "def broken(args): raise ValueError('x\\ny')\n"
            "run.cmd_run = broken\nfrom launchers.cli.main import main\n"
            "sys.exit(main(['run', '--', 'true']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO, timeout=60, check=False)
    assert r.returncode == 125
    # The deepest place in the package it passed through.
    assert r.stderr.startswith("harness-sandbox run: internal error: ValueError: x\\x0ay "
                               "(at launchers/cli/main.py:")
    assert r.stderr.count("\n") == 1


# -- configs, records ----------------------------------------------------------------


def test_a_deep_user_config_is_a_load_error_naming_the_file(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text("x = " + "[" * 2000 + "]" * 2000)
    with pytest.raises(ConfigError) as err:
        load(str(f), project=str(tmp_path / "proj"))
    assert str(err.value) == f"{f}: not loaded: the file nests deeper than 100 levels."
    f.write_bytes(b"#" * (bounded.CONFIG_BYTES + 1))
    with pytest.raises(ConfigError) as err:
        load(str(f), project=str(tmp_path / "proj"))
    assert str(err.value) == f"{f}: not loaded: the file is larger than 1 MiB."


def test_a_config_key_with_a_newline_stays_one_line(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text('[[hooks]]\nname = "a"\n"x\\ny\\u001b" = 1\n')
    with pytest.raises(ConfigError) as err:
        load(str(f), project=str(tmp_path / "proj"))
    assert str(err.value).startswith(f'{f}: hook "a": unknown key "x\\x0ay\\x1b"; ')


@pytest.fixture
def trust_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A trust store of the test's own (``XDG_DATA_HOME``), removed after it."""
    from helpers.trusting import data_home

    with data_home(monkeypatch) as d:
        yield d


def test_a_hostile_openharness_file_is_a_load_error_naming_the_file(
        tmp_path: Path, trust_home: Path) -> None:
    from helpers.trusting import trust_file

    f = tmp_path / "config.yaml"
    # Trusted first: the limits are about what a trusted file's parse may cost.
    f.write_text("hooks:\n  preToolUse: &a [*a]\n")
    trust_file(f)
    with pytest.raises(oh.OhConfigError) as err:
        oh.load(str(f))
    assert str(err.value) == f"{f}: not loaded: the file refers to itself through an alias"
    f.write_text("hooks: " + "[" * 5000 + "]" * 5000)
    trust_file(f)
    with pytest.raises(oh.OhConfigError) as err:
        oh.load(str(f))
    assert str(err.value) == f"{f}: not loaded: the file nests deeper than 100 levels"
    f.write_text("# padding\n" * 20000)
    trust_file(f)
    with pytest.raises(oh.OhConfigError) as err:
        oh.load(str(f))
    assert str(err.value) == f"{f}: not loaded: the file is larger than 128 KiB"


def test_an_openharness_deep_answer_is_malformed_and_a_deep_input_denies() -> None:
    assert oh.parse_answer(DEEP_ANSWER.encode()) is None
    hook = oh.OhHook(event="preToolUse", index=0, command="true", json_io=True)
    config = oh.OhConfig("f", {"preToolUse": (hook,)})
    ran: list[bytes] = []

    def runner(argv: Any, *, stdin: bytes, **kw: Any) -> RunResult:
        ran.append(stdin)
        return RunResult("exited", returncode=0)

    ctx = oh.Context(tool_name="Bash", tool_input={"a": nested(5000)})
    result = oh.fire(config, "preToolUse", ctx, runner=runner)
    assert ran == []
    assert (result.decision, result.reason) == (
        "deny", "hook preToolUse[0] failed (could not be given the event: its input nests "
                "deeper than 100 levels)")


def test_a_damaged_record_is_a_record_error_naming_the_line(tmp_path: Path) -> None:
    f = tmp_path / "log.jsonl"
    f.write_text('{"type": "hook.context", "hook": "k", "characters": 3, "text": "abc"}\n'
                 + "[" * 100000 + "]" * 100000 + "\n")
    with pytest.raises(rec.RecordError) as err:
        rec.read(f)
    assert str(err.value) == f"{f}:2: not a record (it nests deeper than 100 levels)"
    f.write_text('{"type": "hook.effect", "hook": "h", "input_digest": "d", '
                 '"result": {"outcome": "exploded"}}\n')
    with pytest.raises(rec.RecordError) as err:
        rec.read(f)
    assert str(err.value) == (f"{f}:1: not a hook.effect record (result: \"outcome\" is not "
                              "one of exited, signaled, timed_out, cancelled, failed_to_start)")
    with pytest.raises(rec.RecordError):
        rec.Replay([{"type": "hook.effect", "hook": "h", "input_digest": "d", "result": {}}])


def test_a_deep_tool_call_through_the_openharness_cli_denies(
        tmp_path: Path, project: Path, trust_home: Path) -> None:
    from helpers.trusting import trust_file

    f = tmp_path / "oh.yaml"
    f.write_text("hooks:\n  preToolUse:\n    - command: /bin/true\n      jsonIO: true\n")
    trust_file(f)  # XDG_DATA_HOME reaches the CLI below
    deep = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    r = subprocess.run(
        [sys.executable, "-m", "launchers.cli", "hook", "preToolUse", "--openharness", str(f),
         "--project", str(project), "--tool", "Bash", "--input", deep, "--no-sandbox"],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == (
        "preToolUse: denied by preToolUse[0]: hook preToolUse[0] failed (could not be given "
        "the event: its tool input nests deeper than 100 levels)")
