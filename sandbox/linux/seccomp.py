"""The box's system-call filter: one table of denied calls, compiled once per session.

Every boxed run gets the same filter, handed to bubblewrap with ``--seccomp FD``;
bwrap loads it in the box just before it executes the command (after its own set-up,
which the filter therefore never sees). The default is to allow: the namespaces, the
dropped capabilities and the read-only mounts do the confining; this filter takes away
the kernel interfaces a build never needs and that reach outside the box or are a large
attack surface (the model is Flatpak's ``setup_seccomp`` and Docker's default profile).

The filter is built with libseccomp (through ``pyseccomp``, ctypes over
``libseccomp.so.2``), never assembled by hand, and covers every ABI the machine can run:
on x86-64 also i386 and x32, on arm64 also 32-bit arm. A call from an ABI not in the
filter kills the process (libseccomp's default for a foreign architecture).
"""

from __future__ import annotations

import errno as E
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pathguard.records import NamedTuple
from sandbox.libc import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWTIME,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
)

SONAME = "libseccomp.so.2"

NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                   CLONE_NEWPID, CLONE_NEWNET)
# ioctl requests (asm-generic/ioctls.h; the same numbers on x86 and arm).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
# personality(2): the default, and the value that only asks for the current one.
PER_LINUX = 0
PERSONALITY_QUERY = 0xFFFFFFFF

# Mode bits that make a program run as its owner or group (sys/stat.h).
S_ISUID = 0o4000
S_ISGID = 0o2000
SET_ID_BITS = (S_ISUID, S_ISGID)

# Socket options that hand out a process (asm-generic/socket.h): a pidfd of the peer,
# and one of each message's sender (SCM_PIDFD).
SOL_SOCKET = 1
SO_PASSPIDFD = 76
SO_PEERPIDFD = 77
# fcntl(2) commands (asm-generic/fcntl.h, linux/fcntl.h): a lease, and the locks.
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW = 6, 7, 37, 38
F_SETLEASE = 1024
LOCK_SH, LOCK_EX = 1, 2
# socketcall(2)'s numbers for getsockopt and setsockopt (linux/net.h).
SYS_SETSOCKOPT, SYS_GETSOCKOPT = 14, 15

# Comparison operators, as libseccomp numbers them (enum scmp_compare).
NE = 1
MASKED_EQ = 7
# A row's "errno" that sends the call to the run's Unix-socket guard instead
# (SCMP_ACT_NOTIFY; sandbox/linux/warm/unixguard.py answers it).
NOTIFY = -1


class Cmp(NamedTuple):
    """One argument test: ``args[arg] & mask == value`` (libseccomp's SCMP_CMP_MASKED_EQ).
    The mask keeps a 64-bit register's upper half out of a 32-bit argument's test.
    With ``op=NE``: ``args[arg] != value`` (the mask unused)."""

    arg: int
    mask: int
    value: int
    op: int = MASKED_EQ


class Denial(NamedTuple):
    """A denied call: by name, the errno it answers, why; with ``when``, only the calls
    whose arguments match one of the tests (each test is a rule of its own); with
    ``also``, only those that match every one of these too (one rule, its tests
    joined)."""

    syscall: str
    errno: int
    why: str
    when: tuple[Cmp, ...] = ()
    also: tuple[Cmp, ...] = ()


def _flag_tests(arg: int, flags: Sequence[int]) -> tuple[Cmp, ...]:
    return tuple(Cmp(arg, f, f) for f in flags)


def _personality_tests() -> tuple[Cmp, ...]:
    """Matches every 32-bit value but 0 and 0xffffffff (the kernel reads the argument as
    an unsigned int): a value with both a 1 bit and a 0 bit. Bit 0 is one of them; one
    test per other bit. libseccomp takes one test per argument in a rule, so a range
    cannot be said otherwise."""
    out: list[Cmp] = []
    for bit in range(1, 32):
        out.append(Cmp(0, 1 | 1 << bit, 1))          # bit 0 set, this bit clear
        out.append(Cmp(0, 1 | 1 << bit, 1 << bit))   # bit 0 clear, this bit set
    return tuple(out)


# What the box may not do. One place; the tests run every row from inside a box.
DENIED: tuple[Denial, ...] = (
    Denial("keyctl", E.EPERM, "the kernel keyring is the harness's session keyring"),
    Denial("add_key", E.EPERM, "the kernel keyring is the harness's session keyring"),
    Denial("request_key", E.EPERM, "the kernel keyring is the harness's session keyring"),
    Denial("io_uring_setup", E.EPERM, "io_uring: the kernel's largest recent attack surface"),
    Denial("io_uring_enter", E.EPERM, "io_uring: the kernel's largest recent attack surface"),
    Denial("io_uring_register", E.EPERM, "io_uring: the kernel's largest recent attack "
                                         "surface"),
    Denial("perf_event_open", E.EPERM, "reads kernel and other processes' behaviour; a "
                                       "history of exploits"),
    Denial("bpf", E.EPERM, "loads programs into the kernel"),
    Denial("userfaultfd", E.EPERM, "stalls the kernel at will: the tool of many race "
                                   "exploits"),
    Denial("kexec_load", E.EPERM, "replaces the running kernel"),
    Denial("kexec_file_load", E.EPERM, "replaces the running kernel"),
    Denial("init_module", E.EPERM, "loads kernel code"),
    Denial("finit_module", E.EPERM, "loads kernel code"),
    Denial("delete_module", E.EPERM, "unloads kernel code"),
    Denial("personality", E.EPERM, "other personalities turn off address randomisation "
                                   "or change the kernel's ABI", _personality_tests()),
    Denial("ioctl", E.EPERM, "TIOCSTI pushes input into a terminal outside the box",
           (Cmp(1, 0xFFFFFFFF, TIOCSTI),)),
    Denial("ioctl", E.EPERM, "TIOCLINUX reads and pushes console input",
           (Cmp(1, 0xFFFFFFFF, TIOCLINUX),)),
    Denial("clone", E.EPERM, "no new namespaces in the box",
           _flag_tests(0, NAMESPACE_FLAGS)),
    Denial("unshare", E.EPERM, "no new namespaces in the box",
           _flag_tests(0, (*NAMESPACE_FLAGS, CLONE_NEWTIME))),
    # Its flags sit in a struct the filter cannot read; ENOSYS makes libc use clone.
    Denial("clone3", E.ENOSYS, "its flags cannot be checked; libc falls back to clone"),
    # A file the box writes lands in the project, where a host user may run it later;
    # set-id bits on it would run it as the box's owner (root, for a box started by
    # root). No call may set them: each mode argument is tested for either bit. (A
    # set-group-id folder is refused too; a build has no need of one.)
    *(Denial(call, E.EPERM, "no set-user-id or set-group-id files from the box",
             _flag_tests(arg, SET_ID_BITS))
      for call, arg in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2),
                        ("open", 2), ("openat", 3), ("creat", 1), ("mknod", 1),
                        ("mknodat", 2), ("mkdir", 1), ("mkdirat", 2))),
    # Its mode sits in a struct the filter cannot read; ENOSYS makes libc use openat.
    Denial("openat2", E.ENOSYS, "its mode cannot be checked; callers fall back to openat"),
    Denial("syslog", E.EPERM, "the kernel log is the host's"),
    Denial("uselib", E.EPERM, "obsolete loader call"),
    Denial("acct", E.EPERM, "process accounting is the host's"),
    Denial("quotactl", E.EPERM, "disk quotas are the host's"),
)

def _is(arg: int, value: int) -> Cmp:
    return Cmp(arg, 0xFFFFFFFF, value)


# What the command may not do, though its run's PID 1 must: that process (the guard)
# takes a caller's socket with pidfd_getfd and reads its memory, under DENIED. These
# rows are loaded with the guard's filter, in the command's process only, after the
# guard is armed (every boxed command, warm or per run, has one: sandbox/box/harden.py).
COMMAND: tuple[Denial, ...] = (
    # Runs of a warm box (and the boxes per run of a session) share /tmp and one user:
    # a pidfd of another run's process, which no PID namespace stops, gives its
    # descriptors (its stdin and stdout) to pidfd_getfd. Every way to a pidfd of a
    # process that is not the run's own is closed here; pidfd_open, ptrace,
    # process_vm_readv/writev, kcmp and /proc take a pid, and another run's processes
    # have none in this run's PID namespace (its SO_PEERCRED pid reads 0).
    Denial("getsockopt", E.ENOPROTOOPT, "SO_PEERPIDFD: a pidfd of the socket's peer, "
           "another run's process (as a kernel before 6.5 answers)",
           also=(_is(1, SOL_SOCKET), _is(2, SO_PEERPIDFD))),
    Denial("setsockopt", E.ENOPROTOOPT, "SO_PASSPIDFD: a pidfd of each message's sender "
           "(SCM_PIDFD), another run's process", also=(_is(1, SOL_SOCKET), _is(2, SO_PASSPIDFD))),
    # 32-bit x86 reaches them through socketcall(2), the level and option in memory.
    Denial("socketcall", E.EACCES, "getsockopt and setsockopt from 32-bit x86: their "
           "option cannot be read", (_is(0, SYS_SETSOCKOPT), _is(0, SYS_GETSOCKOPT))),
    Denial("pidfd_getfd", E.EPERM, "takes another process's descriptors"),
    Denial("process_madvise", E.EPERM, "acts on another process's memory by its pidfd"),
    Denial("process_mrelease", E.EPERM, "acts on another process's memory by its pidfd"),
    Denial("open_by_handle_at", E.EPERM, "opens a process (pidfs) or a namespace (nsfs) by "
           "number; without CAP_DAC_READ_SEARCH nothing else"),
    # A lease on a file the box can only read (every host file is one, to root's
    # stand-in too) makes the host's open of it for writing wait (lease-break-time) or
    # fail (O_NONBLOCK: EWOULDBLOCK). Nothing a build runs takes one.
    *(Denial(call, E.EACCES, "F_SETLEASE: a lease stalls the host's writer of the file",
             (_is(1, F_SETLEASE),)) for call in ("fcntl", "fcntl64")),
    # A lock is taken by the guard (sandbox/linux/warm/guardlocks.py), only on a file of the
    # box's writable folders: a read lock on a host file (a package manager's lock, a
    # database the host writes) would stall the host's writer as long as it is held.
    *(Denial("flock", NOTIFY, "a lock on a host file stalls the host", (Cmp(1, op, op),))
      for op in (LOCK_SH, LOCK_EX)),
    *(Denial(call, NOTIFY, "a lock on a host file stalls the host",
             tuple(_is(1, cmd) for cmd in (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW)))
      for call in ("fcntl", "fcntl64")),
)

# The Unix-socket guard's filter, loaded in each run after DENIED with a listener of its
# own (sandbox/linux/warm/unixguard.py): each call that can reach a pathname Unix socket waits
# for the guard, which makes it itself when the socket is the box's own or allowed; and
# the COMMAND rows above.
UNIX_GUARD: tuple[Denial, ...] = (
    *COMMAND,
    Denial("connect", NOTIFY, "a listening socket outside the box is a host service's door"),
    Denial("sendto", NOTIFY, "a datagram to a socket outside the box (with an address only: "
                             "send() reaches the peer connect() checked)", (Cmp(4, 0, 0, NE),)),
    Denial("sendmsg", NOTIFY, "a datagram to a socket outside the box (its address is in "
                              "memory, so every call)"),
    Denial("sendmmsg", NOTIFY, "datagrams to sockets outside the box"),
    # 32-bit x86 reaches the same calls through socketcall(2), by number: SYS_CONNECT,
    # SYS_SENDTO, SYS_SENDMSG, SYS_SENDMMSG. The guard refuses them.
    *(Denial("socketcall", NOTIFY, "the same calls from 32-bit x86",
             (Cmp(0, 0xFFFFFFFF, call),)) for call in (3, 11, 16, 20)),
)

# With ``network = true`` the box shares the host's network namespace, and with it the
# host's abstract Unix names: a bind waits for the guard too, which refuses an abstract
# name and makes every other bind itself.
UNIX_GUARD_BIND: tuple[Denial, ...] = (
    *UNIX_GUARD,
    Denial("bind", NOTIFY, "an abstract name on the host's network: a host program that "
                           "connects to it later would reach the box"),
    Denial("socketcall", NOTIFY, "a bind from 32-bit x86", (Cmp(0, 0xFFFFFFFF, 2),)),
)

# The box without namespaces (sandbox/linux/landlockbox.py) has no network namespace
# and no Unix-socket guard (a place that refuses namespaces refuses pidfd_getfd too):
# its sockets are limited here instead. Landlock scopes abstract names and (ABI 4)
# handles TCP, but neither a pathname Unix socket (a container engine's, D-Bus, an
# agent's) nor UDP: no Unix socket is made (socketpair's connected pairs stay, but a
# datagram pair, which can send to any address), and without the host's network no
# socket but netlink's (which reaches the kernel alone). The COMMAND rows that need no
# guard come too; a lock is not refused (nothing answers it here: see kind.py).
AF_UNIX, AF_NETLINK, SOCK_DGRAM = 1, 16, 2
SYS_SOCKET, SYS_SOCKETPAIR = 1, 8
_LANDLOCK_SOCKETS: tuple[Denial, ...] = (
    *(row for row in COMMAND if row.errno != NOTIFY),
    Denial("socket", E.EACCES, "a Unix socket reaches any pathname socket of the place",
           (_is(0, AF_UNIX),)),
    Denial("socketpair", E.EACCES, "a datagram pair sends to any address",
           (Cmp(1, 0xF, SOCK_DGRAM),)),
    Denial("socketcall", E.EACCES, "sockets from 32-bit x86: their family is in memory",
           (_is(0, SYS_SOCKET), _is(0, SYS_SOCKETPAIR))),
)
LANDLOCK_BOX: tuple[Denial, ...] = (*DENIED, *_LANDLOCK_SOCKETS)
LANDLOCK_BOX_OFFLINE: tuple[Denial, ...] = (
    *LANDLOCK_BOX,
    Denial("socket", E.EACCES, "no network: a socket of any family but netlink's",
           (Cmp(0, 0, AF_NETLINK, NE),)),
)

# The ABIs a process on this machine can call the kernel with, by ``os.uname().machine``.
# A machine not listed gets its native ABI only (and doctor says so).
_ARCHES: dict[str, tuple[str, ...]] = {
    "x86_64": ("X86_64", "X86", "X32"),
    "aarch64": ("AARCH64", "ARM"),
}


class Compiled(NamedTuple):
    """The filter, compiled: ``fd`` is a sealed memfd holding the BPF program (keep it
    open for the session; :func:`reader` gives each run its own descriptor)."""

    fd: int
    size: int
    arches: tuple[str, ...]


def arches() -> tuple[str, ...]:
    """The ABIs the filter covers on this machine (libseccomp's names)."""
    return _ARCHES.get(os.uname().machine, ("NATIVE",))


class _Fd:
    """What pyseccomp's export wants: an object with ``fileno()``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


_import_lock = threading.Lock()


def _binding() -> Any:
    """pyseccomp, imported without its two ``ctypes.util.find_library`` calls, each of
    which runs ``ldconfig`` (milliseconds on every session's start): libseccomp is
    loaded by its soname, and libc is this process's own. Elsewhere (a libseccomp that
    is not ``libseccomp.so.2``) the search runs as pyseccomp does it."""
    if "pyseccomp" in sys.modules:
        return sys.modules["pyseccomp"]
    import ctypes.util

    known: dict[str, str | None] = {"c": None}
    try:
        ctypes.CDLL(SONAME)
        known["seccomp"] = SONAME
    except OSError:
        pass
    with _import_lock:
        search = ctypes.util.find_library
        ctypes.util.find_library = lambda name: (
            known[name] if name in known else search(name))
        try:
            import pyseccomp
        finally:
            ctypes.util.find_library = search
    return pyseccomp


def compile_filter(table: Sequence[Denial] = DENIED) -> Compiled:
    """Build the filter from ``table`` for every ABI of the machine. Raises OSError or
    ImportError (libseccomp missing); the caller turns that into a refusal."""
    sc = _binding()
    flt = sc.SyscallFilter(sc.ALLOW)
    names = arches()
    native = sc.system_arch()
    for name in names:
        arch = getattr(sc.Arch, name)
        if name != "NATIVE" and arch != native:
            flt.add_arch(arch)
    def arg(test: Cmp) -> Any:
        return (sc.Arg(test.arg, MASKED_EQ, test.mask, test.value)
                if test.op == MASKED_EQ else sc.Arg(test.arg, test.op, test.value))
    for row in table:
        action = sc.NOTIFY if row.errno == NOTIFY else sc.ERRNO(row.errno)
        each: list[tuple[Cmp, ...]] = [(t,) for t in row.when] or [()]
        for tests in each:
            flt.add_rule(action, row.syscall, *(arg(t) for t in (*tests, *row.also)))
    fd = os.memfd_create("harness-sandbox-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        flt.export_bpf(_Fd(fd))
        size = os.lseek(fd, 0, os.SEEK_CUR)
        from sandbox.libc import seal

        seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return Compiled(fd, size, names)


def reader(compiled: Compiled) -> int:
    """A new descriptor of the program, at its start, for one run: bwrap reads its
    ``--seccomp`` fd to the end, and descriptors made by dup or fork share one offset."""
    return os.open(f"/proc/self/fd/{compiled.fd}", os.O_RDONLY | os.O_CLOEXEC)
