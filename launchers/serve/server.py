"""The server: read requests, run them on threads, answer in any order, end cleanly.

``open``, ``cancel`` and ``close`` are answered in order, on the reading thread; ``run``,
``hook`` and ``hook_openharness`` each get a thread, and at most :data:`MAX_RUNNING` of
them work at once (the rest wait their turn, still in flight and still cancellable).
The session ends at ``close``, at the end of stdin, when stdout is gone, at SIGTERM or
SIGHUP, or when the process that started the server exits: every request in flight is
cancelled (its tree ended, as Esc ends it) and answered, then the session is closed
(everything it made removed, its records closed). A server killed outright is cleaned
up by the session's watchdog.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

from launchers.serve import params, wire
from launchers.serve.methods import Defaults, ServeSession
from launchers.serve.wire import RequestId, WireError, Writer
from pathguard.records import NamedTuple

# Requests in flight at once (queued or working); past it a request is answered "busy".
MAX_IN_FLIGHT = 4096
# Requests working at once: each run or hook holds a box, and the box has its bounds.
MAX_RUNNING = 16

# A method: its params, its cancel, and what sends an event about its request.
Emit = Callable[[dict[str, Any]], None]
Handler = Callable[[dict[str, Any], threading.Event, Emit], dict[str, Any]]


class _Ended(BaseException):
    """A signal that ends the session, raised on the reading thread (not an Exception:
    no handler of a request takes it for a bug)."""


class Flight(NamedTuple):
    rid: RequestId
    cancel: threading.Event


def _key(rid: RequestId) -> str:
    return json.dumps(rid)  # 1 and "1" are different ids


class Server:
    def __init__(self, writer: Writer, defaults: Defaults) -> None:
        self.writer = writer
        self.state = ServeSession(defaults)
        self._flights: dict[str, Flight] = {}
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_RUNNING)
        self._closing = False
        self._handlers: dict[str, Handler] = {
            "run": self.state.run, "hook": self.state.hook,
            "hook_openharness": self.state.hook_openharness}

    def hello(self) -> dict[str, Any]:
        from launchers.cli.main import version
        from launchers.serve.output import MAX_OUTPUT_CAP
        from sandbox.policy import DEFAULT_OUTPUT_CAP

        return {"event": "ready", "version": wire.PROTOCOL_VERSION,
                "server": f"harness-sandbox {version()}", "pid": os.getpid(),
                "limits": {"request_line_bytes": wire.REQUEST_LINE_BYTES,
                           "max_in_flight": MAX_IN_FLIGHT, "max_running": MAX_RUNNING,
                           "output_cap": DEFAULT_OUTPUT_CAP,
                           "max_output_cap": MAX_OUTPUT_CAP}}

    def serve(self, stream: IO[bytes]) -> int:
        """Serve until the session ends; the exit status."""
        try:
            self.writer.send(self.hello())
            while not self._closing and not self.writer.broken.is_set():
                try:
                    line = wire.read_line(stream)
                except WireError as err:
                    self.writer.error(None, err)
                    continue
                if line is None:
                    break
                if line.strip():
                    self.handle(line)
        except (_Ended, KeyboardInterrupt):
            pass
        finally:
            _quiet_signals()
            if not self._closing:
                self.end()
        return 0

    # -- one request ---------------------------------------------------------------

    def handle(self, line: bytes) -> None:
        rid: RequestId = None
        try:
            request = wire.parse(line)
            rid = _id_of(request)
            rid, method, given = _request(request)
            checked = params.check(method, given)
            self._dispatch(rid, method, checked)
        except WireError as err:
            self.writer.error(rid, err)
        except Exception as err:  # a bug: said, and the session goes on
            self.writer.error(rid, _internal(err))

    def _dispatch(self, rid: RequestId, method: str, p: dict[str, Any]) -> None:
        if method == "open":
            if self.state.is_open:
                raise WireError(wire.ALREADY_OPEN, "a session is open already; one server "
                                "serves one session")
            self.writer.result(rid, self.state.open(p))
        elif method == "cancel":
            flight = self._flights.get(_key(p["id"]))
            if flight is not None:
                flight.cancel.set()
            self.writer.result(rid, {"cancelled": flight is not None})
        elif method == "close":
            warnings = self.end()
            self.writer.result(rid, {"warnings": warnings})
        else:
            self._start(rid, self._handlers[method], p)

    def _start(self, rid: RequestId, handler: Handler, p: dict[str, Any]) -> None:
        if not self.state.is_open:
            raise WireError(wire.NOT_OPEN, "no session is open: send open first")
        key = _key(rid)
        flight = Flight(rid, threading.Event())
        with self._lock:
            if key in self._flights:
                raise WireError(wire.DUPLICATE_ID, f"the id {key} is in flight already")
            if len(self._flights) >= MAX_IN_FLIGHT:
                raise WireError(wire.BUSY, f"{MAX_IN_FLIGHT} requests are in flight "
                                "(MAX_IN_FLIGHT); wait for a reply")
            self._flights[key] = flight
            worker = threading.Thread(target=self._work, args=(key, flight, handler, p),
                                      name=f"serve-{key[:40]}", daemon=True)
            self._threads.add(worker)
        try:
            worker.start()
        except RuntimeError as err:  # no thread to be had
            with self._lock:
                del self._flights[key]
                self._threads.discard(worker)
            raise WireError(wire.BUSY, f"no thread could be started for it: {err}") from err

    def _work(self, key: str, flight: Flight, handler: Handler, p: dict[str, Any]) -> None:
        failure: WireError | None = None
        result: dict[str, Any] = {}
        try:
            with self._slots:
                result = handler(p, flight.cancel,
                                 lambda event: self.writer.send({"id": flight.rid, **event}))
        except WireError as err:
            failure = err
        except Exception as err:
            failure = _internal(err)
        with self._lock:
            # Out of flight before the reply: the harness may reuse the id at once.
            del self._flights[key]
        if failure is None:
            self.writer.result(flight.rid, result)
        else:
            self.writer.error(flight.rid, failure)
        with self._lock:
            self._threads.discard(threading.current_thread())

    # -- the end -------------------------------------------------------------------

    def end(self) -> list[str]:
        """Cancel and answer everything in flight, then close the session."""
        self._closing = True
        with self._lock:
            for flight in self._flights.values():
                flight.cancel.set()
            threads = list(self._threads)
        for t in threads:
            t.join()
        return self.state.close()


def _id_of(value: Any) -> RequestId:
    """The request's id, if it has one that can be echoed."""
    rid = value.get("id") if isinstance(value, dict) else None
    return rid if isinstance(rid, str) or (isinstance(rid, int)
                                           and not isinstance(rid, bool)) else None


def _request(value: Any) -> tuple[RequestId, str, dict[str, Any]]:
    """The id, method and params of a request. Raises :class:`WireError`."""
    if not isinstance(value, dict):
        raise WireError(wire.INVALID_REQUEST, "a request is a JSON object with an id, a "
                        "method and params")
    rid = _id_of(value)
    if rid is None:
        raise WireError(wire.INVALID_REQUEST, 'the request has no "id" (an integer or a '
                        "string)")
    for name in value:
        if name not in ("id", "method", "params"):
            raise WireError(wire.INVALID_REQUEST, f"unknown key {name[:80]!r} in the "
                            "request (the keys: id, method, params)")
    method = value.get("method")
    if not isinstance(method, str):
        raise WireError(wire.INVALID_REQUEST, 'the request has no "method" (a string)')
    if method not in params.METHODS:
        raise WireError(wire.UNKNOWN_METHOD, f"unknown method {method[:80]!r} (the "
                        f"methods: {', '.join(params.METHODS)})")
    given = value.get("params", {})
    if not isinstance(given, dict):
        raise WireError(wire.INVALID_PARAMS, f"{method}: params must be an object")
    return rid, method, given


def _internal(err: BaseException) -> WireError:
    from launchers.cli.crash import crash_line

    line = crash_line("serve", err)
    print(line, file=__import__("sys").stderr, flush=True)
    return WireError(wire.INTERNAL, line)


# -- signals and the parent ------------------------------------------------------------


def _raise_ended(signum: int, frame: FrameType | None) -> None:
    raise _Ended(signum)


def _quiet_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def watch_parent() -> None:
    """SIGTERM to this process when the process that started it exits (the harness
    died while something else still holds our stdin open)."""
    parent = os.getppid()
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):
        return
    if os.getppid() != parent:  # it died before we looked
        os.close(fd)
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def wait() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="serve-parent", daemon=True).start()


def watch_reader(fd: int) -> None:
    """SIGTERM to this process when the reader of ``fd`` (the protocol's stdout) goes
    away (``serve | head -c 10``, a harness killed while a child of it still holds our
    stdin open): poll() says POLLERR on a pipe's write end once no reader is left, and
    POLLHUP on a socket whose peer shut it; a file or a terminal says neither."""
    poller = select.poll()
    try:
        poller.register(fd, 0)  # POLLERR and POLLHUP are reported whatever is asked
    except (OSError, ValueError):
        return

    def wait() -> None:
        while True:
            events = poller.poll()
            if any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL)
                   for _, ev in events):
                break
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="serve-reader", daemon=True).start()


def serve(stdin: IO[bytes], stdout: IO[bytes], defaults: Defaults) -> int:
    """Serve one session on the two streams. Signals, the end of stdin, a reader of
    stdout that goes away and the parent's exit end it cleanly, with status 0."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_ended)
    if os.getppid() != 1:
        watch_parent()
    with contextlib.suppress(OSError, ValueError):
        watch_reader(stdout.fileno())
    return Server(Writer(stdout), defaults).serve(stdin)
