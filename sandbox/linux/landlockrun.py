"""The box without namespaces: one command in a Landlock domain of its own, its rules
laid around what it hides, under the session's system-call filter, with no privilege.

``python3 -I -S landlockrun.py SPEC RUN STARTED -- PROGRAM [ARG...]``, started with an
empty environment (nothing of the agent's choosing reaches the loader or the interpreter
before the domain is made), then, in this order:

1. reads the session's rules (``SPEC``, a sealed memfd of NUL-ended records, each a
   letter and its value: ``h`` a hidden path, ``w`` a writable root, ``d`` a device
   file, ``r`` a path in a hidden place shown again (read only), ``n`` ``1`` for the
   host's network, ``f`` the filter's BPF program in hex)
   and the run's environment (``RUN``, a memfd of ``NAME=VALUE`` records); no
   ``json``, whose ``re`` and ``enum`` would cost each run 6 ms;
2. sets ``no_new_privs`` and, where it holds any capability (root), empties its
   bounding, ambient, inheritable, permitted and effective sets: root's command is uid
   0 with no privilege, and stays so across ``execve``;
3. makes the domain: every file-system right handled; ``/`` may be listed; everything
   else may be read and executed but the hidden paths (the rules are laid around them:
   each folder on the way to a hidden path gets a rule per entry, not one for itself);
   the writable roots get every right; the device files read, write and ``ioctl``.
   Without the host's network, TCP bind and connect are handled with no rule (none
   allowed). Signals and abstract Unix sockets are scoped to the domain, and a domain
   always keeps ptrace-mode access (``/proc/PID/environ``, ``mem``, ``fd``) to what is
   outside it out of reach: the harness's provider key among them;
4. loads the filter (the session's table and this box's socket rows:
   :data:`sandbox.linux.seccomp.LANDLOCK_BOX`);
5. writes one byte to ``STARTED`` and executes the command, looked up on the run's
   ``PATH`` (``STARTED`` is close-on-exec: the byte alone says the command was reached;
   an ``execve`` that fails adds ``E`` and its errno).

Anything that fails before step 5 exits 125 with one line on stderr, and no byte: the
host reads that as a box that was not built (:mod:`sandbox.linux.landlockbox`).
Standard library only, and nothing of the toolkit.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
RULE_PATH_BENEATH = 1
# File-system rights by bit (ABI 1: 0-12; REFER 13 at ABI 2; TRUNCATE 14 at ABI 3;
# IOCTL_DEV 15 at ABI 5).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
ALL_FS = (1 << 16) - 1
NET_TCP = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP
SCOPES = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET, SIGNAL
NEEDED_ABI = 6
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT = 38, 24, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
READ = READ_FILE | EXECUTE
DEVICE = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV


# A step of the box's making failed: its words end the run with status 125.
Refused = RuntimeError


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _fail(what: str) -> Refused:
    err = ctypes.get_errno()
    return Refused(f"{what}: {os.strerror(err)}")


def without_privilege(libc: ctypes.CDLL) -> None:
    """``no_new_privs``, and every capability given up where any is held."""
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("no_new_privs")
    with open("/proc/self/status", encoding="ascii") as f:
        held = {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
    if int(held.get("CapEff", "0"), 16) == 0 and int(held.get("CapPrm", "0"), 16) == 0 \
            and os.geteuid() != 0:
        return
    for cap in (*range(8), *range(9, 64), 8):  # CAP_SETPCAP, which drops, last
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            raise _fail(f"dropping capability {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    # capset(2), version 3: a header (version, pid) and two data blocks, all zero.
    header = struct.pack("Ii", 0x20080522, 0)
    if libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))) != 0:
        raise _fail("capset")


def _add(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, *, follow: bool = True
         ) -> None:
    """A rule on ``path`` (its folder rights kept only for a folder); a path that is
    gone or cannot be opened gets none (nothing is granted by a failure)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return
    try:
        import stat

        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        if not stat.S_ISDIR(mode):
            rights &= FILE_RIGHTS
        attr = struct.pack("=Qi", rights, fd)
        if libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset),
                        ctypes.c_int(RULE_PATH_BENEATH), ctypes.c_char_p(attr),
                        ctypes.c_uint32(0)) != 0:
            raise _fail(f"a rule on {path}")
    finally:
        os.close(fd)


def _under(path: str, roots: set[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def around(hidden: list[str]) -> list[str]:
    """The paths that get a read rule: every entry of each folder on the way to a hidden
    path, but the hidden paths and the folders on the way themselves (walked in turn);
    an entry that is a link is followed, and left out where it leads to a hidden path
    or a folder on the way to one."""
    hide = {os.path.normpath(h) for h in hidden}
    on_way = {"/"}
    for h in hide:
        parent = os.path.dirname(h)
        while parent not in on_way:
            on_way.add(parent)
            parent = os.path.dirname(parent)
    out: list[str] = []
    todo = ["/"]
    while todo:
        folder = todo.pop()
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if path in hide:
                continue
            if path in on_way:
                todo.append(path)
                continue
            if os.path.islink(path):
                real = os.path.realpath(path)
                if _under(real, hide) or real in on_way:
                    continue
            out.append(path)
    return out


def restrict(libc: ctypes.CDLL, spec: dict[str, list[str]]) -> None:
    """The domain of step 3, for this process and all it starts."""
    abi = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(1))
    if abi < NEEDED_ABI:
        raise Refused(f"this kernel's Landlock is ABI {max(abi, 0)}; the box needs "
                      f"{NEEDED_ABI}")
    net = 0 if spec["n"] == ["1"] else NET_TCP
    attr = struct.pack("QQQ", ALL_FS, net, SCOPES)
    ruleset = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.c_char_p(attr),
                           ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        _add(libc, ruleset, "/", READ_DIR)
        for path in around(spec["h"]):
            _add(libc, ruleset, path, READ | READ_DIR)
        for path in spec["r"]:
            _add(libc, ruleset, path, READ | READ_DIR)
        for path in spec["d"]:
            _add(libc, ruleset, path, DEVICE | READ_DIR)
        for path in spec["w"]:
            _add(libc, ruleset, path, ALL_FS, follow=False)
        if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset),
                        ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(int(ruleset))


def load_filter(libc: ctypes.CDLL, program: bytes) -> None:
    """The BPF program as this process's seccomp filter (``no_new_privs`` is set)."""
    if not program:
        return
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise _fail("the system-call filter")


def records(fd: int) -> list[str]:
    """The NUL-ended records of the memfd ``fd``, which is closed."""
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    os.close(fd)
    return os.fsdecode(data).split("\0")[:-1]


def rules(fd: int) -> dict[str, list[str]]:
    """SPEC's records by their letter."""
    out: dict[str, list[str]] = {k: [] for k in "hwdrnf"}
    for record in records(fd):
        out[record[:1]].append(record[1:])
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        os.write(2, b"usage: landlockrun.py SPEC RUN STARTED -- PROGRAM [ARG...]\n")
        return 125
    started = int(argv[2])
    try:
        os.set_inheritable(started, False)  # the command cannot tell the host anything
        spec, run = rules(int(argv[0])), records(int(argv[1]))
        libc = _libc()
        without_privilege(libc)
        restrict(libc, spec)
        load_filter(libc, bytes.fromhex("".join(spec["f"])))
    except (Refused, OSError, ValueError, KeyError) as err:
        os.write(2, f"harness-sandbox: the Landlock box could not be made: {err}\n".encode())
        return 125
    # The supervisor's own variables (the run's marker, a terminal's) join the run's.
    env = {**dict(r.split("=", 1) for r in run if "=" in r), **os.environ}
    os.write(started, b"\x01")
    try:
        os.execvpe(argv[4], argv[4:], env)
    except OSError as err:
        os.write(started, b"E%d" % (err.errno or 0))
    return 127


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
