"""The session's proxy: asyncio in a thread of the session, on a Unix socket.

A thread of the harness's own process, not a process of its own: it cannot outlive the
harness (a killed harness takes it along, with nothing to reap or to watch), the
refusals it records are the session's data without a channel to carry them, and a
session opens it without starting an interpreter. The cost is the interpreter's lock,
shared with the supervisor; the copy loops move 256 KiB at a time, so a download holds
the lock for a few microseconds per chunk (see ``./scripts/bench``).

A request's head is taken only as RFC 9112 writes it, and what goes on is made again
from what was read (:mod:`.head`): a 400 says what else was sent. Plain HTTP in
absolute form (``GET http://host/ HTTP/1.1``) is sent on in origin form with ``Host``
set from the URL and ``Connection: close`` (so the origin answers one request and the
connection cannot carry a second one to another host); ``CONNECT
host:port`` opens a tunnel, whose first words the proxy reads before they go on: a TLS
hello must name a listed server, clear HTTP is refused (:mod:`.hello`); nothing is
decrypted. Either way
the proxy resolves the name itself, checks every address (:func:`.allow.forbidden`) and
connects to the address it checked, never to the name. A refusal is an HTTP 403 whose
body names the host and the key; each is recorded (:meth:`Proxy.refusals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Sequence

from pathguard.records import NamedTuple
from sandbox.network import allow, head, hello

HEAD_LIMIT = 64 * 1024
CHUNK = 256 * 1024
CONNECT_TIMEOUT = 30.0
# Connections through the proxy at once. Each holds two descriptors of the harness's
# process, whose limit is often 1,024: a box that opened thousands would leave the
# harness none for its next run or its session's end. Clients open a few each.
MAX_CLIENTS = 128
# How long a connection may take to send its request's head.
HEAD_WAIT = 30.0
# A request without the session's password (a proxy on a loopback port).
NO_PASSWORD = ("asked without the proxy's password (by a client that ignores it, or by "
               "another local user)")
# Chrome and Chromium send an Encrypted Client Hello (a decoy one where the site has
# none) unless told not to.
HIDDEN_FIX = ("the proxy reads the server a tunnel's hello asks for; start a Chromium "
              "browser with --disable-features=EncryptedClientHello")
# What a refusal's report tells the user to do, unless the refusal says otherwise (a
# host's refusal names the entry to add: allow.add).
ADD_IT = "to allow it, add it to [sandbox] network"
# A head the proxy will not read (head.py): a request smuggled into it, or a client
# writing HTTP/1.1 its own way.
MALFORMED_FIX = ("the proxy takes CONNECT host:port or an absolute http:// URL, with a "
                 "head written as RFC 9112 writes it (CRLF line ends, printable ASCII, "
                 "no folded lines, one Content-Length)")
CHUNKED_FIX = "send the body with a Content-Length (the proxy does not send chunked bodies on)"


class Refusal(NamedTuple):
    """A request the proxy refused: the host and port asked for (as the box wrote the
    host: escape it before printing), why, how many times, and what to do."""

    host: str
    port: int
    why: str
    times: int = 1
    fix: str = ADD_IT


class RequestRefused(Exception):
    """``said``: whether the box is answered with a 403 (not inside a tunnel, where the
    connection is closed instead)."""

    def __init__(self, host: str, port: int, why: str, *, said: bool = True,
                 fix: str = ADD_IT) -> None:
        super().__init__(why)
        self.host, self.port, self.why, self.said, self.fix = host, port, why, said, fix


def own_addresses() -> tuple[allow.IPAddress, ...]:
    """This machine's addresses, on every interface."""
    import ipaddress

    import psutil

    out: list[allow.IPAddress] = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(ValueError):
                    out.append(ipaddress.ip_address(a.address.split("%", 1)[0]))
    return tuple(out)


class Proxy:
    """Started by :meth:`start` on ``path`` (made mode 0600 in a folder of mode 0700);
    :meth:`close` ends it and every connection through it."""

    def __init__(self, entries: Sequence[allow.Entry], token: str = "") -> None:
        self.entries = tuple(entries)
        self.token = token
        self._token = token.encode()
        self.own = own_addresses()
        self._refusals: dict[tuple[str, int, str], Refusal] = {}
        # Every refusal in order, for the runs that ask what they were refused.
        self._log: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._clients = 0  # connections being served (the loop's thread alone)
        self._thread = threading.Thread(target=self._main, daemon=True,
                                        name="harness-sandbox-proxy")
        self.path = ""
        self.port = 0

    @classmethod
    def start(cls, entries: Sequence[allow.Entry], *, path: str = "",
              port: int | None = None) -> Proxy:
        """Listen on the Unix socket ``path``, or on 127.0.0.1 (``port``, 0 for any),
        where any local user can connect: there each request must carry :attr:`token`,
        a password made here, as its ``Proxy-Authorization``."""
        import secrets

        self = cls(entries, "" if port is None else secrets.token_urlsafe(18))
        self.path = path
        self.port = -1 if port is None else port
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def close(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()

    def refusals(self) -> list[Refusal]:
        with self._lock:
            return list(self._refusals.values())

    def mark(self) -> int:
        """Where the refusal log stands now (see :meth:`since`)."""
        with self._lock:
            return len(self._log)

    def since(self, mark: int) -> tuple[tuple[str, int, str], ...]:
        """The refusals after ``mark``: host, port and why, in order."""
        with self._lock:
            return tuple(self._log[mark:])

    def _record(self, err: RequestRefused) -> None:
        # Refusals without a host (no password, a head not read) kept apart by kind.
        key = (err.host, err.port, "" if err.host else err.fix)
        with self._lock:
            self._log.append((err.host, err.port, err.why))
            old = self._refusals.get(key)
            self._refusals[key] = Refusal(err.host, err.port, err.why,
                                          1 if old is None else old.times + 1, err.fix)

    # -- the loop, in its thread -------------------------------------------------------

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            server = await self._listen()
        except BaseException as err:
            self._error = err
            self._ready.set()
            return
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _listen(self) -> asyncio.Server:
        if self.port >= 0:
            server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
            self.port = server.sockets[0].getsockname()[1]
            return server
        folder = os.path.dirname(self.path)
        os.mkdir(folder, 0o700)
        # The folder is ours and 0700 already: nobody else reaches the socket while its
        # mode is still the umask's.
        server = await asyncio.start_unix_server(self._client, self.path)
        os.chmod(self.path, 0o600)
        return server

    async def _client(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        if self._clients >= MAX_CLIENTS:
            with contextlib.suppress(OSError):
                writer.write(_answer(503, "Service Unavailable", "harness-sandbox: the box "
                                     f"has {MAX_CLIENTS} connections through the proxy "
                                     "already; close some and try again.\n"))
            writer.close()
            return
        self._clients += 1
        try:
            await self._handle(reader, writer)
        except RequestRefused as err:
            self._record(err)
            with contextlib.suppress(OSError):
                if err.said:
                    writer.write(_forbidden(err))
                    await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, TimeoutError):
            pass
        finally:
            self._clients -= 1
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        # Within a time: a connection that says nothing holds one of MAX_CLIENTS.
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_WAIT)
        if len(raw) > HEAD_LIMIT:
            raise ValueError("request head too long")
        try:
            request = head.parse(raw)
        except head.Malformed as err:
            # Without the password (on a loopback port) the head is not read further.
            if self._token and not head.authorized(head.any_auth(raw), self._token):
                await _unauthorized(writer)
            await _malformed(writer, err)
            return
        if self._token and not head.authorized(request.auth, self._token):
            await _unauthorized(writer)
        up_reader, up_writer = await self._open(request.host, request.port)
        try:
            if request.tunnel:
                await self._tunnel(request, (reader, writer), (up_reader, up_writer))
                return
            up_writer.write(request.head)
            # One request: its body and nothing after it (a second request sent behind
            # it could name another host to an origin that reads on), and when the
            # origin's answer has ended, so has the connection (a client that keeps it
            # open would otherwise hold it for the session).
            ask = asyncio.ensure_future(_copy_body(reader, up_writer, request.body))
            try:
                await _copy(up_reader, writer)
            finally:
                ask.cancel()
                await asyncio.gather(ask, return_exceptions=True)
        finally:
            up_writer.close()

    async def _tunnel(self, request: head.Request,
                      box: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                      up: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        """The tunnel, once the box's first bytes are judged (:mod:`.hello`): the
        origin's answer flows meanwhile (a server may speak first)."""
        writer_down = box[1]
        writer_down.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        down = asyncio.ensure_future(_copy(up[0], writer_down))
        try:
            first = await self._first_words(box[0], request)
            up[1].write(first)
            await asyncio.gather(_copy(box[0], up[1]), down)
        finally:
            down.cancel()
            await asyncio.gather(down, return_exceptions=True)

    async def _first_words(self, reader: asyncio.StreamReader, request: head.Request) -> bytes:
        """What the box sends first in a tunnel, read until it tells what it is; raises
        :class:`RequestRefused` for clear HTTP, a TLS hello that cannot be read, or one naming
        a server the list does not have."""
        data = await reader.read(CHUNK)
        ended = not data
        while True:
            try:
                kind, name = hello.judge(data, ended=ended)
            except hello.Hidden as err:
                raise RequestRefused(request.host, request.port, f"its TLS hello in the tunnel "
                              f"hides the server it asks for ({err})", said=False,
                              fix=HIDDEN_FIX) from None
            except ValueError as err:
                raise RequestRefused(request.host, request.port, f"its TLS hello in the tunnel "
                              f"cannot be read ({err})", said=False,
                              fix="the proxy reads the server name a tunnel's hello "
                              "asks for before anything goes on") from None
            if kind != hello.MORE:
                break
            more = await reader.read(CHUNK)
            ended = not more
            data += more
        if kind == hello.CLEAR_HTTP:
            raise RequestRefused(request.host, request.port, "clear HTTP inside a CONNECT tunnel",
                          said=False, fix="send an http:// URL to the proxy as it is "
                          "(not through a tunnel)")
        if kind == hello.TLS and name is not None:
            named = allow.host_of(name)
            if allow.match(self.entries, named, request.port) is None:
                from sandbox.text import escape

                raise RequestRefused(named, request.port, "named by a TLS hello in a tunnel to "
                              f"{escape(request.host)}; not on the [sandbox] network list",
                              said=False, fix=allow.add(named, request.port))
        return data

    async def _open(self, authority: str, port: int
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to an address of ``authority`` the list allows. Raises RequestRefused."""
        host = allow.host_of(authority)
        entry = allow.match(self.entries, host, port)
        if entry is None:
            raise RequestRefused(host, port, "not on the [sandbox] network list",
                          fix=allow.add(host, port))
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        import ipaddress

        last: str | None = None
        fix = ADD_IT
        for family, _, _, _, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            why = allow.forbidden(address, entry, self.own, listed=self.entries, port=port)
            if why is not None:
                last, fix = f"its address {why}", allow.fix(address, entry, port)
                continue
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(asyncio.open_connection(
                    str(address), port, family=family, limit=CHUNK), CONNECT_TIMEOUT)
            last = last or f"no connection to {address} port {port}"
        if last is None or last.startswith("no connection"):
            raise OSError(last or f"{host} has no address")
        raise RequestRefused(host, port, last, fix=fix)


async def _unauthorized(writer: asyncio.StreamWriter) -> None:
    """A 407; raises :class:`RequestRefused`."""
    writer.write(_answer(407, "Proxy Authentication Required", "harness-sandbox: the proxy "
                         "asks for the password in the box's proxy variables.\n",
                         'Proxy-Authenticate: Basic realm="harness-sandbox"\r\n'))
    await writer.drain()
    # Said once for all, not by the host each asked for: another local user chooses
    # those, as many as it likes.
    raise RequestRefused("", 0, NO_PASSWORD, said=False, fix="use a client that sends the user "
                  "and password of the box's proxy URL (HTTPS_PROXY)")


async def _malformed(writer: asyncio.StreamWriter, err: head.Malformed) -> None:
    """A head the proxy does not take (:mod:`.head`): a 411 for a chunked body, a 400
    for the rest, saying why; raises :class:`RequestRefused`, without a host (the line that
    would name it may be what is wrong)."""
    if isinstance(err, head.Chunked):
        writer.write(_answer(411, "Length Required", "harness-sandbox: the box's proxy "
                             "sends a request's body on with its Content-Length only "
                             "(not chunked).\n"))
        fix = CHUNKED_FIX
    else:
        writer.write(_answer(400, "Bad Request", "harness-sandbox: the box's proxy refused "
                             f"the request: {err.why}; {MALFORMED_FIX}.\n"))
        fix = MALFORMED_FIX
    await writer.drain()
    raise RequestRefused("", 0, err.why, said=False, fix=fix)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     size: int) -> None:
    """``size`` bytes from ``reader`` to ``writer``; what follows stays unsent."""
    try:
        while size > 0 and (data := await reader.read(min(size, CHUNK))):
            writer.write(data)
            await writer.drain()
            size -= len(data)
    except OSError:
        writer.close()


def _forbidden(err: RequestRefused) -> bytes:
    from sandbox.text import escape

    return _answer(403, "Forbidden", f"harness-sandbox: the box may not reach "
                   f"{escape(err.host)} port {err.port}: {err.why}; {escape(err.fix)} "
                   "(in the user config).\n")


def _answer(code: int, reason: str, body: str, extra: str = "") -> bytes:
    data = body.encode("utf-8", "replace")
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n"
            ).encode() + data
