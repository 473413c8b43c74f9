"""The Python API streams as ``serve`` does: ``Session.run(..., on_output=...)`` gets a
run's output as it comes, whole, and ``result.exit`` is the status ``serve`` reports
(130 cancelled, 124 timed out)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers.serve_client import Serve

from sandbox.session import Session

pytestmark = pytest.mark.isolation


def test_on_output_gets_each_chunk_as_it_comes_and_whole(project: Path) -> None:
    chunks: list[tuple[str, bytes, float]] = []
    with Session.open(str(project)) as session:
        started = time.monotonic()
        result = session.run(
            ["sh", "-c", "echo one; echo err >&2; sleep 1; head -c 3000000 /dev/zero"],
            on_output=lambda name, chunk: chunks.append((name, chunk, time.monotonic())))
    out = b"".join(c for name, c, _ in chunks if name == "stdout")
    assert out == b"one\n" + b"\0" * 3000000
    assert b"".join(c for name, c, _ in chunks if name == "stderr") == b"err\n"
    assert chunks[0][2] - started < 0.9  # before the pause ended
    assert result.exit == 0
    assert result.stdout_capped is True  # the result keeps its cap; the callback does not


def test_a_cancelled_or_timed_out_run_exits_as_serve_says(project: Path,
                                                         served: Serve) -> None:
    served.result("open")
    cancel = threading.Event()
    with Session.open(str(project)) as session:
        threading.Timer(0.5, cancel.set).start()
        cancelled = session.run(["sleep", "30"], cancel=cancel)
        timed_out = session.run(["sleep", "30"], timeout=0.5)
    rid = served.request("run", {"argv": ["sleep", "30"]})
    time.sleep(0.5)
    served.result("cancel", {"id": rid})
    by_serve = served.reply(rid)["result"]
    assert (cancelled.outcome, cancelled.exit) == (by_serve["outcome"], by_serve["exit"]) \
        == ("cancelled", 130)
    by_serve = served.result("run", {"argv": ["sleep", "30"], "timeout": 0.5})
    assert (timed_out.outcome, timed_out.exit) == (by_serve["outcome"], by_serve["exit"]) \
        == ("timed_out", 124)


def test_an_error_in_on_output_ends_the_run_and_is_raised(project: Path) -> None:
    def fail(name: str, chunk: bytes) -> None:
        raise RuntimeError("the harness's reader broke")

    with Session.open(str(project)) as session:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="reader broke"):
            session.run(["sh", "-c", "echo hi; sleep 30"], on_output=fail)
        assert time.monotonic() - started < 10
