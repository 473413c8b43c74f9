"""The guard's locks: ``flock(2)`` and ``fcntl(2)``'s lock commands of the command
(:data:`sandbox.linux.seccomp.COMMAND` sends them here), judged by the file locked.

Every file outside the box's writable folders is one the box can read, and a lock it
holds there (a shared one is enough) stalls the host's writer of that file: a package
manager's lock file, a database the host writes. Such a lock is refused (``ENOLCK``,
no locks available, as on a file system without locks). A file is the box's own when
its descriptor's path (the kernel's, for the descriptor taken from the caller) lies
under one of the box's writable roots and its mount is not read-only (the read-only
binds inside the project are not).

- ``flock`` and the open file description's locks (``F_OFD_SETLK``,
  ``F_OFD_SETLKW``) belong to the open file description, which the descriptor taken
  with ``pidfd_getfd`` shares: the guard makes the call on that descriptor, so what
  was checked is what is locked (a blocking one in a thread of its own).
- A process's own locks (``F_SETLK``, ``F_SETLKW``) belong to the process, which
  only the caller's own call can make: on a file of the box's it is let through
  (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``). The kernel then reads the descriptor's
  number again: another thread of the caller that puts a host file on that number in
  the moment between gets its read lock (docs/limits.md).

Standard library only, and no import of the toolkit: it runs in the box with
:mod:`sandbox.linux.warm.unixguard`.
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import os

if __package__:  # imported by the host
    from sandbox.linux.warm.guardparts import CallRefused
else:  # in the box: this folder is on the path
    from guardparts import CallRefused  # type: ignore[import-not-found,no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported in the box
    from collections.abc import Callable

    from sandbox.linux.warm.guardparts import Caller
    from sandbox.linux.warm.unixguard import Guard

LOCK_NB = 4
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW = 6, 7, 37, 38
ST_RDONLY = 1
FLOCK_SIZE = 32           # struct flock (64-bit)
FLAG_CONTINUE = 1         # SECCOMP_USER_NOTIF_FLAG_CONTINUE


def own(roots: tuple[bytes, ...], fd: int) -> bool:
    """The file of ``fd`` is the box's: under a writable root, on a mount it writes."""
    where = os.readlink(b"/proc/self/fd/%d" % fd)
    if not (where.startswith(b"/") and any(
            where == r or where.startswith(r.rstrip(b"/") + b"/") for r in roots)):
        return False
    return not os.fstatvfs(fd).f_flag & ST_RDONLY


def _checked(guard: Guard, caller: Caller, number: int) -> int:
    fd = caller.fd(ctypes.c_int(number).value)
    if not own(guard.roots, fd):
        raise CallRefused(errno.ENOLCK)
    return fd


def _made(guard: Guard, caller: Caller, blocking: bool, make: Callable[[], int]) -> None:
    if blocking:
        _thread.start_new_thread(guard._finish, (caller, make))
    else:
        guard._finish(caller, make)


def flock(guard: Guard, caller: Caller, args: list[int]) -> None:
    fd = _checked(guard, caller, args[0])
    op = ctypes.c_int(args[1]).value
    _made(guard, caller, not op & LOCK_NB, lambda: guard.made(guard.libc.flock(fd, op)))


def fcntl(guard: Guard, caller: Caller, args: list[int]) -> None:
    cmd = ctypes.c_int(args[1]).value
    fd = _checked(guard, caller, args[0])
    if cmd in (F_SETLK, F_SETLKW):
        # The process's own lock: the caller's call, on a file checked to be the box's.
        caller.confirm()
        caller.close()
        guard.answer(caller.nid, 0, FLAG_CONTINUE)
        return
    if cmd not in (F_OFD_SETLK, F_OFD_SETLKW):
        raise CallRefused(errno.ENOLCK)
    lock = ctypes.create_string_buffer(caller.read(args[2], FLOCK_SIZE), FLOCK_SIZE)
    _made(guard, caller, cmd == F_OFD_SETLKW,
          lambda: guard.made(guard.libc.fcntl(fd, cmd, lock)))
