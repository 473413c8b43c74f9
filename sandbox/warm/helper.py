"""The resident starter inside a session's warm box: ``python3 -I -S helper.py FD``.

Standard library only, and no import of the toolkit: it runs inside the box, as the
box's command, with ``CAP_SYS_ADMIN`` and ``CAP_SETPCAP`` in the box's user namespace
and no system-call filter of its own. ``FD`` is its end of a ``SOCK_SEQPACKET`` pair
whose other end the host holds (:mod:`sandbox.warm.client`). Each message is a list of
fields (:func:`pack`); the first names it.

From the host:

``setup SHM_SIZE READ_ONLY NULLED BPF``
    Once, first. ``/dev/shm``'s size in bytes; the procfs entries bound read-only over
    each run's ``/proc`` and those covered by ``/dev/null`` (NUL-separated); the
    session's compiled system-call filter (BPF, 8 bytes an instruction). Answered
    ``ready``.
``run ID CWD ARGC ARGV... ENV...``
    With three descriptors (stdin, stdout, stderr), or ``big ID`` with a fourth, a
    memfd holding the ``run`` message. Answered ``started ID`` once the command is
    executing, then ``exit ID status N`` (a signal N is 128+N, as bwrap's init says it),
    ``exit ID exec ERRNO`` (the command could not be executed) or ``exit ID setup
    TEXT`` (the run's box could not be made).
``kill ID``
    SIGKILL to the run's init, which ends its whole PID namespace.

Each run: a child of this process makes a new PID namespace and waits for its first
process, the run's PID 1, makes a mount and an
IPC namespace of its own, mounts a fresh ``/proc`` with the read-only belt and a fresh
``/dev/shm``, forks the command and reaps everything until the command ends, then exits
with its status: the kernel kills whatever else is left in the namespace (a ``setsid``
daemon, a double fork). The command makes a session of its own, goes to ``CWD``, gets
the three descriptors and no other, loses every capability (effective, permitted,
inheritable, bounding, ambient), sets ``no_new_privs``, loads the filter and executes
``ARGV`` (a bare name looked up on the ``PATH`` of ``ENV``) with exactly ``ENV``.

The host closing its end ends this process; the runs' inits die with it
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import socket
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SECCOMP_MODE_FILTER = 2
CAPABILITY_VERSION_3 = 0x20080522
# statvfs's ST_* bits that are also mount flags a remount must repeat: a bind remount in
# a user namespace may not clear a flag locked on it, and the atime bits differ.
_KEPT = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
         (os.ST_RELATIME, MS_RELATIME))
MAX_MESSAGE = 1 << 17
_LEN = struct.Struct("=I")


def pack(fields: list[bytes]) -> bytes:
    """One message: each field as its 4-byte length, then its bytes."""
    return b"".join(_LEN.pack(len(f)) + f for f in fields)


def unpack(data: bytes) -> list[bytes]:
    """The fields of a message made by :func:`pack`."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        out.append(data[pos:pos + n])
        pos += n
    return out


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Box:
    """What every run needs, made once: libc, the filter, the mounts' flags."""

    def __init__(self, fields: list[bytes]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_ulong, ctypes.c_char_p)
        shm, read_only, nulled, bpf = fields[1:5]
        self.shm = b"size=%d,mode=1777" % int(shm)
        # Entries this kernel lacks are skipped, as bwrap's --ro-bind-try does.
        self.read_only = [p for p in read_only.split(b"\0") if p and os.path.exists(p)]
        self.nulled = [p for p in nulled.split(b"\0") if p and os.path.exists(p)]
        self.proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        # nodev, as the cold box's binds are: opening the cover fails, "Permission
        # denied", rather than reading as empty.
        self.null_flags = _kept_flags(b"/dev/null") | MS_NODEV | MS_NOSUID | MS_NOEXEC
        self.bpf = ctypes.create_string_buffer(bpf, len(bpf))
        self.prog = _SockFprog(len(bpf) // 8, ctypes.cast(self.bpf, ctypes.c_void_p))
        with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
            self.last_cap = int(f.read())

    def call(self, what: str, rc: int) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def mount(self, src: bytes | None, dest: bytes, fstype: bytes | None, flags: int,
              data: bytes | None = None) -> None:
        self.call(f"mount {dest.decode(errors='replace')}",
                  self.libc.mount(src, dest, fstype, flags, data))

    def read_only_bind(self, src: bytes, dest: bytes, kept: int) -> None:
        self.mount(src, dest, None, MS_BIND | MS_REC)
        self.mount(None, dest, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def _kept_flags(path: bytes) -> int:
    got = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEPT if got & st)


def _close_all_but(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        # Never an empty range: closerange(n, n) closes from n to the end here.
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def _mounts(box: _Box) -> None:
    """The run's own namespaces and mounts, made by its PID 1."""
    box.call("prctl", box.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
    box.call("unshare", box.libc.unshare(CLONE_NEWNS | CLONE_NEWIPC))
    # Nothing mounted here may reach the box's other runs.
    box.mount(None, b"/", None, MS_REC | MS_PRIVATE)
    box.mount(b"proc", b"/proc", b"proc", box.proc_flags)
    for p in box.read_only:
        box.read_only_bind(p, p, box.proc_flags | _kept_flags(p))
    for p in box.nulled:
        box.read_only_bind(b"/dev/null", p, box.null_flags)
    box.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, box.shm)


def _drop_privileges(box: _Box) -> None:
    """Every capability in every set, then no_new_privs and the filter."""
    libc = box.libc
    for cap in range(box.last_cap + 1):
        box.call("drop bounding", libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
    box.call("ambient", libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0))
    header = _CapHeader(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    box.call("capset", libc.capset(ctypes.byref(header), ctypes.byref(data)))
    box.call("no_new_privs", libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    box.call("seccomp", libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                                   ctypes.byref(box.prog), 0, 0))


def _spawn(req: list[bytes]) -> int:
    """Start the command as ``execvp`` would, with exactly its environment: a bare name
    is looked up on that environment's ``PATH`` (or the default path), a file without
    ``#!`` is run by ``/bin/sh``."""
    argc = int(req[3])
    argv, env_items = req[4:4 + argc], req[4 + argc:]
    env = dict(item.split(b"=", 1) for item in env_items if b"=" in item)
    # posix_spawnp searches this process's PATH: make it the command's.
    if b"PATH" in env:
        os.environb[b"PATH"] = env[b"PATH"]
    else:
        os.environb.pop(b"PATH", None)
    try:
        return os.posix_spawnp(argv[0], argv, env, setsid=True)
    except OSError as err:
        if err.errno != errno.ENOEXEC:
            raise
        return os.posix_spawnp(b"/bin/sh", [b"/bin/sh", *argv], env, setsid=True)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _run_outer(box: _Box, req: list[bytes], fds: list[int], err_w: int) -> None:
    """The child of :meth:`Helper.start`: makes the run's PID namespace, whose first
    process is the run's PID 1, and waits for it; never returns. Its own exit is the
    run's status; killed, it takes the run with it (``PR_SET_PDEATHSIG``).

    A process of its own because the starter cannot go back to its own PID namespace
    after ``unshare`` (in the box of a plain user, that namespace belongs to bwrap's
    outer user namespace)."""
    code = 127
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _close_all_but({*fds, err_w})
        box.call("prctl", box.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
        box.call("unshare", box.libc.unshare(CLONE_NEWPID))
        pid = os.fork()
        if pid == 0:
            try:
                _run_init(box, req, fds, err_w)
            finally:
                os._exit(127)
        # Its pid here, for a kill: the init's end is the namespace's.
        os.write(err_w, b"P%d\n" % pid)
        for fd in {*fds, err_w}:
            os.close(fd)
        code = _exit_code(os.waitpid(pid, 0)[1])
    except BaseException as err:  # the report is the handling
        os.write(err_w, b"S%s\n" % str(err).encode().replace(b"\n", b" "))
    os._exit(code)


def _run_init(box: _Box, req: list[bytes], fds: list[int], err_w: int) -> None:
    """The run's PID 1; never returns.

    It makes the run's mounts, then takes the command's own state (its folder, its
    three descriptors, no capability, the filter) and starts it with ``posix_spawn``
    (no copy of this process: a fork of Python costs more than the rest of a run). It
    cannot be traced or read by the command (not dumpable)."""
    code = 127
    try:
        _mounts(box)
        try:
            os.chdir(req[2])
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
            for fd in set(fds) - {0, 1, 2}:
                os.close(fd)
            _drop_privileges(box)
            box.call("prctl", box.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
            child = _spawn(req)
        except OSError as err:
            os.write(err_w, b"E%d\n" % (err.errno or 0))
            os._exit(code)
        for fd in (0, 1, 2, err_w):
            os.close(fd)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                code = _exit_code(status)
                break
    except BaseException as err:  # the report is the handling
        os.write(err_w, b"S%s\n" % str(err).encode().replace(b"\n", b" "))
    os._exit(code)


class Helper:
    """The loop: requests in, runs started, their ends reported."""

    def __init__(self, sock: socket.socket, box: _Box) -> None:
        self.sock = sock
        self.box = box
        self.poll = select.poll()
        self.by_id: dict[bytes, int] = {}                # run id -> its init's pid
        self.by_pid: dict[int, tuple[bytes, int]] = {}   # init pid -> (id, error pipe)
        self.open_err: dict[int, bytes] = {}             # error pipes not yet at an end
        self.failed: dict[bytes, bytes] = {}             # run id -> why it did not start
        self.inits: dict[bytes, int] = {}                # run id -> its PID 1, here
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.poll.register(self.sock.fileno(), select.POLLIN)
        self.poll.register(self.wake_r, select.POLLIN)

    def send(self, fields: list[bytes]) -> None:
        self.sock.send(pack(fields))

    def start(self, req: list[bytes], fds: list[int]) -> None:
        rid = req[1]
        err_r, err_w = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    _run_outer(self.box, req, fds, err_w)
                finally:
                    os._exit(127)  # never back into this loop
        except OSError as err:
            # No process for it (the box's process bound, reached by another run):
            # the command could not start, as a fork on the host would say.
            os.close(err_r)
            self.send([b"exit", rid, b"exec", b"%d" % (err.errno or errno.EAGAIN)])
            return
        finally:
            os.close(err_w)
            for fd in fds:
                os.close(fd)
        os.set_blocking(err_r, False)
        self.by_id[rid] = pid
        self.by_pid[pid] = (rid, err_r)
        self.open_err[err_r] = rid
        self.poll.register(err_r, select.POLLIN)

    def error_pipe(self, fd: int, final: bool = False) -> None:
        """What the run's processes say before the command runs: the init's pid
        (``P``), why the command did not start (``E`` errno, ``S`` text); at the end of
        file, when nothing went wrong, the command is executing."""
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            if not final:
                return  # a stale event of an earlier pipe of this number
            data = b""  # a writer killed with its run may not be gone quite yet
        rid = self.open_err[fd]
        if data:
            for line in data.splitlines():
                if line.startswith(b"P"):
                    self.inits[rid] = int(line[1:])
                else:
                    self.failed.setdefault(rid, line)
            return
        del self.open_err[fd]
        self.poll.unregister(fd)
        os.close(fd)
        if rid not in self.failed:
            self.send([b"started", rid])

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.by_pid:
                continue
            rid, err_r = self.by_pid.pop(pid)
            del self.by_id[rid]
            # Every writer is gone: the reads cannot wait.
            while self.open_err.get(err_r) == rid:
                self.error_pipe(err_r, final=True)
            self.inits.pop(rid, None)
            self.send(self.ended(rid, status))

    def ended(self, rid: bytes, status: int) -> list[bytes]:
        """The ``exit`` message of a run whose init was reaped."""
        data = self.failed.pop(rid, b"")
        if data.startswith(b"E"):
            return [b"exit", rid, b"exec", data[1:]]
        if data.startswith(b"S"):
            return [b"exit", rid, b"setup", data[1:]]
        return [b"exit", rid, b"status", b"%d" % _exit_code(status)]

    def request(self) -> bool:
        """One request from the host; False at the host's end."""
        msg, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 4)
        if not msg:
            return False
        req = unpack(msg)
        if req[0] == b"big" and fds:
            with os.fdopen(fds.pop(), "rb") as f:
                req = unpack(f.read())
        if req[0] == b"run" and len(fds) == 3:
            self.start(req, fds)
            return True
        for fd in fds:
            os.close(fd)
        if req[0] == b"kill" and req[1] in self.by_id:
            # The init, whose end kills the rest of its namespace before its parent
            # reaps it; the parent, whose death kills the init (PR_SET_PDEATHSIG), if
            # the init has not said its pid yet.
            pid = self.inits.get(req[1], self.by_id[req[1]])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return True

    def serve(self) -> None:
        sock = self.sock.fileno()
        while True:
            for fd, _ in self.poll.poll():
                if fd == self.wake_r:
                    os.read(fd, 4096)
                    self.reap()
                elif fd == sock:
                    if not self.request():
                        return
                elif fd in self.open_err:
                    self.error_pipe(fd)


def main(argv: list[str]) -> int:
    # 0, 1 and 2 open, so that no descriptor of a run gets one of their numbers (the
    # command's dup2 onto them would then close another of its own).
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    sock = socket.socket(fileno=int(argv[1]))
    msg = sock.recv(MAX_MESSAGE)
    fields = unpack(msg)
    if not fields or fields[0] != b"setup":
        return 2
    helper = Helper(sock, _Box(fields))
    helper.send([b"ready"])
    with contextlib.suppress(ConnectionError, BrokenPipeError):
        helper.serve()
    for pid in helper.by_pid:
        os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
