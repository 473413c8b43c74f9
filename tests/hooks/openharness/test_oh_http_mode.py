"""openHarness HTTP mode against a real server on 127.0.0.1: the envelope posted, each
reply's meaning, and every way the exchange can fail."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers.oh_files import config, ctx_for

from launchers import openharness as oh
from launchers.openharness import Context, Result

# Every test has a trust store of its own; write() trusts what it writes.
pytestmark = pytest.mark.usefixtures("oh_store")


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
