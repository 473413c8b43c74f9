"""Landlock: a domain on the box, where its ``/proc`` must be the container's.

``python3 -I -S landlock.py -- PROGRAM [ARG...]`` puts itself in a new Landlock domain
and then executes PROGRAM (bwrap, or nsenter before it for root's stand-in), so that
the whole box, and nothing else, is in it. The domain handles no file-system or network
access (bwrap must still mount): it is there for what a domain always scopes, and for
the two scopes of ABI 6:

- ptrace-mode access: a process in a domain can neither trace nor read through
  ``/proc/PID`` (``environ``, ``mem``, ``fd``, ``maps``) a process outside it, whatever
  their users: the container's other processes, the harness with its provider key;
- ``LANDLOCK_SCOPE_SIGNAL``: no signal to a process outside it;
- ``LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET``: no connection to an abstract Unix socket made
  outside it.

:func:`abi` is the kernel's Landlock ABI (0: none). Standard library only, and nothing
of the toolkit: it runs as ``python3 -I -S`` before bwrap.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

# The same numbers on every architecture (the calls are newer than the split tables).
SYS_CREATE_RULESET = 444
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1 << 0
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
# The ABI that has the scopes this box needs.
NEEDED_ABI = 6
PR_SET_NO_NEW_PRIVS = 38
HERE = os.path.abspath(__file__)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or it is turned off)."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    got = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(got), 0)


def restrict_self() -> None:
    """This process (and all it starts) in a new domain that scopes signals and abstract
    Unix sockets; raises OSError where the kernel refuses."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped.
    attr = ctypes.create_string_buffer(
        struct.pack("QQQ", 0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL), 24)
    fd = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), attr, ctypes.c_size_t(24),
                      ctypes.c_uint32(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd),
                             ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(int(fd))


def main(argv: list[str]) -> int:
    if argv[:1] != ["--"] or len(argv) < 2:
        os.write(2, b"usage: landlock.py -- PROGRAM [ARG...]\n")
        return 125
    try:
        restrict_self()
    except OSError as err:
        os.write(2, f"harness-sandbox: the box's Landlock domain: {err.strerror}\n".encode())
        return 125
    try:
        os.execv(argv[1], argv[1:])
    except OSError as err:
        os.write(2, f"harness-sandbox: {argv[1]}: {err.strerror}\n".encode())
    return 125


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
