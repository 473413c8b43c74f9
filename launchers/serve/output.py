"""A run's output on the wire: the result's copy, capped, and a streamed run's events,
whole unless the run asked for a cap.

A result holds at most the session's ``output_cap`` bytes of each stream (``open``'s
``output_cap``; 1 MiB unless asked), or the run's own ``output_cap``. A streamed run
(``"stream": true``) sends every byte as ``output`` events, UTF-8 decoded across reads
(a byte that is not UTF-8 as a ``\\udcXX`` escape); its result's ``stdout`` and
``stderr`` are empty. With the run's ``output_cap`` the events of a stream stop there.
Wherever a stream was cut, ``stdout_capped_at`` (``stderr_capped_at``) says at which
byte of the command's output, and the rest was read and dropped.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchers.serve.server import Emit
    from sandbox.plan import RunResult
    from sandbox.process.pipes import Pipes

# The largest cap a session or a run may ask for: a result is one line in memory.
MAX_OUTPUT_CAP = 256 << 20
STREAMS = ("stdout", "stderr")


class Stream:
    """The ``on_output`` of a streamed run: each chunk sent as an ``output`` event."""

    def __init__(self, emit: Emit, cap: int | None) -> None:
        self.emit = emit
        self.cap = cap
        self.sent = dict.fromkeys(STREAMS, 0)
        self.cut: dict[str, int | None] = dict.fromkeys(STREAMS)
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")(
            errors="surrogateescape") for name in STREAMS}

    def __call__(self, name: str, chunk: bytes) -> None:
        if self.cut[name] is not None:
            return
        sent = self.sent[name]
        if self.cap is not None and sent + len(chunk) > self.cap:
            chunk = chunk[:self.cap - sent]
            self.cut[name] = self.cap
        self.sent[name] = sent + len(chunk)
        self._send(name, self.decoders[name].decode(chunk, final=self.cut[name] is not None))

    def finish(self) -> None:
        """What the decoders still hold (a sequence the command never finished)."""
        for name in STREAMS:
            if self.cut[name] is None:
                self._send(name, self.decoders[name].decode(b"", final=True))

    def _send(self, name: str, text: str) -> None:
        if text:
            self.emit({"event": "output", "stream": name, "data": text})


def capped_at(cap: int, base: type[Pipes]) -> type[Pipes]:
    """``base`` with the run's own cap for what the result holds."""

    class Capped(base):  # type: ignore[valid-type,misc]
        def __init__(self, proc: Any, data: bytes, _session_cap: int) -> None:
            super().__init__(proc, data, cap)

    return Capped


def cuts(result: RunResult, stream: Stream | None) -> dict[str, Any]:
    """The capped flags and where each stream was cut (None: it was not)."""
    if stream is not None:
        at = stream.cut
    else:
        at = {"stdout": len(result.stdout) if result.stdout_capped else None,
              "stderr": len(result.stderr) if result.stderr_capped else None}
    return {"stdout_capped": at["stdout"] is not None,
            "stderr_capped": at["stderr"] is not None,
            "stdout_capped_at": at["stdout"], "stderr_capped_at": at["stderr"]}
