"""Property-based tests: whatever comes from outside gives one documented outcome.

- the config loaders: any TOML or YAML text, and any structure of the right shape, gives
  a config or a one-line load error naming the file;
- the answer parsers: any bytes on stdout and stderr, any exit status, give exactly one
  of the documented outcomes;
- ``relative_input``: any JSON value keeps all but its in-project paths, and never
  raises but :class:`EnvelopeError`;
- the records reader: any line gives a record or a :class:`RecordError`, and whatever it
  accepts, every reader of records (replay, resume, transcript) takes without raising.

The seed is fixed and the examples bounded (the "ci" profile in conftest.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

import launchers.openharness as oh
from launchers.bounded import MAX_DEPTH, bracket_depth, one_line
from launchers.config import EVENTS, HOOK_KEYS, Config, ConfigError, Event, HookSpec, load
from launchers.harness import protocol
from launchers.harness import records as rec
from launchers.harness.hooks import HookRunner
from launchers.sandbox_table import SANDBOX_KEYS
from sandbox.plan import RunResult

OUTCOMES = ("exited", "signaled", "timed_out", "cancelled", "failed_to_start")
# Past Python's recursion limit (1,000) too: the depth a parser that recurses dies at.
DEEP = st.integers(min_value=0, max_value=3000)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("props")


# -- values ------------------------------------------------------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                    st.floats(allow_nan=False))
VALUES = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3)
                      | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=10)


def nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def _one_line_error(text: str, path: str) -> None:
    assert text.startswith(f"{path}: "), text
    assert one_line(text) == text, f"not one line: {text!r}"


# -- the user config (TOML) ----------------------------------------------------------


def toml_value(v: Any) -> str:
    """A value in TOML's inline syntax (enough for what the strategies make)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_value(str(k))} = {toml_value(x)}"
                               for k, x in v.items()) + "}"
    return '""'  # None has no TOML form


def _either(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(right, right, VALUES)


HOOK = st.fixed_dictionaries({}, optional={
    "name": _either(st.sampled_from(["a", "no-force-push", "x" * 33, "A"])),
    "event": _either(st.sampled_from(EVENTS)),
    "command": _either(st.lists(st.sampled_from(["/bin/true", "x", ""]), max_size=3)),
    "tools": _either(st.lists(st.sampled_from(["bash", "Bash", "mcp__x", ""]), max_size=3)),
    "timeout": _either(st.integers(-5, 700)),
    "sandbox": _either(st.booleans()),
    "on_failure": _either(st.sampled_from(["block", "continue", "stop"])),
    "matcher": VALUES,
    "extra\nkey": VALUES,
})
SANDBOX = st.fixed_dictionaries({}, optional={
    **{k: _either(st.lists(st.sampled_from(["/x", "~/y", "rel", "~"]), max_size=2))
       for k in ("writable", "hidden")},
    **{k: _either(st.booleans()) for k in ("hide_defaults", "protect", "network", "enabled")},
    "scrub": _either(st.lists(st.sampled_from(["GITHUB_TOKEN", "*_KEY", "A-B"]), max_size=2)),
    "unknown": VALUES,
})
CONFIGS = st.fixed_dictionaries({}, optional={
    "hooks": _either(st.lists(HOOK, max_size=3)), "sandbox": _either(SANDBOX),
    "other": VALUES,
})


def load_outcome(path: Path, project: Path) -> Config | None:
    try:
        return load(str(path), project=str(project))
    except ConfigError as err:
        _one_line_error(str(err), str(path))
        return None


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
                 DEEP.map(lambda n: "a = " + "[" * n + "]" * n),
                 DEEP.map(lambda n: "a" + ".b" * n + " = 1")))
@example("[[hooks]]\nname = 'a'\n\"\\u001b[2J\\n\" = 1\n")
def test_any_toml_text_gives_a_config_or_a_one_line_error(folder: Path, text: str) -> None:
    f = folder / "text.toml"
    f.write_text(text, encoding="utf-8", errors="surrogateescape")
    load_outcome(f, folder / "proj")


@settings(max_examples=300)
@given(CONFIGS)
def test_any_right_shaped_config_gives_a_config_or_a_one_line_error(
        folder: Path, doc: dict[str, Any]) -> None:
    f = folder / "shaped.toml"
    f.write_text("".join(f"{toml_value(k)} = {toml_value(v)}\n" for k, v in doc.items()))
    config = load_outcome(f, folder / "proj")
    if config is not None:
        assert all(isinstance(h, HookSpec) and set(h._fields) >= set(HOOK_KEYS) - {"matcher"}
                   for h in config.hooks)
        assert set(SANDBOX_KEYS) <= set(config.sandbox._fields)


# -- the openHarness config (YAML) ---------------------------------------------------

OH_HOOK = st.fixed_dictionaries({}, optional={
    "command": _either(st.sampled_from(["/bin/true", "echo 'a", "", "x | y"])),
    "http": _either(st.sampled_from(["http://127.0.0.1:1/", "ftp://x", "http://"])),
    "jsonIO": _either(st.booleans()), "match": _either(st.sampled_from(["Bash", "/[/", "*"])),
    "timeout": _either(st.integers(-1, 20000)), "sandbox": _either(st.booleans()),
    "foo": VALUES,
})
OH_DOCS = st.one_of(
    st.fixed_dictionaries({"hooks": _either(st.dictionaries(
        st.one_of(st.sampled_from(oh.EVENTS), st.text(max_size=8)),
        _either(st.lists(OH_HOOK, max_size=3)), max_size=3))}),
    VALUES,
)


def oh_outcome(text: str, path: str) -> None:
    try:
        config = oh.parse(text, path)
    except oh.OhConfigError as err:
        _one_line_error(str(err), path)
        return
    assert all(isinstance(h, oh.OhHook) for h in config.all_hooks())


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=300), DEEP.map(lambda n: "a: " + "[" * n + "]" * n),
                 DEEP.map(lambda n: "a:\n" + "".join(" " * i + "b:\n" for i in range(1, n % 150)))))
@example("a: &a [*a]")
@example("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(8)))
@example("hooks:\n  preToolUse:\n    - command: x\n      \"\\e[2J\\n\": 1\n")
def test_any_yaml_text_gives_a_config_or_a_one_line_error(text: str) -> None:
    oh_outcome(text, ".oh/config.yaml")


@settings(max_examples=300)
@given(OH_DOCS)
def test_any_right_shaped_openharness_config_gives_a_config_or_an_error(doc: Any) -> None:
    oh_outcome(yaml.safe_dump(doc), ".oh/config.yaml")


# -- the answer parsers --------------------------------------------------------------

ANSWERS = st.fixed_dictionaries({}, optional={
    "continue": _either(st.booleans()), "stopReason": VALUES,
    "decision": _either(st.sampled_from(["block", "approve", "deny", "allow", "ask"])),
    "reason": _either(st.text(max_size=30)), "allowed": VALUES,
    "hookSpecificOutput": _either(st.fixed_dictionaries({}, optional={
        "permissionDecision": _either(st.sampled_from(["deny", "allow", "ask"])),
        "permissionDecisionReason": VALUES, "additionalContext": VALUES,
        "decision": _either(st.sampled_from(["deny", "allow", "ask"])), "reason": VALUES})),
})
STDOUT = st.one_of(
    st.binary(max_size=200),
    ANSWERS.map(lambda a: json.dumps(a).encode()),
    VALUES.map(lambda v: json.dumps(v).encode()),
    DEEP.map(lambda n: b"[" * n + b"]" * n),
    DEEP.map(lambda n: b'{"a": ' * n + b"1" + b"}" * n),
)
# As the supervisor makes them: an "exited" run has a status (records are held to it).
ENDINGS = st.one_of(
    st.tuples(st.just("exited"), st.integers(-300, 300)),
    st.tuples(st.sampled_from(OUTCOMES[1:]), st.one_of(st.none(), st.integers(-300, 300))),
)
RESULTS = st.builds(
    lambda ending, **kw: RunResult(ending[0], returncode=ending[1], **kw), ENDINGS,
    signal=st.one_of(st.none(), st.integers(0, 64)), stdout=STDOUT,
    stderr=st.one_of(st.binary(max_size=100), st.text(max_size=50).map(str.encode)),
    stdout_capped=st.booleans(), error=st.one_of(st.none(), st.text(max_size=20)),
)
FAILURE = re.compile(r"timed out after \d+(\.\d+)? s|could not start: .*|was killed by a signal"
                     r"|exited with code -?\d+|printed output that is not hook JSON", re.DOTALL)


@settings(max_examples=600)
@given(RESULTS, st.sampled_from(("PreToolUse", "UserPromptSubmit")), st.booleans(),
       st.sampled_from((10, 2.5)))
def test_any_run_gives_exactly_one_documented_answer(
        result: RunResult, event: Any, boxed: bool, timeout: float) -> None:
    a = protocol.parse(result, event, timeout=timeout, boxed=boxed)
    assert a.kind in ("none", "block", "failure", "interrupted")
    assert (a.kind == "failure") == (a.failure is not None)
    assert (a.kind == "interrupted") == (result.outcome == "cancelled")
    if a.failure is not None:
        assert FAILURE.fullmatch(a.failure), a.failure
    if a.kind == "block":
        assert a.reason is None or (a.reason == a.reason.strip() and 0 < len(a.reason) <= 2000)
    else:
        assert a.reason is None
    if a.context is not None:
        assert a.kind == "none" and event == "UserPromptSubmit" and a.context.strip()


def _oh_answer_is_documented(a: oh.OhAnswer, event: str) -> None:
    assert a.kind in ("deny", "allow!", "ask", "allow", "none")
    assert a.reason is None or isinstance(a.reason, str)
    assert a.additional_context is None or (isinstance(a.additional_context, str)
                                            and a.additional_context)
    if a.failure is not None:
        assert a.kind == "deny" or event not in oh.GATING_EVENTS


OH_HOOKS = st.builds(oh.OhHook, event=st.sampled_from(oh.EVENTS), index=st.just(0),
                     command=st.just("true"), json_io=st.booleans(),
                     timeout_ms=st.sampled_from((1, 10_000)))


@settings(max_examples=400)
@given(OH_HOOKS, RESULTS)
def test_any_openharness_run_gives_one_documented_answer(hook: oh.OhHook,
                                                         result: RunResult) -> None:
    _oh_answer_is_documented(oh.answer_of_run(hook, result), hook.event)


@settings(max_examples=300)
@given(OH_HOOKS, st.one_of(st.none(), STDOUT),
       st.one_of(st.none(), st.sampled_from(("timed out", "answered HTTP 500",
                                             "could not be reached: refused"))))
def test_any_http_reply_gives_one_documented_answer(hook: oh.OhHook, data: bytes | None,
                                                    error: str | None) -> None:
    hook = dataclasses.replace(hook, command=None, http="http://127.0.0.1:9/")
    a = oh.answer_of_http(hook, data, error)
    _oh_answer_is_documented(a, hook.event)
    if error is not None or oh.parse_answer(data or b"") is None:
        assert a.kind == "deny"  # every HTTP failure denies


# -- relative_input ------------------------------------------------------------------

ROOTS = ("/home/u/proj", "/real/proj")
PATHLIKE = st.builds(lambda root, tail: root + tail, st.sampled_from((*ROOTS, "/home/u")),
                     st.sampled_from(("", "/", "/a", "/a/b/", "x", "//")))
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=10), PATHLIKE),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.one_of(st.text(max_size=6),
                                                                  PATHLIKE), c, max_size=4),
    max_leaves=25)


def expected_text(s: str) -> str:
    """The rule, written again plainly: a string that is a project path, made relative."""
    for root in sorted(ROOTS, key=len, reverse=True):
        if s in (root, root + "/") or s.rstrip("/") == root:
            return "."
        if s.startswith(root + "/"):
            return s[len(root) + 1:] or "."
    return s


def same_but_paths(before: Any, after: Any) -> None:
    work = [(before, after)]
    while work:
        b, a = work.pop()
        if isinstance(b, str):
            assert a == expected_text(b)
        elif isinstance(b, dict):
            assert isinstance(a, dict) and list(a) == list(b)  # keys never rewritten
            work.extend((b[k], a[k]) for k in b)
        elif isinstance(b, list):
            assert isinstance(a, list) and len(a) == len(b)
            work.extend(zip(b, a, strict=True))
        else:
            assert type(a) is type(b) and a == b


@settings(max_examples=400)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=5))
def test_relative_input_keeps_everything_but_project_paths(value: dict[str, Any]) -> None:
    out = protocol.relative_input(value, ROOTS)
    same_but_paths(value, out)
    line = protocol.pre_tool_use("S", "/home/u/proj", "auto", "bash", value, tool_use_id="T",
                                 project=ROOTS)
    assert json.loads(line)["tool_input"] == out


@settings(max_examples=150)
@given(DEEP, JSON, st.sampled_from(("list", "dict", "set", "bytes", "shared")))
def test_relative_input_never_raises_but_an_envelope_error(depth: int, leaf: Any,
                                                           shape: str) -> None:
    value: Any
    if shape == "list":
        value = nested(depth, leaf)
    elif shape == "dict":
        value = leaf
        for _ in range(depth):
            value = {"k": value}
    elif shape == "set":
        value = [{depth}]
    elif shape == "bytes":
        value = nested(depth % 5, b"x")
    else:
        value = [leaf]
        for _ in range(depth % 12):  # (2**40 shared leaves: in test_bounded.py)
            value = [value, value]
    try:
        protocol.relative_input({"v": value}, ROOTS)
    except protocol.EnvelopeError as err:
        assert str(err).split(" ")[0] in ("nest", "hold", "are")


# -- records -------------------------------------------------------------------------

KNOWN = ("session.started", "session.resumed", "hook.started", "hook.effect",
         "hook.decided", "hook.context")
RESULT_JSON = st.fixed_dictionaries(
    {"outcome": _either(st.sampled_from(OUTCOMES))},
    optional={"returncode": _either(st.integers(-5, 300)), "signal": VALUES,
              "stdout": _either(st.text(max_size=20)), "stderr": VALUES,
              "stdout_capped": _either(st.booleans()), "error": VALUES,
              "errno": VALUES, "elapsed": _either(st.floats(0, 10))})
RECORDS = st.fixed_dictionaries(
    {"type": _either(st.sampled_from((*KNOWN, "hook.other")))},
    optional={
        "hooks": _either(st.lists(_either(st.fixed_dictionaries(
            {"name": _either(st.text(max_size=5))}, optional={"event": VALUES,
                                                            "tools": VALUES})), max_size=2)),
        "no_hooks": _either(st.booleans()),
        "hook": _either(st.sampled_from(("a", "b"))),
        "event": _either(st.sampled_from(("PreToolUse", "UserPromptSubmit"))),
        "tool": _either(st.sampled_from(("bash", None))),
        "input_digest": _either(st.sampled_from(("sha256:1", "sha256:2"))),
        "result": _either(RESULT_JSON),
        "decision": _either(st.sampled_from(("block", "failure", "interrupt", "skip",
                                             "refuse", "other"))),
        "reason": VALUES, "failure": VALUES, "went_ahead": _either(st.booleans()),
        "characters": _either(st.integers(-3, 100)), "text": _either(st.text(max_size=10)),
    })


def read_line(line: str) -> rec.Record | None:
    try:
        got = rec.parse_line(line, "log", 1)
    except rec.RecordError as err:
        assert str(err).startswith("log:1: ") and one_line(str(err)) == str(err)
        return None
    assert got is None or (isinstance(got, dict) and isinstance(got["type"], str))
    return got


def every_reader_takes(records: list[rec.Record]) -> None:
    replay = rec.Replay(records)
    replay.take("a", "sha256:1")
    list(rec.transcript_rows(records))
    rec.killed_during_hook(records)
    recorded = rec.recorded_hooks(records)
    if recorded is not None:
        today = (HookSpec(name="a", event="PreToolUse", command=("/bin/true",)),)
        rec.plan_resume(recorded, today).warnings  # noqa: B018 - built, never raises


@settings(max_examples=500)
@given(st.one_of(st.text(max_size=200), VALUES.map(json.dumps),
                 DEEP.map(lambda n: "[" * n + "]" * n)))
def test_any_line_gives_a_record_or_a_record_error(line: str) -> None:
    got = read_line(line)
    if got is not None:
        every_reader_takes([got])


@settings(max_examples=500)
@given(st.lists(RECORDS, min_size=1, max_size=4))
def test_whatever_the_reader_accepts_every_reader_of_records_takes(
        docs: list[dict[str, Any]]) -> None:
    accepted = [r for r in (read_line(json.dumps(d)) for d in docs) if r is not None]
    every_reader_takes(accepted)
    if accepted:
        out = served_effects(accepted)
        assert all(isinstance(r, RunResult) for r in out)


def served_effects(records: list[rec.Record]) -> list[RunResult]:
    replay = rec.Replay(records)
    return [r for d in records if d["type"] == "hook.effect"
            for r in [replay.take(d["hook"], d["input_digest"])] if r is not None]


# -- the whole runner, with a real hook process ------------------------------------


@pytest.fixture(scope="module")
def echo_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookRunner]:
    from helpers.hook_programs import install_hooks

    from sandbox.session import Session

    project = tmp_path_factory.mktemp("echo") / "proj"
    project.mkdir()
    for programs in install_hooks():
        events: tuple[Event, ...] = ("PreToolUse", "UserPromptSubmit")
        hooks = tuple(HookSpec(name=f"echo-{e.lower()}", event=e, sandbox=False,
                               command=(str(programs / "echo-answer.py"),))
                      for e in events)
        with Session.open(str(project)) as session:
            yield HookRunner(Config(path=None, hooks=hooks), session, session_id="S")


def _documented(d: Any, event: str) -> bool:
    hook = f"echo-{event.lower()}"
    if d.outcome == "allowed":
        return d.message is None
    kinds = [m.group(0) for m in [FAILURE.fullmatch(k) for k in _kinds(d.message)] if m]
    if event == "PreToolUse":
        return bool(d.message.startswith(f'blocked by the user\'s hook "{hook}"')
                    or any(d.message == protocol.call_failed(hook, k) for k in kinds))
    return bool(d.message.startswith(f'✗ prompt blocked by hook "{hook}"')
                or any(d.message == protocol.prompt_failed(hook, k) for k in kinds))


def _kinds(message: str) -> list[str]:
    return re.findall(r"failed \((.*)\)", message)


@settings(max_examples=150)
@given(STDOUT, st.binary(max_size=300), st.sampled_from((0, 0, 0, 1, 2, 2, 3, 127, 255)),
       st.sampled_from(("PreToolUse", "UserPromptSubmit")))
def test_any_hook_output_through_the_runner_gives_one_documented_decision(
        echo_runner: HookRunner, stdout: bytes, stderr: bytes, code: int, event: str) -> None:
    import base64

    ask = {"stdout": base64.b64encode(stdout).decode(),
           "stderr": base64.b64encode(stderr).decode(), "code": code}
    echo_runner.new_turn()
    if event == "PreToolUse":
        d = echo_runner.pre_tool_use("bash", ask, tool_use_id="T")
    else:
        d = echo_runner.user_prompt_submit(json.dumps(ask))
    assert d.outcome in ("allowed", "blocked")
    assert _documented(d, event), d.message
    assert all(c.startswith('Context from the user\'s hook "echo-') for c in d.contexts)


@pytest.fixture(scope="module")
def oh_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    from helpers.hook_programs import install_hooks

    from sandbox.session import Session

    project = tmp_path_factory.mktemp("oh-echo") / "proj"
    project.mkdir()
    for programs in install_hooks():
        with Session.open(str(project)) as session:
            yield session, programs / "echo-answer.py"


def _ask(stdout: bytes, stderr: bytes, code: int) -> dict[str, Any]:
    import base64

    return {"stdout": base64.b64encode(stdout).decode(),
            "stderr": base64.b64encode(stderr).decode(), "code": code}


ASKS = st.builds(_ask, STDOUT, st.binary(max_size=200), st.sampled_from((0, 0, 1, 2, 255)))


@settings(max_examples=120)
@given(ASKS, st.booleans(),
       st.sampled_from(("preToolUse", "userPromptSubmit", "permissionRequest", "postToolUse")))
def test_any_openharness_hook_output_through_fire_gives_one_documented_result(
        oh_session: tuple[Any, Path], ask: dict[str, Any], json_io: bool, event: str) -> None:
    session, program = oh_session
    hook = oh.OhHook(event=event, index=0, command=f"/usr/bin/python3 {program}",
                     json_io=json_io)
    config = oh.OhConfig("f", {event: (hook,)})
    ctx = oh.Context(tool_name="Bash", tool_input=ask, prompt=json.dumps(ask))
    result = oh.fire(config, event, ctx, runner=oh.session_runner(session))
    assert result.decision in (None, "allow", "deny", "ask")
    if event not in oh.GATING_EVENTS:
        assert result.decision is None
    if result.decision == "deny":
        assert isinstance(result.reason, str) and result.reason


# -- the depth scan itself -----------------------------------------------------------

BRACKETY = st.text(alphabet='[]{}"\\ a\n', max_size=12)


def depth_by_hand(text: str) -> int:
    """A JSON text's nesting, one character at a time (the slow, obvious way)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            in_string = escaped or c != '"'
            escaped = not escaped and c == "\\"
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


@settings(max_examples=300)
@given(st.integers(90, 110), st.recursive(
    st.one_of(BRACKETY, st.integers()),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(BRACKETY, c, max_size=3),
    max_leaves=6))
def test_the_depth_scan_agrees_with_a_scan_by_hand(depth: int, leaf: Any) -> None:
    text = json.dumps(nested(depth, leaf))
    assert (bracket_depth(text) > MAX_DEPTH) == (depth_by_hand(text) > MAX_DEPTH)
    assert bracket_depth(text) == depth_by_hand(text) or depth_by_hand(text) <= MAX_DEPTH
