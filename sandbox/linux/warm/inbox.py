"""What runs inside the warm box, per run: its namespaces, mounts, dropped privileges
and command (:mod:`sandbox.linux.warm.helper` is the loop that calls these), and the messages'
framing both sides use.

Standard library only, and no import of the toolkit: the starter runs it inside the
box, as ``python3 -I -S``, from this file's folder. The C modules under ``signal``,
``socket`` and ``contextlib``'s uses are used directly: those three and what they import
(``enum``, ``selectors``, ``collections``) cost the warm box's start about 6 ms.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]
import _socket as socket
import ctypes
import errno
import fcntl
import os
import struct

if __package__:  # imported by the host, for the tests
    from sandbox.linux.warm.guardparts import drop_capabilities
    from sandbox.linux.warm.unixguard import Guard
else:  # in the box: the starter put this folder on the path
    from guardparts import drop_capabilities  # type: ignore[import-not-found,no-redef]
    from unixguard import Guard  # type: ignore[import-not-found,no-redef]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
# statvfs's ST_* bits that are also mount flags a remount must repeat: a bind remount in
# a user namespace may not clear a flag locked on it, and the atime bits differ.
_KEPT = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
         (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
         (os.ST_RELATIME, MS_RELATIME))
MAX_MESSAGE = 1 << 17
# What Python ignores at its start (and its children inherit), and a command started by
# bwrap gets at their defaults: a writer to a closed pipe dies of SIGPIPE.
_DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ)
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


class Box:
    """What every run needs, made once: libc, the filter, the mounts' flags."""

    def __init__(self, fields: list[bytes]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_ulong, ctypes.c_char_p)
        shm, read_only, nulled, bpf, nproc = fields[1:6]
        # The Unix-socket guard each run arms (unixguard.py): its filter, the box's
        # writable roots and the allowed sockets.
        self.guard: Guard | None = None
        if len(fields) >= 9 and fields[6]:
            self.guard = Guard(fields[6], fields[7].split(b"\0"), fields[8].split(b"\0"))
        # Each run in a network namespace of its own (a box without network): no run
        # sees another's loopback listeners or abstract sockets.
        self.own_network = len(fields) >= 10 and fields[9] == b"net"
        # The read end of a pipe whose only writer is the starter (non-blocking): at
        # its end of file the starter is gone (:func:`init`).
        self.life = -1
        if int(nproc) > 0:
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
        self.shm = b"size=%d,mode=1777" % int(shm)
        # Entries this kernel lacks are skipped, as bwrap's --ro-bind-try does.
        self.read_only = [p for p in read_only.split(b"\0") if p and os.path.exists(p)]
        self.nulled = [p for p in nulled.split(b"\0") if p and os.path.exists(p)]
        self.proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        # nodev, as the cold box's binds are: opening the cover fails, "Permission
        # denied", rather than reading as empty.
        self.null_flags = kept_flags(b"/dev/null") | MS_NODEV | MS_NOSUID | MS_NOEXEC
        self.bpf = ctypes.create_string_buffer(bpf, len(bpf))
        self.prog = _SockFprog(len(bpf) // 8, ctypes.cast(self.bpf, ctypes.c_void_p))

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


def kept_flags(path: bytes) -> int:
    got = os.statvfs(path).f_flag
    return sum(ms for st, ms in _KEPT if got & st)


def close_all_but(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        # Never an empty range: closerange(n, n) closes from n to the end here.
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def loopback_up() -> None:
    """Bring up ``lo`` in this process's new network namespace (it starts down)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = bytearray(struct.pack("16sH14x", b"lo", 0))
        fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifr)
        flags = struct.unpack_from("H", ifr, 16)[0] | IFF_UP
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags))
    finally:
        s.close()


def mounts(box: Box) -> None:
    """The run's own namespaces and mounts, made by its PID 1."""
    own = CLONE_NEWNET if box.own_network else 0
    box.call("unshare", box.libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | own))
    if own:
        loopback_up()
    # Nothing mounted here may reach the box's other runs.
    box.mount(None, b"/", None, MS_REC | MS_PRIVATE)
    box.mount(b"proc", b"/proc", b"proc", box.proc_flags)
    for p in box.read_only:
        box.read_only_bind(p, p, box.proc_flags | kept_flags(p))
    for p in box.nulled:
        box.read_only_bind(b"/dev/null", p, box.null_flags)
    box.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, box.shm)


def drop_privileges(box: Box) -> None:
    """Every capability in every set, then no_new_privs and the filter."""
    libc = box.libc
    drop_capabilities(libc, owners=True)  # held only by root's stand-in
    box.call("no_new_privs", libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    box.call("seccomp", libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                                   ctypes.byref(box.prog), 0, 0))


# A terminal's slave reopened by the leader of a new session becomes its controlling
# terminal (posix_spawn's setsid comes before its file actions): sandbox/process/pty.py.
# Reopened from fd 1, the same terminal: glibc closes fd 0 before it opens.
TTY_OPEN = [(os.POSIX_SPAWN_OPEN, 0, "/proc/self/fd/1", os.O_RDWR, 0)]


def spawn(req: list[bytes]) -> int:
    """Start the command as ``execvp`` would, with exactly its environment: a bare name
    is looked up on that environment's ``PATH`` (or the default path), a file without
    ``#!`` is run by ``/bin/sh``. A request whose second field is ``tty`` has the
    command's stdin, the run's terminal, made its controlling terminal."""
    actions = TTY_OPEN if req[1] == b"tty" else None
    argc = int(req[3])
    argv, env_items = req[4:4 + argc], req[4 + argc:]
    env = dict(item.split(b"=", 1) for item in env_items if b"=" in item)
    # posix_spawnp searches this process's PATH: make it the command's.
    if b"PATH" in env:
        os.environb[b"PATH"] = env[b"PATH"]
    else:
        os.environb.pop(b"PATH", None)
    try:
        return os.posix_spawnp(argv[0], argv, env, setsid=True, setsigdef=_DEFAULTS,
                               file_actions=actions)
    except OSError as err:
        if err.errno != errno.ENOEXEC:
            raise
        return os.posix_spawnp(b"/bin/sh", [b"/bin/sh", *argv], env, setsid=True,
                               setsigdef=_DEFAULTS, file_actions=actions)


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def outer(box: Box, chan: int, err_w: int) -> None:
    """The child that makes a run's PID namespace: forks the run's PID 1 there, says
    its pid (``P``) and ends, so that this process adopts the init and reaps it
    directly. (This process cannot make the namespace itself: it could not go back to
    its own, which in a plain user's box belongs to bwrap's outer user namespace.)
    A fork refused at the box's process bound is said ``A``, any other failure ``S``."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Python's handler would let a run's command interrupt its PID 1 (the one
        # signal it catches); at the default the kernel drops every signal a process
        # of the namespace sends its init.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        close_all_but({chan, err_w, box.life})
        box.call("unshare", box.libc.unshare(CLONE_NEWPID))
        pid = os.fork()
        if pid == 0:
            try:
                os.close(err_w)
                init(box, socket.socket(fileno=chan))
            finally:
                os._exit(127)
        os.write(err_w, b"P%d\n" % pid)
    except BaseException as err:  # the report is the handling
        # No process for the run's init (the box's process bound, reached by another
        # run) is ``A``: try again later; anything else is the box's end.
        again = isinstance(err, OSError) and err.errno == errno.EAGAIN
        os.write(err_w, b"%s%s\n" % (b"A" if again else b"S",
                                      str(err).encode().replace(b"\n", b" ")))
    os._exit(0)


def send_fds(sock: socket.socket, msg: bytes, fds: list[int]) -> None:
    """``msg`` with ``fds`` (``SCM_RIGHTS``), as :func:`socket.send_fds` sends them."""
    sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                          struct.pack(f"{len(fds)}i", *fds))])


def recv_fds(sock: socket.socket, size: int, most: int) -> tuple[bytes, list[int]]:
    """A message and the descriptors that came with it (at most ``most``), as
    :func:`socket.recv_fds` reads them."""
    msg, ancillary, _, _ = sock.recvmsg(size, socket.CMSG_LEN(most * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(data) // 4
            fds += struct.unpack(f"{n}i", data[:n * 4])
    return msg, fds


def receive(chan: socket.socket) -> tuple[list[bytes], list[int]] | None:
    """The run's request and its three descriptors, or None at the host's end."""
    msg, fds = recv_fds(chan, MAX_MESSAGE, 4)
    if not msg:
        return None
    req = unpack(msg)
    if req[0] == b"big" and len(fds) == 4:
        with os.fdopen(fds.pop(), "rb") as f:
            req = unpack(f.read())
    return req, fds


def arm(box: Box) -> int:
    """The run's Unix-socket guard (unixguard.py): its supervisor is a thread of this
    process, made before the filter, so the command and everything it starts are under
    the filter and the supervisor is not. 0, or EAGAIN when no thread could be had at
    the box's process bound: that run then fails as a fork there does, and the box
    stays whole. Raises OSError otherwise."""
    if box.guard is None:
        drop_privileges(box)
        return 0
    dropped = []

    def drop() -> None:
        drop_privileges(box)
        dropped.append(True)

    try:
        # The supervisor narrows itself to CAP_SYS_PTRACE and loads the session's
        # filter in its own thread; this one then drops everything.
        box.guard.arm(drop=drop, main_filter=box.prog)
    except OSError as err:
        if err.errno != errno.EAGAIN:
            raise
        if not dropped:
            drop_privileges(box)
        return err.errno
    return 0


def say(chan: socket.socket, *fields: bytes) -> None:
    """One message to the host (a host that has gone hears nothing)."""
    try:  # noqa: SIM105 (contextlib costs the box's start an import)
        chan.send(pack(list(fields)))
    except OSError:
        pass


def starter_gone(life: int) -> bool:
    try:
        return os.read(life, 1) == b""
    except BlockingIOError:
        return False


def end_all() -> None:
    """Kill every other process of the run's PID namespace and reap each, until none
    is left: the run's end is said only once nothing it started lives. (A process
    forked while the kill went round is killed in the next round.)"""
    while True:
        try:  # noqa: SIM105 (contextlib costs the box's start an import)
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def start(chan: socket.socket, req: list[bytes], fds: list[int]) -> int:
    """The command, from its folder, on its three descriptors; or said why not."""
    try:
        os.chdir(req[2])
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        return spawn(req)
    except OSError as err:
        say(chan, b"exit", b"exec", b"%d" % (err.errno or 0))
        os._exit(127)


def init(box: Box, chan: socket.socket) -> None:
    """The run's PID 1; never returns. Everything that does not depend on the request
    is done before it comes; the command is started with ``posix_spawn`` (a fork of
    Python costs more than the rest of a run). Not dumpable: the command can neither
    trace it nor read its memory. It talks to the host directly on ``chan``: ``started``
    once the command executes, then ``exit status N`` (after every process of the run
    is gone), ``exit exec ERRNO`` or ``exit setup TEXT``."""
    code = 127
    try:
        mounts(box)
        box.call("prctl", box.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
        unarmed = arm(box)  # and the privileges dropped
    except BaseException as err:  # the report is the handling
        say(chan, b"exit", b"setup", str(err).encode().replace(b"\n", b" "))
        os._exit(code)
    got = receive(chan)
    if got is None:
        os._exit(0)
    if unarmed:
        say(chan, b"exit", b"exec", b"%d" % unarmed)
        os._exit(code)
    # Its parent is the starter by now (the host gets a run made ahead only once the
    # starter has adopted its init), unless the starter has died since: then the box
    # is ending, and the run must not start in it. The death signal first, then the
    # starter's pipe: a starter alive at that look is the parent the signal watches.
    box.call("prctl", box.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
    if box.life >= 0 and starter_gone(box.life):
        os._exit(code)
    child = start(chan, *got)
    for fd in (0, 1, 2):
        os.close(fd)
    say(chan, b"started")
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            code = exit_code(status)
            break
    end_all()
    say(chan, b"exit", b"status", b"%d" % code)
    os._exit(code)
