"""Work done beside the caller: in a thread of its own, joined later."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Beside:
    """``work`` started now in a daemon thread named ``name``; :meth:`join` waits for
    it and gives what it raised, if anything (the caller decides what that ends)."""

    def __init__(self, work: Callable[[], None], name: str) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as err:  # handed to join's caller
            self._error = err

    def join(self) -> BaseException | None:
        self._thread.join()
        return self._error
