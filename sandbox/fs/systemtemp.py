"""The system temp folder as :func:`tempfile.gettempdir` finds it, and a private folder
made in a folder as :func:`tempfile.mkdtemp` makes one, without importing
:mod:`tempfile` on a command's path (it imports shutil, random and weakref: milliseconds
of every start). Where tempfile is already loaded (an embedding, the tests) it is asked
itself, so that what it was told (``tempfile.tempdir``) holds here too. A leaf: imports
nothing of ours.
"""

from __future__ import annotations

import os
import sys
import threading

_found: str | None = None
_lock = threading.Lock()
_TRIES = 100


def _name() -> str:
    return os.urandom(6).hex()


def _writable(folder: str) -> bool:
    """Whether a file can be made in ``folder``: tempfile's own test (a file made,
    written and removed), tried under a few names."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_TRIES):
        path = os.path.join(folder, f"tmp{_name()}")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        except OSError:
            return False
        try:
            try:
                os.write(fd, b"blat")
            finally:
                os.close(fd)
        finally:
            os.unlink(path)
        return True
    return False


def gettempdir() -> str:
    """``TMPDIR``, ``TEMP`` or ``TMP``, else /tmp, /var/tmp, /usr/tmp, else the working
    folder: the first where a file can be made, absolute (found once per process)."""
    global _found
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        return str(tempfile.gettempdir())
    with _lock:
        if _found is None:
            _found = _default()
        return _found


def _default() -> str:
    named = [d for d in (os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")) if d]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = os.curdir
    for folder in (*named, "/tmp", "/var/tmp", "/usr/tmp", cwd):
        folder = folder if folder == os.curdir else os.path.abspath(folder)
        if _writable(folder):
            return folder
    raise FileNotFoundError(f"no usable temporary directory found in {[*named, cwd]}")


def mkdtemp(prefix: str, folder: str) -> str:
    """A new folder ``folder/<prefix><random>`` of mode 0700, made by this call (never
    one that was there); its absolute path."""
    for _ in range(_TRIES):
        path = os.path.join(folder, prefix + _name())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.abspath(path)
    raise FileExistsError(f"no unused name for a temporary folder in {folder}")
