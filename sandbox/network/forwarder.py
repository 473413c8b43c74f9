"""The box's end of the proxy: ``python -I -S forwarder.py SOCKET PORT -- CMD [ARG...]``.

Run by bwrap as the box's command, under the box's filter. It listens on
``127.0.0.1:PORT`` (before the command starts, so the first request finds it), leaves a
grandchild that relays each connection to the proxy's Unix socket ``SOCKET``, then
executes the command in its own place. The grandchild's parent is the box's init
(bwrap's PID 1), not the command, which never sees a child it did not start; it dies
with the box, when the command ends. Its standard streams are /dev/null, so it holds
none of the run's pipes open.

A standalone file: it imports only the standard library, ``-I -S`` (no site, no user
paths, no environment variables read by Python) keeps its start small and the box's
files out of it.
"""

import os
import socket
import sys
import threading

CHUNK = 256 * 1024


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (src, dst):
            try:  # noqa: SIM105 (contextlib would cost the box's start an import)
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _relay(conn: socket.socket, path: str) -> None:
    # Each piece the proxy sends back goes to the client at once. With Nagle's algorithm
    # a small piece waits for the client's ACK of the one before, which a client that
    # has sent since it last read (a second request on the connection, a TLS handshake)
    # delays by 40 ms: a tunnel's keep-alive requests cost that each. The proxy's own
    # TCP sockets (asyncio's) have it already.
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(path)
    except OSError:
        conn.close()
        up.close()
        return
    back = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
    back.start()
    _pipe(conn, up)
    back.join()
    conn.close()
    up.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        threading.Thread(target=_relay, args=(conn, path), daemon=True).start()


def _detach(listener: socket.socket, path: str) -> None:
    """Fork twice: the grandchild serves, reparented to the box's init."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        if os.fork():
            os._exit(0)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _serve(listener, path)
    finally:
        os._exit(0)


def main(argv: list[str]) -> None:
    path, port, sep, command = argv[0], int(argv[1]), argv[2], argv[3:]
    if sep != "--" or not command:
        sys.exit("usage: forwarder.py SOCKET PORT -- CMD [ARG...]")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(512)
    _detach(listener, path)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as err:
        # As bwrap says it, so that the run reads as a command that could not start.
        os.write(2, f"bwrap: execvp {command[0]}: {os.strerror(err.errno or 0)}\n"
                 .encode("utf-8", "surrogateescape"))
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
