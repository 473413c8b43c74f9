"""Run a check as an unprivileged user even when the tests run as root.

Root searches every folder whatever its mode, so a permission-denied case would never
happen as root. ``as_nobody`` forks; the child gives up root for ``nobody`` (uid and gid
65534, no groups) and runs the function with the code it already has in memory; the
result comes back through a pipe. Not root already: the function just runs.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
NOBODY = 65534


def as_nobody(fn: Callable[[], T]) -> T:
    if os.geteuid() != 0:
        return fn()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            data = pickle.dumps(("ok", fn()))
            status = 0
        except BaseException as err:
            data = pickle.dumps(("error", repr(err)))
        with os.fdopen(write_end, "wb") as f:
            f.write(data)
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind != "ok":
        raise AssertionError(f"the unprivileged check failed: {value}")
    return value  # type: ignore[no-any-return]


def searchable_tmp() -> Path:
    """A fresh folder that nobody may search (pytest's tmp_path sits in a mode-700
    folder of root's); the caller removes it."""
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="hs-nobody-", dir="/var/tmp")))
    path.chmod(0o755)
    return path
