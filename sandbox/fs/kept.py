"""Files a command keeps for the next in the per-user private temp root (the compiled
filter, :mod:`sandbox.linux.filtercache`; the compiled launcher, :mod:`sandbox.linux.initcache`; the
user config's parse, :mod:`launchers.configcache`), and the one rule each is read by.

The root is this user's folder of mode 0700, which a session refuses when its box could
write it, and in which a box sees only its own session's folder. A kept file is used
only when it is a regular file (not a link) owned by this user, of its mode, with one
link, of a size it may have; anything else is ignored (and made again in its place),
never used.
"""

from __future__ import annotations

import contextlib
import os
import stat


def private(root: str) -> bool:
    """``root`` is a folder of this user's that nobody else may enter (as the private
    temp root is made): a shared folder such as /tmp keeps nothing."""
    try:
        st = os.lstat(root)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) == 0o700)


def read(path: str, *, mode: int, most: int) -> bytes | None:
    """The bytes kept at ``path`` (1 to ``most`` of them), if it is a file this user can
    trust (see above), read whole; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid()
                or stat.S_IMODE(st.st_mode) != mode or st.st_nlink != 1
                or not 0 < st.st_size <= most):
            return None
        data = f.read(most + 1)
    return data if len(data) == st.st_size else None


def write(path: str, data: bytes, *, mode: int) -> None:
    """Keep ``data`` at ``path``: written beside its final name, then moved there (a
    reader sees a whole file or none). Nothing is kept where that fails."""
    part = f"{path}.{os.getpid()}.part"
    with contextlib.suppress(OSError):
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(part, path)
    with contextlib.suppress(OSError):
        os.unlink(part)
