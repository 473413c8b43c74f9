"""Records: what a session with hooks writes to its log, and what a replay reads back.

One JSON document per line. The kinds:

``session.started`` / ``session.resumed``
    the hooks as the segment runs them (:meth:`HookSpec.definition`) and ``no_hooks``.
``hook.started``
    a live run is about to start (so a resume can tell a session killed mid-hook).
``hook.effect``
    one run: the hook, the sha256 of its input and its result. A replay serves it.
``hook.decided``
    a block, a failure, an interrupt, a skipped run, or an input no hook could be given
    (``refuse``), with the hook and the tool.
``hook.context``
    context a prompt hook added, as kept.

A replay serves effects by (hook, input digest), so it starts nothing. A crash resume
runs a recorded hook only when today's config defines it exactly as recorded: a log can
never make a program run that the config does not name.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any, Literal

from launchers import bounded
from launchers.config import Event, HookSpec
from launchers.harness import protocol
from pathguard.records import NamedTuple
from sandbox.fs.digest import sha256_hex
from sandbox.plan import RunResult

Record = dict[str, Any]
Decided = Literal["block", "failure", "interrupt", "skip", "refuse"]


def digest(envelope: bytes) -> str:
    """The input digest an effect is filed under."""
    return "sha256:" + sha256_hex(envelope)


# -- building records --------------------------------------------------------------


def session_record(
    hooks: Sequence[HookSpec], *, no_hooks: bool, session_id: str | None = None,
    resumed: bool = False,
) -> Record:
    rec: Record = {
        "type": "session.resumed" if resumed else "session.started",
        "hooks": [h.definition() for h in hooks],
        "no_hooks": no_hooks,
    }
    if session_id is not None:
        rec["session_id"] = session_id
    return rec


def _text(data: bytes) -> str:
    # surrogateescape keeps bytes that are not UTF-8, so a replay gives back the exact
    # output; json writes the escapes as \\udcXX.
    return data.decode("utf-8", errors="surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def result_to_json(result: RunResult) -> Record:
    return {
        "outcome": result.outcome,
        "returncode": result.returncode,
        "signal": result.signal,
        "stdout": _text(result.stdout),
        "stderr": _text(result.stderr),
        "stdout_capped": result.stdout_capped,
        "stderr_capped": result.stderr_capped,
        "error": result.error,
        "errno": result.errno,
        "elapsed": round(result.elapsed, 6),
    }


def result_from_json(data: Mapping[str, Any]) -> RunResult:
    return RunResult(
        outcome=data["outcome"],
        returncode=data.get("returncode"),
        signal=data.get("signal"),
        stdout=_bytes(data.get("stdout") or ""),
        stderr=_bytes(data.get("stderr") or ""),
        stdout_capped=bool(data.get("stdout_capped", False)),
        stderr_capped=bool(data.get("stderr_capped", False)),
        error=data.get("error"),
        errno=data.get("errno"),
        elapsed=float(data.get("elapsed") or 0.0),
    )


def started_record(hook: str, event: Event, tool: str | None, input_digest: str) -> Record:
    return {"type": "hook.started", "hook": hook, "event": event, "tool": tool,
            "input_digest": input_digest}


def effect_record(hook: str, input_digest: str, result: RunResult) -> Record:
    return {"type": "hook.effect", "hook": hook, "input_digest": input_digest,
            "result": result_to_json(result)}


def decided_record(
    hook: str, event: Event, tool: str | None, decision: Decided, *,
    reason: str | None = None, failure: str | None = None, went_ahead: bool = False,
    stderr: str | None = None,
) -> Record:
    """``reason`` for a block (None: no reason given), ``failure`` for a failure's kind,
    ``went_ahead`` when on_failure = "continue" let the call or prompt through, ``stderr``
    the end of a failed hook's stderr (cut and escaped; kept only when there is one)."""
    out: Record = {"type": "hook.decided", "hook": hook, "event": event, "tool": tool,
                   "decision": decision, "reason": reason, "failure": failure,
                   "went_ahead": went_ahead}
    if stderr is not None:
        out["stderr"] = stderr
    return out


def context_record(hook: str, text: str) -> Record:
    return {"type": "hook.context", "hook": hook, "characters": len(text), "text": text}


# -- writing and reading -----------------------------------------------------------


class Recorder:
    """Appends records to a JSON-lines file, one per line, flushed as written.

    ``records`` keeps what this recorder wrote, for callers that want them in hand.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.records: list[Record] = []
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: Record) -> None:
        if self._file is None:
            raise ValueError(f"the record file {self.path} is closed")
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        self.records.append(record)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordError(Exception):
    """A record file cannot be read; the message names the file and the line."""


def read(path: str | os.PathLike[str]) -> list[Record]:
    """Every record in a JSON-lines file. Raises :class:`RecordError` (naming the file
    and the line) for a line that is not a record, and ``OSError``."""
    out: list[Record] = []
    name = os.fspath(path)
    with open(name, encoding="utf-8", errors="surrogateescape") as f:
        n = 0
        while line := f.readline(bounded.RECORD_LINE_BYTES + 1):
            n += 1
            if len(line) > bounded.RECORD_LINE_BYTES:
                raise RecordError(f"{name}:{n}: not a record (the line "
                                  f"{bounded.too_large(bounded.RECORD_LINE_BYTES)})")
            try:
                rec = parse_line(line, name, n)
            except RecordError:
                # A session killed mid-write leaves a partial last line; anything
                # else is a damaged log.
                if not line.endswith("\n"):
                    break
                raise
            if rec is not None:
                out.append(rec)
    return out


_OUTCOMES = ("exited", "signaled", "timed_out", "cancelled", "failed_to_start")
_DECISIONS = ("block", "failure", "interrupt", "skip", "refuse")
# Each known record's fields: the types a field may have (absent counts as None, so a
# field that may be absent lists type(None)).
_NONE = type(None)
_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "session.started": {"hooks": (list,), "no_hooks": (bool, _NONE)},
    "session.resumed": {"hooks": (list,), "no_hooks": (bool, _NONE)},
    "hook.started": {"hook": (str,), "event": (str,), "tool": (str, _NONE),
                     "input_digest": (str,)},
    "hook.effect": {"hook": (str,), "input_digest": (str,), "result": (dict,)},
    "hook.decided": {"hook": (str,), "event": (str,), "tool": (str, _NONE),
                     "decision": (str,), "reason": (str, _NONE), "failure": (str, _NONE),
                     "went_ahead": (bool, _NONE)},
    "hook.context": {"hook": (str,), "characters": (int,), "text": (str,)},
}
_RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "outcome": (str,), "returncode": (int, _NONE), "signal": (int, _NONE),
    "stdout": (str, _NONE), "stderr": (str, _NONE), "stdout_capped": (bool, _NONE),
    "stderr_capped": (bool, _NONE), "error": (str, _NONE), "errno": (int, _NONE),
    "elapsed": (int, float, _NONE),
}


def parse_line(line: str, name: str = "<records>", n: int = 1) -> Record | None:
    """One line of a record file: the record, or None for a blank line. Raises
    :class:`RecordError` for anything else, so what a reader of records (a replay, a
    resume, a transcript) is handed always has the fields it reads."""
    if not line.strip():
        return None
    try:
        rec = bounded.loads_json(line, max_bytes=bounded.RECORD_LINE_BYTES)
    except bounded.BoundsError as err:
        raise RecordError(f"{name}:{n}: not a record (it {err})") from err
    except ValueError as err:
        raise RecordError(f"{name}:{n}: not a JSON record ({bounded.one_line(str(err))})") \
            from err
    if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
        raise RecordError(f"{name}:{n}: not a record (no type)")
    problem = check_record(rec)
    if problem is not None:
        raise RecordError(f"{name}:{n}: not a {bounded.one_line(rec['type'])} record "
                          f"({problem})")
    return rec


def _wrong(data: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]]) -> str | None:
    for key, kinds in fields.items():
        value = data.get(key)
        # bool is an int to Python; a count or a status is never true or false.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return f'"{key}" is missing or of the wrong type'
    return None


def check_record(rec: Mapping[str, Any]) -> str | None:
    """What is wrong with a record of a known type, or None. Unknown types pass: a
    later version may write more kinds."""
    fields = _FIELDS.get(str(rec.get("type")))
    if fields is None:
        return None
    problem = _wrong(rec, fields)
    if problem is not None:
        return problem
    kind = rec["type"]
    if kind.startswith("session.") and not all(isinstance(h, dict) for h in rec["hooks"]):
        return '"hooks" holds a hook that is not an object'
    if kind == "hook.decided" and rec["decision"] not in _DECISIONS:
        return f'"decision" is not one of {", ".join(_DECISIONS)}'
    if kind == "hook.context" and rec["characters"] < 0:
        return '"characters" is negative'
    if kind == "hook.effect":
        result = rec["result"]
        problem = _wrong(result, _RESULT_FIELDS)
        if problem is None and result["outcome"] not in _OUTCOMES:
            problem = f'"outcome" is not one of {", ".join(_OUTCOMES)}'
        if problem is None and result["outcome"] == "exited" \
                and not isinstance(result.get("returncode"), int):
            problem = 'an "exited" run has no "returncode"'
        if problem is not None:
            return "result: " + problem
    return None


class Replay:
    """Serves recorded effects by (hook name, input digest), in recorded order.

    The same input may run more than once (the same call twice); each recorded run is
    served once, in order. Records not from :func:`read` are checked as it checks them:
    a malformed effect raises :class:`RecordError`.
    """

    def __init__(self, records: Iterable[Mapping[str, Any]]) -> None:
        self._effects: dict[tuple[str, str], deque[RunResult]] = defaultdict(deque)
        for n, rec in enumerate(records, 1):
            if rec.get("type") == "hook.effect":
                problem = check_record(rec)
                if problem is not None:
                    raise RecordError(f"record {n}: not a hook.effect record ({problem})")
                key = (str(rec["hook"]), str(rec["input_digest"]))
                self._effects[key].append(result_from_json(rec["result"]))

    def take(self, hook: str, input_digest: str) -> RunResult | None:
        queue = self._effects.get((hook, input_digest))
        if not queue:
            return None
        return queue.popleft()

    def remaining(self) -> int:
        return sum(len(q) for q in self._effects.values())


# -- resume ------------------------------------------------------------------------


def recorded_hooks(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The hook definitions of the last segment in a log, or None when it has none."""
    last: list[dict[str, Any]] | None = None
    for rec in records:
        if rec.get("type") in ("session.started", "session.resumed"):
            hooks = rec.get("hooks")
            last = [dict(h) for h in hooks] if isinstance(hooks, list) else []
    return last


class ResumePlan(NamedTuple):
    """Which hooks a crash resume runs: today's spec for each recorded hook that today's
    config defines exactly as recorded; the names of the rest, skipped with a warning."""

    run: tuple[HookSpec, ...]
    skipped: tuple[dict[str, Any], ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(protocol.resume_skipped_warning(str(d.get("name"))) for d in self.skipped)


def plan_resume(recorded: Iterable[Mapping[str, Any]], today: Sequence[HookSpec]) -> ResumePlan:
    """Match the recorded definitions against today's config.

    The order is the recorded one. A hook only today's config has is not run: a crash
    resume keeps the hooks its log recorded.
    """
    by_name = {h.name: h for h in today}
    run: list[HookSpec] = []
    skipped: list[dict[str, Any]] = []
    for d in recorded:
        spec = by_name.get(str(d.get("name")))
        if spec is not None and spec.definition() == dict(d):
            run.append(spec)
        else:
            skipped.append(dict(d))
    return ResumePlan(tuple(run), tuple(skipped))


def killed_during_hook(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The resume message when the log ends with a hook that started and never answered."""
    pending: Mapping[str, Any] | None = None
    for rec in records:
        kind = rec.get("type")
        if kind == "hook.started":
            pending = rec
        elif kind == "hook.effect" and pending is not None and (
            rec.get("hook") == pending.get("hook")
            and rec.get("input_digest") == pending.get("input_digest")
        ):
            pending = None
    if pending is None:
        return None
    event: Event = "PreToolUse" if pending.get("event") == "PreToolUse" else "UserPromptSubmit"
    tool = pending.get("tool")
    return protocol.killed_while_running(event, str(tool) if tool is not None else None)


# -- transcripts -------------------------------------------------------------------


def transcript_rows(records: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """The rows a transcript, a resume's replay and the exports show for hooks."""
    for rec in records:
        kind = rec.get("type")
        if kind == "hook.context":
            yield protocol.context_row(str(rec["hook"]), int(rec["characters"]))
        elif kind == "hook.decided":
            hook = str(rec["hook"])
            event: Event = "PreToolUse" if rec.get("event") == "PreToolUse" \
                else "UserPromptSubmit"
            decision = rec.get("decision")
            failure = rec.get("failure")
            if decision == "failure" and rec.get("went_ahead"):
                yield protocol.went_ahead_row(hook, str(failure), event)
            elif event == "UserPromptSubmit" and decision == "block":
                yield protocol.prompt_blocked(hook, rec.get("reason"))
            elif event == "UserPromptSubmit" and decision == "failure":
                yield protocol.prompt_failed(hook, str(failure))
            elif event == "UserPromptSubmit" and decision == "refuse":
                yield protocol.prompt_unreadable(str(rec.get("reason")))
