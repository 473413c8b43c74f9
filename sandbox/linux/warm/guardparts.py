"""The Unix-socket guard's parts (:mod:`sandbox.linux.warm.unixguard`): the machines and
kernels it runs on (:func:`unsupported`, which the host asks without importing the
guard), the stopped caller, the message it sends, and the arming of the supervisor's
thread and of the filter.

Standard library only, and no import of the toolkit: it runs inside the box with
:mod:`sandbox.linux.warm.unixguard`, found on the same path.
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported in the box: it costs each run its start
    from collections.abc import Callable

    from sandbox.linux.warm.unixguard import Guard

# (audit arch, seccomp(2)'s number, {number: call}) by os.uname().machine.
_MACHINES: dict[str, tuple[int, int, dict[int, str]]] = {
    "x86_64": (0xC000003E, 317, {42: "connect", 44: "sendto", 46: "sendmsg",
                                 307: "sendmmsg", 49: "bind", 73: "flock", 72: "fcntl"}),
    "aarch64": (0xC00000B7, 277, {203: "connect", 206: "sendto", 211: "sendmsg",
                                  269: "sendmmsg", 200: "bind", 32: "flock", 25: "fcntl"}),
}
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD, SYS_PIDFD_SEND_SIGNAL = 434, 438, 424
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_MODE_FILTER = 2
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
CAP_SETPCAP, CAP_SYS_PTRACE = 8, 19
PR_CAP_AMBIENT_RAISE = 2
# CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER: held only by a box of root's stand-in
# (sandbox/linux/standin.py's OWNER_CAPS), whose command keeps them.
OWNER_CAPS = (0, 1, 3)
F_DUPFD_CLOEXEC = 1030
FLAG_NEW_LISTENER = 1 << 3
FLAG_WAIT_KILLABLE_RECV = 1 << 5
MSG_NOSIGNAL = 0x4000


def machine() -> tuple[int, int, dict[int, str]] | None:
    """This machine's ABI as the guard knows it, or None (the guard cannot run here)."""
    return _MACHINES.get(os.uname().machine)


def unsupported() -> str | None:
    """Why this kernel cannot carry the guard, or None. Cheap: no filter is loaded."""
    if machine() is None:
        return f"the Unix-socket guard does not know this machine ({os.uname().machine})"
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail", encoding="ascii") as f:
            actions = f.read().split()
    except OSError:
        actions = []
    if "user_notif" not in actions:
        return "this kernel has no seccomp user notification (Linux 5.0)"
    libc = ctypes.CDLL(None, use_errno=True)
    for nr, name, need in ((SYS_PIDFD_OPEN, "pidfd_open", "5.3"),
                           (SYS_PIDFD_GETFD, "pidfd_getfd", "5.6")):
        if libc.syscall(nr, -1, 0, 0) == -1 and ctypes.get_errno() == errno.ENOSYS:
            return f"this kernel has no {name} (Linux {need})"
    return None


class Iovec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class Msghdr(ctypes.Structure):
    _fields_ = (("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(Iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int))


def errno_of(err: Exception) -> int:
    """The errno a failed call answers: the refusal's, or the OS error met on the way
    (a path not found is ENOENT, as connect(2) says it), else EACCES."""
    if isinstance(err, CallRefused):
        return err.errno
    if isinstance(err, OSError) and err.errno:
        return err.errno
    return errno.EACCES


class CallRefused(Exception):
    """The call's answer is this errno."""

    def __init__(self, err: int) -> None:
        super().__init__(err)
        self.errno = err


SOL_SOCKET, SCM_RIGHTS = 1, 1
_AS_CALLER = _thread.allocate_lock()
_CMSG = struct.Struct("=Qii")             # cmsg_len, cmsg_level, cmsg_type


class Caller:
    """The stopped caller: its pidfd and memory, opened by pid and then confirmed to be
    the one still waiting (``NOTIF_ID_VALID``), so a pid reused meanwhile is never read."""

    def __init__(self, guard: Guard, nid: int, pid: int) -> None:
        self.guard, self.nid, self.pid = guard, nid, pid
        self.pidfd = guard.pidfd(pid)
        try:
            self.mem = os.open(f"/proc/{pid}/mem", os.O_RDWR | os.O_CLOEXEC)
        except PermissionError:
            # A caller that is not dumpable has its /proc files owned by its user
            # namespace's root, which a plain user's box does not map: its memory is
            # reached by process_vm_readv instead (the ptrace check alone, which the
            # supervisor's CAP_SYS_PTRACE passes), each read confirmed after.
            self.mem = -1
        except OSError:
            os.close(self.pidfd)
            raise
        self.held: list[int] = []
        try:
            self.confirm()
        except CallRefused:
            self.close()
            raise

    def confirm(self) -> None:
        if not self.guard.valid(self.nid):
            raise CallRefused(errno.ESRCH)

    def read(self, addr: int, size: int) -> bytes:
        if size == 0:
            return b""
        if self.mem < 0:
            return self._vm(addr, ctypes.create_string_buffer(size), size, write=False)
        try:
            data = os.pread(self.mem, size, addr)
        except (OSError, OverflowError):
            raise CallRefused(errno.EFAULT) from None
        if len(data) != size:
            raise CallRefused(errno.EFAULT)
        return data

    def write(self, addr: int, data: bytes) -> None:
        if self.mem < 0:
            self._vm(addr, ctypes.create_string_buffer(data, len(data)), len(data),
                     write=True)
            return
        try:
            os.pwrite(self.mem, data, addr)
        except (OSError, OverflowError):
            raise CallRefused(errno.EFAULT) from None

    def _vm(self, addr: int, buf: ctypes.Array[ctypes.c_char], size: int, *,
            write: bool) -> bytes:
        """``size`` bytes at ``addr`` of the caller, read into or written from ``buf``
        (``process_vm_readv``/``writev``), then the caller confirmed still waiting: a
        pid that was reused meanwhile would make the notification invalid."""
        local = Iovec(ctypes.cast(buf, ctypes.c_void_p), size)
        remote = Iovec(addr, size)
        call = self.guard.libc.process_vm_writev if write else \
            self.guard.libc.process_vm_readv
        done = call(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if done != size:
            raise CallRefused(errno.EFAULT)
        self.confirm()
        return buf.raw[:size]

    def fd(self, number: int) -> int:
        """A descriptor of the caller's own: it, not its number, is what is used."""
        fd = self.guard.call(SYS_PIDFD_GETFD, self.pidfd, number, 0)
        self.held.append(fd)
        return fd

    def opened(self, path: bytes) -> int:
        """``path`` opened ``O_PATH`` as the caller would find it."""
        base = f"/proc/{self.pid}/root" if path.startswith(b"/") else f"/proc/{self.pid}/cwd"
        d = os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.confirm()
            fd = os.open(path.lstrip(b"/") or b".", os.O_PATH | os.O_CLOEXEC, dir_fd=d)
        finally:
            os.close(d)
        self.held.append(fd)
        return fd

    def as_caller(self, make: Callable[[], int]) -> int:
        """``make()`` (a bind) in the caller's working folder and with its umask, as
        the kernel would make it for the caller: a relative name is found there, the
        socket file gets the caller's mode, and the socket's name is the one the caller
        gave. One at a time: both are the guard process's own, which no other call it
        makes uses (every path it opens is absolute)."""
        with _AS_CALLER:
            cwd = os.open(f"/proc/{self.pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            here = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                with open(f"/proc/{self.pid}/status", "rb") as f:
                    mask = next(int(line.split()[1], 8) for line in f
                                if line.startswith(b"Umask:"))
                self.confirm()
                os.fchdir(cwd)
                old = os.umask(mask)
                try:
                    return make()
                finally:
                    os.umask(old)
                    os.fchdir(here)
            finally:
                os.close(cwd)
                os.close(here)

    def control(self, data: bytes) -> bytes:
        """A message's control data, each descriptor passed (``SCM_RIGHTS``) the
        caller's own taken here."""
        out, pos = bytearray(data), 0
        while pos + _CMSG.size <= len(data):
            size, level, kind = _CMSG.unpack_from(data, pos)
            if size < _CMSG.size or pos + size > len(data):
                break
            if level == SOL_SOCKET and kind == SCM_RIGHTS:
                for at in range(pos + _CMSG.size, pos + size - 3, 4):
                    (n,) = struct.unpack_from("=i", data, at)
                    struct.pack_into("=i", out, at, self.fd(n))
            pos += (size + 7) & ~7
        return bytes(out)

    def close(self) -> None:
        for fd in (self.pidfd, self.mem, *self.held):
            if fd >= 0:
                os.close(fd)
        self.held = []


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


def _last_cap() -> int:
    with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
        return int(f.read())


def drop_capabilities(libc: ctypes.CDLL, keep: int | None = None, *,
                      owners: bool = False) -> None:
    """This thread's capabilities gone from every set (the bounding set too, when it may
    drop them), but ``keep`` (a capability's number) when it holds it, and with
    ``owners`` each of :data:`OWNER_CAPS` it holds, for the command it spawns (permitted,
    inheritable and ambient, as guardcore.c's keep_held, but not effective)."""
    header = _CapHeader(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    wanted = (() if keep is None else (keep,)) + (OWNER_CAPS if owners else ())
    kept = sum(1 << cap for cap in wanted if data[1] & (1 << cap))  # permitted, low word
    if data[0] & (1 << CAP_SETPCAP):
        for cap in range(_last_cap() + 1):
            if not (cap < 32 and kept & (1 << cap)) and \
                    libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0):
                raise OSError(ctypes.get_errno(), "dropping the bounding set")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    owned = sum(1 << cap for cap in OWNER_CAPS) & kept if owners else 0
    data = (ctypes.c_uint32 * 6)()
    # The owners' are not effective here: only the command, which this process spawns,
    # uses them (root's exec makes its permitted ones effective).
    data[0], data[1], data[2] = kept & ~owned, kept, owned  # effective, permitted, inh.
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    for cap in OWNER_CAPS:
        if owned & (1 << cap) and libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0):
            raise OSError(ctypes.get_errno(), "keeping the owners' capabilities")


def narrow(libc: ctypes.CDLL, main_filter: ctypes.Structure | None) -> None:
    """In the supervisor's thread: every capability gone but ``CAP_SYS_PTRACE``
    (when held), then ``no_new_privs`` and ``main_filter``."""
    drop_capabilities(libc, keep=CAP_SYS_PTRACE)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    if main_filter is not None and libc.prctl(
            PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(main_filter), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the session's filter")


def load(libc: ctypes.CDLL, sys_seccomp: int, prog: ctypes.Structure) -> int:
    """Load the guard's filter ``prog`` in this thread with a listener; its descriptor."""
    for flags in (FLAG_NEW_LISTENER | FLAG_WAIT_KILLABLE_RECV, FLAG_NEW_LISTENER):
        fd = libc.syscall(sys_seccomp, SECCOMP_SET_MODE_FILTER, flags,
                               ctypes.byref(prog))
        if fd >= 0:
            return _high(libc, int(fd))
        err = ctypes.get_errno()
        # Before Linux 5.19 a caller's wait could not be made killable only: a
        # signal then restarts a call the supervisor may already have made.
        if err != errno.EINVAL or not flags & FLAG_WAIT_KILLABLE_RECV:
            raise OSError(err, f"the Unix-socket guard's filter: {os.strerror(err)}")
    raise AssertionError("unreachable")

def _high(libc: ctypes.CDLL, fd: int) -> int:
    """The listener above the standard streams: the warm box's run puts the command's
    own on 0, 1 and 2, which the starter's run may have left closed until then."""
    if fd > 2:
        return fd
    high = int(libc.fcntl(fd, F_DUPFD_CLOEXEC, 3))
    os.close(fd)
    if high < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"the Unix-socket guard's listener: {os.strerror(err)}")
    return high

# -- the supervisor ------------------------------------------------------------------


class Message:
    """One message to send, copied out of the caller."""

    def __init__(self, data: bytes, name: bytes, control: bytes) -> None:
        self.size = len(data)
        self.data = ctypes.create_string_buffer(data, len(data))
        self.iov = Iovec(ctypes.cast(self.data, ctypes.c_void_p), len(data))
        self.name = ctypes.create_string_buffer(name, len(name))
        self.control = ctypes.create_string_buffer(control, len(control))
        self.hdr = Msghdr(ctypes.cast(self.name, ctypes.c_void_p) if name else None,
                           len(name), ctypes.pointer(self.iov), 1,
                           ctypes.cast(self.control, ctypes.c_void_p) if control else None,
                           len(control), 0)

    def send(self, guard: Guard, caller: Caller, sock: int, flags: int) -> int:
        return guard.made(guard.libc.sendmsg(sock, ctypes.byref(self.hdr),
                                             flags | MSG_NOSIGNAL), caller, flags)
