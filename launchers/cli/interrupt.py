"""Ctrl-C as the seed's Esc: cancel the running hook, then wait for its tree to end."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_interruptible(work: Callable[[threading.Event], T], name: str) -> tuple[T, bool]:
    """Run ``work(cancel)``; Ctrl-C sets ``cancel`` instead of raising.

    The caller keeps waiting after Ctrl-C, so the supervisor can end the hook's whole
    process tree before the command exits. Returns the result and whether Ctrl-C was
    pressed. An exception in ``work`` is raised here.

    In the main thread, with Python's own Ctrl-C handler in place (the command's case),
    the work runs right here and the handler is swapped for one that sets ``cancel``
    while it runs (the supervisor's wait looks at it in slices): no thread to start and
    hand over to on the path of every event. Anywhere else, in a worker thread, the
    KeyboardInterrupt caught in this one.
    """
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        return _inline(work)
    return _in_thread(work, name)


def _inline(work: Callable[[threading.Event], T]) -> tuple[T, bool]:
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: cancel.set())
    try:
        return work(cancel), cancel.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)


def _in_thread(work: Callable[[threading.Event], T], name: str) -> tuple[T, bool]:
    cancel = threading.Event()
    done = threading.Event()
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(work(cancel))
        except BaseException as err:  # handed to the main thread
            errors.append(err)
        finally:
            done.set()

    worker = threading.Thread(target=run, name=name)
    worker.start()
    # Wait on our own event, not in join(): a KeyboardInterrupt inside Thread.join can
    # leave the thread looking finished while it still runs.
    while not done.is_set():
        try:
            done.wait(0.1)
        except KeyboardInterrupt:
            cancel.set()
    worker.join()
    if errors:
        raise errors[0]
    return out[0], cancel.is_set()
