"""The box's Unix-socket guard: ``connect(2)`` and sends with an address, supervised
(and ``bind(2)`` in a box on the host's network).

Standard library only, and no import of the toolkit: it runs inside the box, in the
warm box's starter (:mod:`sandbox.linux.warm.inbox`, each run's PID 1) and in a box per run
(:mod:`sandbox.linux.warm.guarded`, or :mod:`sandbox.linux.warm.guardmain` behind ``guardinit.c``).

:meth:`Guard.arm` starts a supervisor thread, then loads in the calling thread a small
filter (:data:`sandbox.linux.seccomp.UNIX_GUARD`, compiled by libseccomp on the host) with
``SECCOMP_FILTER_FLAG_NEW_LISTENER``: from then on ``connect``, ``sendto`` with an
address, ``sendmsg`` and ``sendmmsg`` of the command that thread starts (and of all its
descendants) wait for the supervisor; so does ``bind`` where the box shares the host's
network namespace (:data:`sandbox.linux.seccomp.UNIX_GUARD_BIND`), and an abstract name is
refused it there. The supervisor thread was made before the filter, so its own calls
are not stopped (a filter binds the thread that loads it and what that thread starts
afterwards).

The supervisor never lets a socket call go on as it is (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``):
the address lies in the caller's memory and the socket in its descriptor table, and
another thread can change either between a check and the kernel's own read. Instead it
copies the address (and the bytes sent), takes the caller's socket itself
(``pidfd_getfd``), and makes the call on that socket with its copy; the caller gets the
call's result. A pathname address on a Unix socket is opened first (``O_PATH``,
following links as ``connect`` does, in the caller's root or working folder), and the
opened socket is checked by where it lies (the kernel's path of that descriptor): under
one of the box's writable roots, or a socket (or below a folder) of
``[sandbox] allow_unix_sockets``. Anything else is refused with ``EACCES``. The call is
then made to ``/proc/self/fd/N`` of that very descriptor, so what was checked is what is
reached. A call from another ABI (32-bit x86, x32) is refused.

What differs from the call made by the caller itself: the server's ``SO_PEERCRED`` (and
a datagram's ``SCM_CREDENTIALS`` when the receiver asks for them) names the
supervisor's process (same user and group), not the caller's.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # not signal: its enum costs a box 5 ms
import _thread
import ctypes
import errno
import os
import stat
import struct

if __package__:  # imported by the host
    from sandbox.linux.warm import guardlocks
    from sandbox.linux.warm.guardparts import (
        SYS_PIDFD_OPEN,
        SYS_PIDFD_SEND_SIGNAL,
        Caller,
        CallRefused,
        Message,
        errno_of,
        load,
        machine,
        narrow,
    )
else:  # in the box: this folder is on the path
    import guardlocks  # type: ignore[import-not-found,no-redef]
    from guardparts import (  # type: ignore[import-not-found,no-redef]
        SYS_PIDFD_OPEN,
        SYS_PIDFD_SEND_SIGNAL,
        Caller,
        CallRefused,
        Message,
        errno_of,
        load,
        machine,
        narrow,
    )

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported in the box: it costs each run its start
    from collections.abc import Callable

    _Make = Callable[[], int]

PIDFD_THREAD = os.O_EXCL
# ioctl requests on the listener (linux/seccomp.h: _IOWR('!', 0..), _IOW('!', 2, u64)).
NOTIF_RECV = 0xC0502100
NOTIF_SEND = 0xC0182101
NOTIF_ID_VALID = 0x40082102
# The number before Linux 5.9 (its direction was wrong); later kernels take both.
NOTIF_ID_VALID_OLD = 0x80082102
_NOTIF = struct.Struct("=QIIiIQ6Q")       # struct seccomp_notif
_RESP = struct.Struct("=QqiI")            # struct seccomp_notif_resp
_MSGHDR = struct.Struct("=QI4xQQQQI4x")   # struct msghdr (64-bit)
_MMSGHDR = 64                             # struct mmsghdr: msghdr, msg_len, padding
_IOVEC = struct.Struct("=QQ")
AF_UNIX = 1
SOL_SOCKET, SO_TYPE, SO_DOMAIN = 1, 3, 39
SOCK_STREAM = 1
MSG_DONTWAIT, MSG_NOSIGNAL = 0x40, 0x4000
SUN_PATH = 108            # sizeof(sockaddr_un.sun_path)
# In the list of allowed sockets: abstract addresses may be reached (the box has a
# network namespace of its own; sandbox/linux/sockets.py).
ABSTRACT = b"@"
SOCKADDR_MAX = 128        # sizeof(struct sockaddr_storage)
UIO_MAXIOV = 1024
# The most one call carries through the supervisor: a stream send of more is sent in
# part (as a send may be), a datagram of more would not fit a socket's buffer anyway.
SEND_MAX = 1 << 20
CONTROL_MAX = 1 << 16


class _Fprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _under(path: bytes, roots: tuple[bytes, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip(b"/") + b"/") for r in roots)


class Guard:
    """The guard of one run: the filter to load and what it lets through. ``roots`` are
    the box's writable folders and ``allowed`` the sockets (or folders) of
    ``[sandbox] allow_unix_sockets``, canonical paths as the box sees them."""

    def __init__(self, bpf: bytes, roots: list[bytes], allowed: list[bytes]) -> None:
        known = machine()
        if known is None:
            raise OSError(errno.ENOSYS, "the Unix-socket guard does not know this machine")
        self.arch, self.sys_seccomp, self.calls = known
        self.roots = tuple(r for r in roots if r.startswith(b"/"))
        self.allowed = tuple(a for a in allowed if a.startswith(b"/"))
        # Abstract addresses are the box's own only in a network namespace of its own.
        self.abstract = ABSTRACT in allowed
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.libc.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
        self.bpf = ctypes.create_string_buffer(bpf, len(bpf))
        self.prog = _Fprog(len(bpf) // 8, ctypes.cast(self.bpf, ctypes.c_void_p))
        self.listener = -1

    # -- arming --------------------------------------------------------------------------

    def arm(self, drop: Callable[[], None] | None = None,
            main_filter: ctypes.Structure | None = None) -> None:
        """Start the supervisor; then, in this thread, ``drop`` the command's privileges
        and load the filter (``no_new_privs`` is set by then). Raises OSError when any
        of it cannot be had (EAGAIN: no thread, at the box's process bound): the run
        must not start unguarded.

        The supervisor keeps ``CAP_SYS_PTRACE`` in the box's user namespace, and
        nothing else, when this process has it: the capability lets it take the socket
        of a caller that made itself not dumpable (ssh does), which same-user access
        alone does not. It narrows its own capabilities (and loads ``main_filter``, the
        session's filter, when this process is not under it yet) before this thread
        drops its own, so no moment has the command's thread holding more than the
        supervisor's."""
        lock = _thread.allocate_lock()
        lock.acquire()
        narrowed = _thread.allocate_lock()
        narrowed.acquire()
        self._narrowed: OSError | None = None
        try:
            _thread.start_new_thread(self._supervise, (lock, narrowed, main_filter))
        except RuntimeError as err:  # the box's process bound, reached by another run
            raise OSError(errno.EAGAIN, "the Unix-socket guard's thread could not "
                          "start: " + os.strerror(errno.EAGAIN)) from err
        try:
            narrowed.acquire()
            if self._narrowed is not None:
                raise self._narrowed
            if drop is not None:
                drop()
            self.listener = load(self.libc, self.sys_seccomp, self.prog)
        finally:
            lock.release()

    def _supervise(self, lock: _thread.LockType, narrowed: _thread.LockType,
                   main_filter: ctypes.Structure | None) -> None:
        try:
            narrow(self.libc, main_filter)
        except OSError as err:
            self._narrowed = err
            narrowed.release()
            return
        narrowed.release()
        lock.acquire()
        if self.listener >= 0:
            self.serve()

    def serve(self, first: bytes | None = None) -> None:
        """Answer each call stopped on the listener (``first``, one already read, before
        them) until the listener fails; then close it."""
        # No signal is handled here: a call made for a caller must not be interrupted.
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        buf = ctypes.create_string_buffer(_NOTIF.size)
        try:
            if first is not None:
                self._one(first)
            while True:
                ctypes.memset(buf, 0, _NOTIF.size)
                if self.libc.ioctl(self.listener, NOTIF_RECV, buf) != 0:
                    if ctypes.get_errno() in (errno.EINTR, errno.ENOENT):
                        continue  # a caller killed before its call was read
                    return
                self._one(buf.raw)
        finally:
            # Every call still stopped, and every later one, fails (ENOSYS): never
            # through unchecked.
            os.close(self.listener)

    def _one(self, raw: bytes) -> None:
        nid, pid, _, nr, arch, _, *args = _NOTIF.unpack(raw)
        call = self.calls.get(nr) if arch == self.arch else None
        if call is None:
            self.answer(nid, -errno.EACCES)
            return
        try:
            caller = Caller(self, nid, pid)
        except CallRefused as why:
            self.answer(nid, -why.errno)
            return
        except Exception:  # a caller the guard cannot see is refused
            self.answer(nid, -errno.EACCES)
            return
        try:
            getattr(self, "_" + call)(caller, args)
        except Exception as err:  # whatever went wrong, the call fails
            caller.close()
            self.answer(nid, -errno_of(err))

    def answer(self, nid: int, result: int, flags: int = 0) -> None:
        resp = ctypes.create_string_buffer(_RESP.pack(
            nid, max(result, 0), min(result, 0), flags), _RESP.size)
        # A caller gone meanwhile (killed) is no error of ours.
        self.libc.ioctl(self.listener, NOTIF_SEND, resp)

    def valid(self, nid: int) -> bool:
        """The caller is still waiting in that call (so its pid is still its own)."""
        arg = ctypes.c_uint64(nid)
        for request in (NOTIF_ID_VALID, NOTIF_ID_VALID_OLD):
            if self.libc.ioctl(self.listener, request, ctypes.byref(arg)) == 0:
                return True
            if ctypes.get_errno() not in (errno.ENOTTY, errno.EINVAL):
                return False
        return False

    def call(self, nr: int, *args: int) -> int:
        rc = int(self.libc.syscall(nr, *(ctypes.c_long(a) for a in args)))
        if rc < 0:
            raise CallRefused(ctypes.get_errno())
        return rc

    def pidfd(self, pid: int) -> int:
        """A pidfd of the stopped thread (Linux 6.9), else of its thread group: a socket
        taken from the group's table is still the one checked and used."""
        for flags in (PIDFD_THREAD, 0):
            fd = int(self.libc.syscall(SYS_PIDFD_OPEN, pid, flags))
            if fd >= 0:
                return fd
        with open(f"/proc/{pid}/status", "rb") as f:
            tgid = next(int(line.split()[1]) for line in f if line.startswith(b"Tgid:"))
        return self.call(SYS_PIDFD_OPEN, tgid, 0)

    # -- the calls -----------------------------------------------------------------------

    def _sockopt(self, fd: int, opt: int) -> int:
        value, size = ctypes.c_int(0), ctypes.c_uint32(4)
        if self.libc.getsockopt(fd, SOL_SOCKET, opt, ctypes.byref(value),
                                ctypes.byref(size)) != 0:
            raise CallRefused(ctypes.get_errno())
        return value.value

    def address(self, caller: Caller, sock: int, name: bytes, *, bind: bool = False
                ) -> bytes:
        """The address the call is made with: ``name`` itself, unless it is a pathname
        on a Unix socket, which becomes ``/proc/self/fd/N`` of the checked socket (a
        ``bind`` keeps it: :meth:`Caller.as_caller` makes it where the caller would).
        Every other address is one the kernel reads as no path (another family's,
        abstract, or one it refuses as malformed: a wrong family, too short or too
        long). An abstract
        one is refused where the box shares the host's network namespace, and with it
        the host's abstract sockets (an X server's, a D-Bus bus): a box's bind there
        would take a name a host client later reaches."""
        if (self._sockopt(sock, SO_DOMAIN) != AF_UNIX or len(name) <= 2
                or len(name) > 2 + SUN_PATH or struct.unpack_from("=H", name)[0] != AF_UNIX):
            return name
        if name[2] == 0:
            if not self.abstract:
                raise CallRefused(errno.EACCES)
            return name
        path = name[2:].split(b"\0", 1)[0]
        for own in (b"/proc/self/", b"/proc/thread-self/"):
            if path.startswith(own):
                # The caller's, not the guard's: a socket reached by its descriptor (the
                # way round sun_path's 108 bytes).
                path = b"/proc/%d/%s" % (caller.pid, path[len(own):])
        if bind:  # without a NUL: 108 bytes of path fill sun_path, as the caller's may
            return struct.pack("=H", AF_UNIX) + path
        fd = caller.opened(path)
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise CallRefused(errno.ECONNREFUSED)  # as connect(2) says it
        where = os.readlink(f"/proc/self/fd/{fd}".encode())
        if not (where.startswith(b"/") and (_under(where, self.roots)
                                            or _under(where, self.allowed))):
            raise CallRefused(errno.EACCES)
        return struct.pack("=H", AF_UNIX) + b"/proc/self/fd/%d\0" % fd

    def finish(self, caller: Caller, sock: int, flags: int, make: _Make) -> None:
        """Make the call and answer with its result: here when it cannot wait (a
        non-blocking socket, ``MSG_DONTWAIT``), else in a thread of its own, so that one
        caller waiting on a full backlog does not stop the others."""
        blocking = not (flags & MSG_DONTWAIT or os.get_blocking(sock))
        if not blocking:
            self._finish(caller, make)
        else:
            _thread.start_new_thread(self._finish, (caller, make))

    def send(self, caller: Caller, sock: int, flags: int, msg: Message) -> None:
        """Send ``msg`` and answer: first without waiting, here (a send that need not
        wait, the usual case, costs no thread); what would wait is sent by a thread of
        its own, the rest of a stream after a part went, as a blocking send goes on."""
        if flags & MSG_DONTWAIT or not os.get_blocking(sock):
            self._finish(caller, lambda: msg.send(self, caller, sock, flags))
            return
        try:
            sent, again = msg.send(self, caller, sock, flags | MSG_DONTWAIT), False
        except CallRefused as why:
            if why.errno != errno.EAGAIN:
                raise
            sent, again = 0, True
        if not again and sent >= msg.size:
            caller.close()
            self.answer(caller.nid, sent)
            return
        rest = msg if again else Message(bytes(msg.data.raw[sent:]), b"", b"")

        def more() -> int:
            try:
                return sent + rest.send(self, caller, sock, flags)
            except CallRefused:
                if sent:
                    return sent
                raise
        _thread.start_new_thread(self._finish, (caller, more))

    def _finish(self, caller: Caller, make: _Make) -> None:
        try:
            result = make()
        except Exception as err:  # whatever went wrong, the call fails
            result = -errno_of(err)
        finally:
            caller.close()
        self.answer(caller.nid, result)

    def made(self, rc: int, caller: Caller | None = None, flags: int = 0) -> int:
        if rc >= 0:
            return rc
        err = ctypes.get_errno()
        if err == errno.EPIPE and caller is not None and not flags & MSG_NOSIGNAL:
            # The kernel would have signalled the caller; the supervisor asked it not to
            # signal itself.
            self.libc.syscall(SYS_PIDFD_SEND_SIGNAL, caller.pidfd, signal.SIGPIPE, None, 0)
        raise CallRefused(err)

    def _connect(self, caller: Caller, args: list[int]) -> None:
        sock = caller.fd(ctypes.c_int(args[0]).value)
        size = ctypes.c_int(args[2]).value
        if not 0 <= size <= SOCKADDR_MAX:
            raise CallRefused(errno.EINVAL)
        name = caller.read(args[1], size)
        to = ctypes.create_string_buffer(self.address(caller, sock, name))
        self.finish(caller, sock, 0, lambda: self.made(
            self.libc.connect(sock, to, len(to.raw) - 1)))

    def _bind(self, caller: Caller, args: list[int]) -> None:
        """Supervised only where the box shares the host's network (the abstract names
        are the host's): the bind made here, as a connect is."""
        sock = caller.fd(ctypes.c_int(args[0]).value)
        size = ctypes.c_int(args[2]).value
        if not 0 <= size <= SOCKADDR_MAX:
            raise CallRefused(errno.EINVAL)
        to = self.address(caller, sock, caller.read(args[1], size), bind=True)
        at = ctypes.create_string_buffer(to, len(to))
        self._finish(caller, lambda: caller.as_caller(
            lambda: self.made(self.libc.bind(sock, at, len(to)))))

    def _sendto(self, caller: Caller, args: list[int]) -> None:
        sock = caller.fd(ctypes.c_int(args[0]).value)
        flags, size = ctypes.c_int(args[3]).value, ctypes.c_int(args[5]).value
        if not 0 <= size <= SOCKADDR_MAX:
            raise CallRefused(errno.EINVAL)
        data = caller.read(args[1], self._send_size(sock, args[2]))
        name = self.address(caller, sock, caller.read(args[4], size))
        self.send(caller, sock, flags, Message(data, name, b""))

    def _send_size(self, sock: int, size: int) -> int:
        if size <= SEND_MAX:
            return size
        if self._sockopt(sock, SO_TYPE) != SOCK_STREAM:
            raise CallRefused(errno.EMSGSIZE)
        return SEND_MAX

    def _message(self, caller: Caller, sock: int, at: int) -> Message:
        """The caller's ``struct msghdr`` at ``at``, copied: its address (checked), its
        bytes joined in one vector, its control data with each passed descriptor the
        caller's own taken here."""
        name_p, name_len, iov_p, iov_len, ctl_p, ctl_len, _ = _MSGHDR.unpack(
            caller.read(at, _MSGHDR.size))
        if iov_len > UIO_MAXIOV:
            raise CallRefused(errno.EMSGSIZE)
        if ctl_len > CONTROL_MAX:
            raise CallRefused(errno.ENOBUFS)
        if name_p and not 0 <= ctypes.c_int(name_len).value <= SOCKADDR_MAX:
            raise CallRefused(errno.EINVAL)
        chunks, left = [], SEND_MAX
        iovs = caller.read(iov_p, iov_len * _IOVEC.size)
        total = 0
        for i in range(iov_len):
            base, size = _IOVEC.unpack_from(iovs, i * _IOVEC.size)
            total += size
            chunks.append(caller.read(base, min(size, left)))
            left -= len(chunks[-1])
        if total > SEND_MAX:
            self._send_size(sock, total)
        control = caller.control(caller.read(ctl_p, ctl_len) if ctl_p else b"")
        name = (self.address(caller, sock, caller.read(name_p, name_len))
                if name_p and name_len else b"")
        return Message(b"".join(chunks), name, control)

    _flock, _fcntl = guardlocks.flock, guardlocks.fcntl  # the command's locks: there

    def _sendmsg(self, caller: Caller, args: list[int]) -> None:
        sock = caller.fd(ctypes.c_int(args[0]).value)
        flags = ctypes.c_int(args[2]).value
        self.send(caller, sock, flags, self._message(caller, sock, args[1]))

    def _sendmmsg(self, caller: Caller, args: list[int]) -> None:
        sock = caller.fd(ctypes.c_int(args[0]).value)
        count, flags = min(ctypes.c_uint(args[2]).value, UIO_MAXIOV), ctypes.c_int(args[3]).value
        msgs = [self._message(caller, sock, args[1] + i * _MMSGHDR) for i in range(count)]

        def make() -> int:
            sent = 0
            for i, msg in enumerate(msgs):
                try:
                    n = msg.send(self, caller, sock, flags)
                except CallRefused:
                    if sent == 0:
                        raise
                    break
                caller.write(args[1] + i * _MMSGHDR + _MSGHDR.size, struct.pack("=I", n))
                sent += 1
            return sent
        self.finish(caller, sock, flags, make)
