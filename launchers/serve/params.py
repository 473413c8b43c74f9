"""Each method's parameters: their names and types, checked before anything runs.

A param that is unknown, missing when required, or of the wrong type is an
``invalid_params`` error naming the method and the param. The same table is what
``schema.json`` says of each request (a test holds them to each other).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from launchers.serve.wire import INVALID_PARAMS, WireError


def _string(v: Any) -> bool:
    return isinstance(v, str)


def _boolean(v: Any) -> bool:
    return isinstance(v, bool)


def _timeout(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v > 0)


def _argv(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(w, str) for w in v)


def _env(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _size(v: Any) -> bool:
    from launchers.serve.output import MAX_OUTPUT_CAP

    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_OUTPUT_CAP


def _cells(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 16


def _object(v: Any) -> bool:
    return isinstance(v, dict)


def _request_id(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


Check = tuple[Callable[[Any], bool], str]
STRING: Check = (_string, "a string")
BOOLEAN: Check = (_boolean, "true or false")
TIMEOUT: Check = (_timeout, "a number of seconds above 0")
ARGV: Check = (_argv, "a non-empty array of strings")
ENV: Check = (_env, "an object of strings")
OBJECT: Check = (_object, "an object")
SIZE: Check = (_size, "a number of bytes, an integer from 1 to 268435456 (256 MiB)")
REQUEST_ID: Check = (_request_id, "a request's id (an integer or a string)")
CELLS: Check = (_cells, "a number of character cells, an integer from 1 to 65535")

_SESSION = {"project": STRING, "config": STRING, "no_hooks": BOOLEAN,
            "no_sandbox": BOOLEAN, "openharness": STRING, "session_id": STRING,
            "records": STRING, "replay": STRING, "resume": STRING, "output_cap": SIZE}
_EVENT = {"event": STRING, "tool": STRING, "input": OBJECT, "prompt": STRING,
          "session_id": STRING, "permission_mode": STRING}

# method -> (param -> check, the required params)
METHODS: dict[str, tuple[dict[str, Check], tuple[str, ...]]] = {
    "open": (_SESSION, ()),
    "run": ({"argv": ARGV, "stdin": STRING, "cwd": STRING, "timeout": TIMEOUT,
             "host": BOOLEAN, "env": ENV, "stream": BOOLEAN, "output_cap": SIZE,
             "tty": BOOLEAN, "cols": CELLS, "rows": CELLS},
            ("argv",)),
    "hook": ({**_EVENT, "tool_use_id": STRING, "new_turn": BOOLEAN}, ("event",)),
    "hook_openharness": ({**_EVENT, "file": STRING}, ("event",)),
    "cancel": ({"id": REQUEST_ID}, ("id",)),
    "close": ({}, ()),
}


def check(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as given, once every one is known and of its type. Raises
    :class:`WireError` (``invalid_params``)."""
    known, required = METHODS[method]
    for name in params:
        if name not in known:
            allowed = ", ".join(known) or "none"
            raise WireError(INVALID_PARAMS, f"{method}: unknown param {_shown(name)} "
                            f"(the params: {allowed})")
    for name in required:
        if name not in params:
            raise WireError(INVALID_PARAMS, f"{method}: the param {name!r} is required")
    for name, value in params.items():
        ok, wanted = known[name]
        if not ok(value):
            raise WireError(INVALID_PARAMS, f"{method}: the param {name!r} must be {wanted}")
    return dict(params)


def _shown(name: str) -> str:
    from launchers.bounded import one_line

    return repr(one_line(name[:80]))
