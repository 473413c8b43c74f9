"""openHarness hooks: ``hooks:`` in ``.oh/config.yaml`` over the same backends.

A second front end beside ``[[hooks]]``: :mod:`.config` loads the file, :mod:`.words`
splits a command for the path guard, :mod:`.envelope` says what a hook is told,
:mod:`.answers` what its answer means, :mod:`.http` posts to an HTTP hook, and
:mod:`.fire` runs an event's hooks through the session's runner and merges the answers.
The names a harness uses are here.
"""

from launchers.openharness.answers import OhAnswer, answer_of_http, answer_of_run, parse_answer
from launchers.openharness.config import (
    EVENTS,
    GATING_EVENTS,
    TOOL_EVENTS,
    OhConfig,
    OhConfigError,
    OhHook,
    match_tool,
    parse,
)
from launchers.openharness.envelope import ENV_VALUE_CAP, Context, cut_utf8, env_vars, envelope
from launchers.openharness.fire import (
    CommandRunner,
    OhDecision,
    Result,
    admit,
    check,
    fire,
    run_hook,
    session_runner,
)
from launchers.openharness.trust import load
from launchers.openharness.words import guard_words, split_words

__all__ = [
    "ENV_VALUE_CAP", "EVENTS", "GATING_EVENTS", "TOOL_EVENTS", "CommandRunner", "Context",
    "OhAnswer", "OhConfig", "OhConfigError", "OhDecision", "OhHook", "Result", "admit",
    "answer_of_http", "answer_of_run", "check", "cut_utf8", "env_vars", "envelope", "fire",
    "guard_words", "load", "match_tool", "parse", "parse_answer", "run_hook",
    "session_runner", "split_words",
]
