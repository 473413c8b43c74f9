"""This process's C library, opened once, and the mount calls the session makes by name.

ctypes loads nothing here until :func:`libc` is first called (``import ctypes`` costs a
one-shot command a millisecond it may not need).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

# mount(2) flags (linux/mount.h) and umount2(2)'s.
MS_NOSUID = 0x2
MS_NODEV = 0x4
MNT_DETACH = 0x2


@cache
def libc() -> Any:
    """The C library this process already runs on, with errno kept for each call."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _failed(what: str, path: str) -> OSError:
    import ctypes

    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}", path)


def mount_tmpfs(path: str, options: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    """A tmpfs on ``path`` with ``options`` (``size=...,mode=...``). Raises OSError."""
    if libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        raise _failed("mounting a tmpfs failed", path)


def detach(path: str) -> bool:
    """Unmount ``path`` lazily (``MNT_DETACH``): gone from the tree now, freed when no
    one uses it. Whether it was unmounted."""
    return bool(libc().umount2(os.fsencode(path), MNT_DETACH) == 0)
