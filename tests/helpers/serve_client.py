"""A test's client of ``harness-sandbox serve``: the real command, on pipes. Every line
the server writes is checked against the protocol's schema as it is read."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers.schema_check import check

CLI = [sys.executable, "-m", "launchers"]


class Serve:
    """``harness-sandbox serve`` running; :meth:`request` sends, :meth:`reply` waits."""

    def __init__(self, *options: str, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "serve", *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env if env is not None else dict(os.environ),
            cwd=cwd)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self.replies: dict[str, dict[str, Any]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self.next_message()
        assert self.hello.get("event") == "ready", self.hello

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            check(message, "server_message")
            self.messages.put(message)
        self.messages.put(None)

    def next_message(self, timeout: float = 60) -> dict[str, Any]:
        message = self.messages.get(timeout=timeout)
        assert message is not None, f"the server ended: {self.stderr_text()}"
        self.received.append(message)
        if "event" in message and "id" in message:  # about a request in flight
            self.events.setdefault(json.dumps(message["id"]), []).append(message)
        elif "id" in message:
            self.replies[json.dumps(message["id"])] = message
        return message

    def send_line(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None, *,
                rid: Any = None) -> Any:
        if rid is None:
            self._next += 1
            rid = self._next
        message: dict[str, Any] = {"id": rid, "method": method}
        if params is not None:
            message["params"] = params
        check(message, "request")
        self.send_line(json.dumps(message).encode())
        return rid

    def reply(self, rid: Any, timeout: float = 60) -> dict[str, Any]:
        key = json.dumps(rid)
        while key not in self.replies:
            self.next_message(timeout)
        return self.replies.pop(key)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.reply(self.request(method, params))

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = self.call(method, params)
        assert "result" in message, message
        check(message["result"], f"{method}_result")
        return dict(message["result"])

    def close(self, timeout: float = 60) -> int:
        """End the session with close (or stdin's end); the exit status."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")


def config_file(folder: Path, hooks: Sequence[str]) -> Path:
    """A user config at ``folder/config.toml`` holding ``hooks`` (TOML tables)."""
    path = folder / "config.toml"
    path.write_text("\n".join(hooks))
    return path
