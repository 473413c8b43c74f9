"""Records: the JSON-lines log, replay by input digest, the crash-resume check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launchers.config import HookSpec
from launchers.harness import records as r
from sandbox.plan import RunResult

PUSH = HookSpec(name="no-force-push", event="PreToolUse", command=("/opt/h/no-force-push.sh",),
                tools=("bash", "exec"), timeout=10)
KEYS = HookSpec(name="keywords", event="UserPromptSubmit",
                command=("/usr/bin/python3", "/opt/h/kw.py"), timeout=5, on_failure="continue")


def test_recorder_appends_one_json_document_per_line(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"type":"earlier"}\n')
    with r.Recorder(log) as rc:
        rc.write(r.session_record([PUSH, KEYS], no_hooks=False, session_id="S"))
        rc.write(r.context_record("keywords", "hello"))
        # flushed as written: a reader sees it before close
        assert len(log.read_text().splitlines()) == 3
    lines = log.read_text().splitlines()
    assert [json.loads(x)["type"] for x in lines] == \
        ["earlier", "session.started", "hook.context"]
    started = json.loads(lines[1])
    assert started["no_hooks"] is False
    assert started["hooks"][0] == {"name": "no-force-push", "event": "PreToolUse",
                                   "command": ["/opt/h/no-force-push.sh"],
                                   "tools": ["bash", "exec"], "timeout": 10,
                                   "sandbox": True, "on_failure": "block"}
    assert json.loads(lines[2]) == {"type": "hook.context", "hook": "keywords",
                                    "characters": 5, "text": "hello"}


def test_a_resumed_segment_is_session_resumed_and_records_no_hooks() -> None:
    rec = r.session_record([PUSH], no_hooks=True, resumed=True)
    assert rec["type"] == "session.resumed" and rec["no_hooks"] is True


def test_digest_is_sha256_of_the_envelope_bytes() -> None:
    assert r.digest(b"abc\n") == \
        "sha256:edeaaff3f1774ad2888673770c6d64097e391bc362d7d6fb34982ddf0efd18cb"


def test_effects_round_trip_exact_bytes_through_the_log(tmp_path: Path) -> None:
    result = RunResult(outcome="exited", returncode=2, stdout=b"\xff\xferaw",
                       stderr="no ✓\n".encode(), elapsed=0.01)
    with r.Recorder(tmp_path / "l") as rc:
        rc.write(r.effect_record("h", "sha256:1", result))
    [rec] = r.read(tmp_path / "l")
    assert rec["result"]["stderr"] == "no ✓\n"
    back = r.Replay([rec]).take("h", "sha256:1")
    assert back is not None
    assert (back.outcome, back.returncode, back.stdout, back.stderr) == \
        ("exited", 2, b"\xff\xferaw", "no ✓\n".encode())


def test_replay_serves_each_recorded_run_once_in_order() -> None:
    a = r.effect_record("h", "sha256:1", RunResult(outcome="exited", returncode=0))
    b = r.effect_record("h", "sha256:1", RunResult(outcome="exited", returncode=2))
    replay = r.Replay([a, b])
    assert replay.take("other", "sha256:1") is None
    first, second = replay.take("h", "sha256:1"), replay.take("h", "sha256:1")
    assert first is not None and first.returncode == 0
    assert second is not None and second.returncode == 2
    assert replay.take("h", "sha256:1") is None and replay.remaining() == 0


def test_a_partial_last_line_is_ignored_but_a_damaged_line_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "l"
    log.write_text('{"type":"a"}\n{"type":"b"')
    assert [x["type"] for x in r.read(log)] == ["a"]
    log.write_text('{"type":"a"}\nnot json\n{"type":"b"}\n')
    with pytest.raises(r.RecordError, match=r"l:2: not a JSON record"):
        r.read(log)


def test_recorded_hooks_are_the_last_segments() -> None:
    logs = [r.session_record([PUSH, KEYS], no_hooks=False),
            r.context_record("keywords", "x"),
            r.session_record([KEYS], no_hooks=False, resumed=True)]
    assert r.recorded_hooks(logs) == [KEYS.definition()]
    assert r.recorded_hooks([r.context_record("k", "x")]) is None


def test_resume_runs_a_hook_only_when_defined_exactly_as_recorded() -> None:
    recorded = [PUSH.definition(), KEYS.definition()]
    changed = HookSpec(name="no-force-push", event="PreToolUse",
                       command=("/opt/h/no-force-push.sh",), tools=("bash", "exec"), timeout=11)
    extra = HookSpec(name="new-one", event="PreToolUse", command=("/bin/true",))
    plan = r.plan_resume(recorded, [changed, KEYS, extra])
    assert plan.run == (KEYS,)
    assert [d["name"] for d in plan.skipped] == ["no-force-push"]
    assert plan.warnings == (
        "⚠ hook no-force-push is not run in this session: it is changed in your config since "
        "the session was recorded. Resume cleanly to use today's hooks.",)


@pytest.mark.parametrize("change", [
    {"event": "UserPromptSubmit", "tools": None}, {"command": ("/opt/h/other.sh",)},
    {"tools": ("bash",)}, {"timeout": 30}, {"sandbox": False}, {"on_failure": "continue"},
])
def test_any_changed_field_skips_the_recorded_hook(change: dict[str, object]) -> None:
    fields: dict[str, Any] = {"name": PUSH.name, "event": PUSH.event, "command": PUSH.command,
              "tools": PUSH.tools, "timeout": PUSH.timeout, "sandbox": PUSH.sandbox,
              "on_failure": PUSH.on_failure}
    fields.update(change)
    today = HookSpec(**fields)
    assert r.plan_resume([PUSH.definition()], [today]).run == ()


def test_a_log_cannot_make_an_unconfigured_program_run() -> None:
    forged = dict(PUSH.definition(), command=["/tmp/evil"])
    plan = r.plan_resume([forged], [PUSH])
    assert plan.run == () and plan.skipped == (forged,)
    assert r.plan_resume([PUSH.definition()], []).run == ()


def test_a_session_killed_during_a_hook_says_so() -> None:
    started = r.started_record("no-force-push", "PreToolUse", "bash", "sha256:1")
    assert r.killed_during_hook([started]) == \
        "This session was killed before bash ran. It never ran."
    done = r.effect_record("no-force-push", "sha256:1", RunResult(outcome="exited", returncode=0))
    assert r.killed_during_hook([started, done]) is None
    prompt = r.started_record("keywords", "UserPromptSubmit", None, "sha256:2")
    assert r.killed_during_hook([started, done, prompt]) == \
        "This session was killed while a prompt hook ran. The prompt was not sent."


def test_transcript_rows() -> None:
    logs = [
        r.context_record("keywords", "k" * 171),
        r.decided_record("notify", "PreToolUse", "bash", "failure",
                         failure="exited with code 1", went_ahead=True),
        r.decided_record("keywords", "UserPromptSubmit", None, "failure",
                         failure="timed out after 5 s", went_ahead=True),
        r.decided_record("keywords", "UserPromptSubmit", None, "block", reason="no"),
        r.decided_record("keywords", "UserPromptSubmit", None, "failure",
                         failure="timed out after 5 s"),
    ]
    assert list(r.transcript_rows(logs)) == [
        "· hook keywords added context (171 characters)",
        "· hook notify failed (exited with code 1); the call went ahead",
        "· hook keywords failed (timed out after 5 s); the prompt went ahead",
        '✗ prompt blocked by hook "keywords": no',
        '✗ prompt blocked: hook "keywords" failed (timed out after 5 s)',
    ]
