"""Real origins on 127.0.0.1 for network tests: an HTTP server of a folder (counting
requests), one over TLS, and a bare TCP server answering each connection its own way."""

from __future__ import annotations

import contextlib
import functools
import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(root: Path) -> Iterator[int]:
    """Serve ``root`` over HTTP/1.0 on 127.0.0.1; yields the port."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TlsOrigin:
    """What :func:`serving_tls` serves on: its port, and the server name each hello
    that reached it asked for (None for a hello that named none)."""

    def __init__(self) -> None:
        self.port = 0
        self.names: list[str | None] = []


@contextmanager
def serving_tls(root: Path, keys: Path) -> Iterator[TlsOrigin]:
    """Serve ``root`` over HTTPS on 127.0.0.1 with a certificate made now by openssl in
    ``keys`` (any name is accepted: the clients here do not check it), recording the
    server name of every hello that reached it."""
    import ssl
    import subprocess

    cert, key = keys / "cert.pem", keys / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=origin", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    origin = TlsOrigin()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def named(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None,
              ctx: ssl.SSLContext) -> None:
        origin.names.append(name)

    context.sni_callback = named
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    origin.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield origin
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def listening(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers each connection with ``handle``, one at a
    time; yields its port. It ends on a last connection of its own, not by closing the
    socket under the thread waiting in ``accept`` (whose next call could then take a
    later test's socket, by the same number, and its connections)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    done = threading.Event()

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                if done.is_set():
                    return
                conn.settimeout(5.0)
                with contextlib.suppress(OSError):
                    handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        done.set()
        socket.create_connection(("127.0.0.1", port)).close()
        thread.join()
        listener.close()
