"""A listening Unix socket the host offers (as docker.sock or an ssh-agent would)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path


class UnixServer:
    """Listens at ``path`` on a thread of its own; counts each connection in ``seen``
    and answers it ``hello``."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.seen += 1
            with conn:
                conn.sendall(b"hello\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
