"""Every TCP socket on the way through the allow-list's proxy sends each piece at once
(``TCP_NODELAY``): the forwarder's connection from a client in the box, and the
proxy's own, the one it accepts on a loopback port and the one it opens to the origin.

With Nagle's algorithm a small piece waits for the peer's ACK of the one before, and a
client that has sent since it last read (a second request on the connection, a TLS
handshake in a tunnel) delays that ACK by 40 ms: a tunnel's keep-alive requests cost
that each. What is checked here is the option on the sockets themselves, not the time
(``./scripts/bench`` measures that).
"""

from __future__ import annotations

import base64
import socket
import threading
from pathlib import Path

import pytest
from helpers.origin import serving

from sandbox.network import allow, forwarder
from sandbox.network.proxy import Proxy

pytestmark = [pytest.mark.timeout(60)]


def nodelay(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_the_forwarder_sends_each_piece_to_the_client_at_once(tmp_path: Path) -> None:
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "proxy.sock")
    proxy.bind(path)
    proxy.listen(1)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    assert not nodelay(conn)  # a listener's connection starts without it
    relay = threading.Thread(target=forwarder._relay, args=(conn, path), daemon=True)
    relay.start()
    up, _ = proxy.accept()
    try:
        client.sendall(b"ping")
        assert up.recv(4) == b"ping"
        assert nodelay(conn)  # while it relays
        up.sendall(b"pong")
        assert client.recv(4) == b"pong"
    finally:
        client.close()
        up.close()
        relay.join(10)
        listener.close()
        proxy.close()
    assert not relay.is_alive()


def test_the_proxys_tcp_sockets_send_each_piece_at_once(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from the origin\n")
    seen: dict[str, bool] = {}
    with serving(tmp_path) as port:
        proxy = Proxy.start(allow.parse_all([f"127.0.0.1:{port}"]), port=0)
        handle, open_up = proxy._handle, proxy._open

        async def accepted(reader, writer):  # type: ignore[no-untyped-def]
            seen["accepted"] = nodelay(writer.get_extra_info("socket"))
            await handle(reader, writer)

        async def opened(authority: str, port: int):  # type: ignore[no-untyped-def]
            up = await open_up(authority, port)
            seen["upstream"] = nodelay(up[1].get_extra_info("socket"))
            return up

        proxy._handle, proxy._open = accepted, opened  # type: ignore[method-assign]
        try:
            auth = base64.b64encode(f"box:{proxy.token}".encode()).decode()
            with socket.create_connection(("127.0.0.1", proxy.port), 10) as c:
                c.sendall(f"GET http://127.0.0.1:{port}/hello.txt HTTP/1.1\r\n"
                          f"Host: 127.0.0.1:{port}\r\nProxy-Authorization: Basic {auth}"
                          "\r\n\r\n".encode())
                got = b""
                while data := c.recv(65536):
                    got += data
        finally:
            proxy.close()
    assert got.startswith(b"HTTP/1.0 200") and got.endswith(b"hello from the origin\n")
    assert seen == {"accepted": True, "upstream": True}
