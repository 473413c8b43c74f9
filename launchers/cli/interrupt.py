"""Ctrl-C as the seed's Esc: cancel the running hook, then wait for its tree to end."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_interruptible(work: Callable[[threading.Event], T], name: str) -> tuple[T, bool]:
    """Run ``work(cancel)`` in a worker thread; Ctrl-C in the main thread sets ``cancel``.

    The main thread keeps waiting after Ctrl-C, so the supervisor can end the hook's
    whole process tree before the command exits. Returns the result and whether Ctrl-C
    was pressed. An exception in ``work`` is raised here.
    """
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
