"""The lines: one request per line in, one message per line out.

A request line is bounded (:data:`REQUEST_LINE_BYTES`) and its nesting too (the
project's :data:`launchers.bounded.MAX_DEPTH`), both measured before it is parsed. What
cannot be read is a :class:`WireError` with a stable ``code``; the reader then goes on
with the next line. Messages out are written whole, one at a time (one lock), as ASCII
JSON: a command's bytes that are not UTF-8 travel as ``\\udcXX`` escapes, as records
keep them.
"""

from __future__ import annotations

import json
import threading
from typing import IO, Any

from launchers import bounded

PROTOCOL_VERSION = 1
# One request line, newline excluded: room for a run's stdin or a tool call's
# arguments (the envelope a hook receives is bounded at 32 MiB as well).
REQUEST_LINE_BYTES = 32 << 20
_SKIP_CHUNK = 1 << 16

# The stable codes of an error reply.
PARSE_ERROR = "parse_error"            # the line is not JSON (or not UTF-8)
LINE_TOO_LONG = "line_too_long"        # past REQUEST_LINE_BYTES
TOO_DEEP = "too_deep"                  # nests deeper than bounded.MAX_DEPTH
INVALID_REQUEST = "invalid_request"    # not an object with an id and a method
UNKNOWN_METHOD = "unknown_method"
INVALID_PARAMS = "invalid_params"      # a param missing, unknown or of the wrong type
DUPLICATE_ID = "duplicate_id"          # an id already in flight
BUSY = "busy"                          # past MAX_IN_FLIGHT requests
NOT_OPEN = "not_open"                  # run or hook before open
ALREADY_OPEN = "already_open"
CLOSING = "closing"                    # arrived while the session ends
CONFIG = "config"                      # the user config (or openHarness file) cannot be loaded
POLICY = "policy"                      # a path it names cannot be used
SANDBOX = "sandbox"                    # the box cannot be built
REFUSED = "refused"                    # a hook lies where the agent could change it
INTERRUPTED = "interrupted"            # an openHarness event cancelled
INTERNAL = "internal"                  # a bug in harness-sandbox

CODES = (PARSE_ERROR, LINE_TOO_LONG, TOO_DEEP, INVALID_REQUEST, UNKNOWN_METHOD,
         INVALID_PARAMS, DUPLICATE_ID, BUSY, NOT_OPEN, ALREADY_OPEN, CLOSING, CONFIG,
         POLICY, SANDBOX, REFUSED, INTERRUPTED, INTERNAL)

RequestId = int | str | None


class WireError(Exception):
    """A request that gets an error reply. ``data`` goes beside the message (a refused
    session's audit document)."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def read_line(stream: IO[bytes]) -> bytes | None:
    """The next request line without its newline, or None at the end of the stream.
    Raises :class:`WireError` (``line_too_long``) for a line past the limit, whose rest
    has been read and dropped."""
    line = stream.readline(REQUEST_LINE_BYTES + 1)
    if not line:
        return None
    if line.endswith(b"\n"):
        return line[:-1]
    if len(line) <= REQUEST_LINE_BYTES:
        return line  # the last line, with no newline
    while (rest := stream.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
        pass
    raise WireError(LINE_TOO_LONG, "the request line is larger than "
                    f"{bounded.size_text(REQUEST_LINE_BYTES)} (REQUEST_LINE_BYTES)")


def parse(line: bytes) -> Any:
    """The JSON value of a line. Raises :class:`WireError`."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise WireError(PARSE_ERROR, f"the request line is not UTF-8 ({err.reason} at "
                        f"byte {err.start})") from err
    try:
        return bounded.loads_json(text)
    except bounded.BoundsError as err:
        raise WireError(TOO_DEEP, f"the request {err}") from err
    except ValueError as err:
        raise WireError(PARSE_ERROR, "the request line is not JSON: "
                        f"{bounded.one_line(str(err))}") from err


class Writer:
    """Writes whole messages to ``stream`` from any thread. A stream that is gone (the
    harness died) is remembered: :attr:`broken` is set, and the session ends."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = threading.Event()

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")
        with self._lock:
            if self.broken.is_set():
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                self.broken.set()

    def result(self, rid: RequestId, result: dict[str, Any]) -> None:
        self.send({"id": rid, "result": result})

    def error(self, rid: RequestId, err: WireError) -> None:
        body: dict[str, Any] = {"code": err.code, "message": err.message}
        if err.data is not None:
            body["data"] = err.data
        self.send({"id": rid, "error": body})
