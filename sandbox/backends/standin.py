"""Root's stand-in: a box started by root runs as a host id no account has, not uid 0.

Started by root, bubblewrap maps the box's uid 0 to the host's uid 0, without
capabilities. Whatever checks only the uid still takes such a box for root: a procfs
entry (``kernel.core_pattern`` names a program the kernel runs as root at the next
crash), root's sockets, root's kernel keyring, a set-id program left for the host. So a
session started by root makes a user namespace whose uid 0 and gid 0 are :data:`UID`
and :data:`GID` on the host, and bwrap starts inside it (through ``nsenter``). Every
process of the box is that id on the host, whatever it is called in the box; an entry
of ``/proc/sys`` owned by the host's root is another user's file to it.

**Files.** The stand-in owns nothing, so the session shows bwrap the host's folders
through *idmapped mounts* made in a mount namespace of its own:

- each folder the box writes (the project, a linked worktree's common dir,
  ``[sandbox] writable``, the private temp folder) maps its owner and group to the
  stand-in. In the box its files are the box user's; what the box makes there is, on the
  host, the folder owner's, as if that user had made it (root's project stays root's);
- each folder at the top of the tree (``/usr``, ``/etc``, ``/root``, ``/tmp``...) maps
  root to the stand-in, so the box reads what it read when it ran as root (the hidden
  paths stay hidden) and reaches the bind sources beneath folders of mode 0700. The box
  sees all of it read-only, so owning it there gives no write. A top folder on a file
  system without idmapped mounts is left as it is: the box then reads there what any
  user may (less, never more).

A folder the box writes on a file system without idmapped mounts (Linux 5.12 or later:
ext4, xfs, btrfs; tmpfs from 6.3) refuses the session with the fix: the box would be
the host's root again, or could write nothing.

**Where the mounts live.** In the session's stage (:mod:`sandbox.backends.stage`), a
mount namespace copied from the host's, made once per session with the box's git binds;
two descriptors hold it and the user namespace, and go with the session or with the
harness. Nothing is mounted on the host, so there is nothing to sweep after a kill.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Sequence

from pathguard.records import NamedTuple
from sandbox import libc
from sandbox.errors import SandboxUnavailable
from sandbox.text import escape

# The stand-in's uid and gid: above any distribution's ranges for accounts, services
# and the usual subordinate ids (checked against the accounts and /etc/subuid at start).
UID = GID = 2_147_000_000

FIX = ("run the harness as a normal user, or keep the folders the box writes on a file "
       "system with idmapped mounts (Linux 5.12 or later: ext4, xfs, btrfs; tmpfs from "
       "6.3)")

# Never mapped: the kernel's own file systems. (/run is: the box masks it, but bwrap
# binds the allowed sockets there from folders of mode 0700.)
_NOT_MAPPED = frozenset({"proc", "sys", "dev"})

# Where nsenter is looked for: system folders only, never PATH (a folder on it may be
# one the box writes).
_NSENTER_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


# (path, the pid of the child that holds a user namespace, required): a folder mounted
# on itself through that namespace's mapping.
Idmap = tuple[str, int, bool]


class Mapped(NamedTuple):
    """A folder seen through a mapping of its owner ``uid`` and group ``gid``."""

    path: str
    uid: int
    gid: int


def needed() -> bool:
    """Whether this process's boxes need a stand-in: it runs as the host's root (uid 0
    in a user namespace that maps it to another user is that user on the host)."""
    return os.geteuid() == 0 and _host_id_of_root() == 0


def stdio_owner() -> tuple[int, int] | None:
    """Whom a box's pipes are given to: the stand-in, when it is needed. A pipe the
    host's root made is mode 0600 and owned by an id the box does not map, so the
    box's command could use the descriptors it was given but not reopen them
    (``cat /dev/stdin``: Permission denied), and a hook reading its input that way
    read nothing. Only the box's processes hold these pipes: their new owner reaches
    nothing else."""
    return (UID, GID) if needed() else None


def _host_id_of_root() -> int | None:
    """The host's id for this user namespace's uid 0 (``/proc/self/uid_map``); None
    when it maps none."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0  # no procfs to ask: take it for the host's root (the safe side)
    for line in lines:
        inside, outside, count = (int(x) for x in line.split())
        if inside <= 0 < inside + count:
            return outside - inside
    return None


def nsenter() -> str:
    """The absolute path of util-linux's ``nsenter``: owned by root (or, in a user
    namespace that does not map the host's root, by the id that stands for it), written
    by no one else. Raises :class:`SandboxUnavailable`."""
    owners = {0, _overflow_uid()}
    for d in _NSENTER_DIRS:
        path = os.path.join(d, "nsenter")
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_uid in owners and not st.st_mode & 0o022 and st.st_mode & 0o100:
            return path
    raise SandboxUnavailable(
        "a box started by root runs as an unprivileged stand-in, entered with nsenter, "
        f"which is not in {', '.join(_NSENTER_DIRS)} (owned by root)",
        "install util-linux: sudo apt-get install util-linux")


def _overflow_uid() -> int:
    """The id the kernel shows for an owner this user namespace does not map."""
    try:
        with open("/proc/sys/kernel/overflowuid", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65534


def open_spaces(roots: Sequence[str],
                make: Callable[[list[Idmap], Callable[[], None]], int],
                also: Sequence[str] = (), children: list[int] | None = None
                ) -> tuple[int, int]:
    """The stand-in's user namespace, and the mount namespace ``make`` builds from the
    idmapped mounts it is given (the folders the box writes, required, then the top
    folders and ``also``, which ``make`` mounts before mapping); both as descriptors.
    Raises :class:`SandboxUnavailable`.

    Each user namespace is made by a child of its own, all started before ``make``, so
    that they and ``make``'s child work at once: ``make`` is given each folder with the
    pid of the child that holds its namespace, and a function that waits for every one
    and maps it (after checking that no account or subordinate range has the
    stand-in's ids), which it calls before its child opens them (``/proc/PID/ns/user``:
    a child not yet reaped keeps its pid). The children are let go at the end; their pids
    go to ``children`` to be reaped later (they exit at once, off this path), or are
    reaped here when it is None."""
    writes = [m for m in map(_mapped, roots) if m is not None]
    tops = [m for m in map(_mapped, (*_tops(), *also)) if m is not None]
    spaces: dict[tuple[int, int], _Space] = {}
    try:
        spaces[(0, 0)] = _Space()
        for m in (*writes, *tops):
            if (m.uid, m.gid) not in spaces:
                spaces[(m.uid, m.gid)] = _Space()
        idmaps = [(m.path, spaces[(m.uid, m.gid)].pid, True) for m in writes]
        idmaps += [(m.path, spaces[(0, 0)].pid, False) for m in tops]

        def mapped() -> None:
            _check_unused()  # here, while the children make their namespaces
            for (uid, gid), space in spaces.items():
                space.map(uid, gid)

        mntns = make(idmaps, mapped)
        try:
            box = spaces[(0, 0)].open()  # a mount keeps the mapping it was given
        except BaseException:
            os.close(mntns)
            raise
    finally:
        pids = [space.release() for space in spaces.values()]
        if children is None:
            reap(pids)
        else:
            children += pids
    return box, mntns


def reap(pids: Sequence[int]) -> None:
    """Reap children that were let go (they exit at once)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _check_unused() -> None:
    import grp
    import pwd

    for what, look in (("uid", pwd.getpwuid), ("gid", grp.getgrgid)):
        try:
            name = look(UID if what == "uid" else GID)[0]
        except KeyError:
            continue
        raise SandboxUnavailable(
            f"the box of a session started by root runs as {what} {UID}, which the "
            f"account {escape(name)} has: it would share that account's files",
            "remove that account's id, or run the harness as a normal user")
    for table in ("/etc/subuid", "/etc/subgid"):
        for owner, first, count in _ranges(table):
            if first <= UID < first + count:
                raise SandboxUnavailable(
                    f"the box of a session started by root runs as id {UID}, which "
                    f"{table} gives {escape(owner)} as a subordinate id: that user's "
                    "containers would share it",
                    f"move that range in {table}, or run the harness as a normal user")


def _ranges(table: str) -> list[tuple[str, int, int]]:
    try:
        with open(table, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def _tops() -> list[str]:
    """The folders at the top of the tree to map: real folders, not links (``/bin`` on
    a merged ``/usr``), and not the kernel's file systems."""
    out = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name in _NOT_MAPPED:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            out.append(path)
    return out


def _mapped(path: str) -> Mapped | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return Mapped(path, st.st_uid, st.st_gid)


class _Space:
    """A child that makes a user namespace and waits while it is mapped and opened:
    :meth:`map`, then :meth:`open` (or a child of the session's opens it by the pid),
    then :meth:`release`."""

    def __init__(self) -> None:
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's side
            try:
                os.close(go_w)
                try:
                    libc.unshare(libc.CLONE_NEWUSER)
                    os.write(ready_w, b"\0")
                except OSError as err:
                    os.write(ready_w, b"%d" % (err.errno or 1))
                os.read(go_r, 1)
            finally:
                os._exit(0)
        for fd in (ready_w, go_r):
            os.close(fd)
        self.pid, self._ready, self._go = pid, ready_r, go_w

    def map(self, uid: int, gid: int) -> None:
        """Wait for the namespace, then make ``uid`` and ``gid`` in it the stand-in's ids
        on the host. Raises :class:`SandboxUnavailable`."""
        said = os.read(self._ready, 16)
        if said != b"\0":
            code = int(said or b"1")
            if code == errno.ENOSPC:  # the namespaces' limit, which bwrap would meet too
                from sandbox.backends.bwrap_find import diagnose_start_failure

                raise diagnose_start_failure(os.strerror(code))
            from sandbox.backends.causes import named

            raise named(SandboxUnavailable(
                f"a box started by root runs as uid {UID}, and this system refused the "
                f"user namespace for it: {os.strerror(code)}", FIX), 0)
        # Root writes the maps, so set-groups stays allowed: nsenter drops the groups.
        for name, line in (("uid_map", f"{uid} {UID} 1\n"),
                           ("gid_map", f"{gid} {GID} 1\n")):
            with open(f"/proc/{self.pid}/{name}", "w", encoding="ascii") as f:
                f.write(line)

    def open(self) -> int:
        """The namespace, as a descriptor (once mapped)."""
        return os.open(f"/proc/{self.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)

    def release(self) -> int:
        """Let the child go; its pid, to reap."""
        for fd in (self._go, self._ready):
            os.close(fd)
        return self.pid
