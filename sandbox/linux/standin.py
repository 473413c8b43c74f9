"""Root's stand-in: a box started by root runs as a host id no account has, not uid 0.

Started by root, bubblewrap maps the box's uid 0 to the host's uid 0, without
capabilities. Whatever checks only the uid still takes such a box for root: a procfs
entry (``kernel.core_pattern`` names a program the kernel runs as root at the next
crash), root's sockets, root's kernel keyring, a set-id program left for the host. So a
session started by root makes a user namespace whose uid 0 and gid 0 are :data:`UID`
and :data:`GID` on the host, and bwrap starts inside it (through ``nsenter``). Every
process of the box is that id on the host, whatever it is called in the box; an entry
of ``/proc/sys`` owned by the host's root is another user's file to it.

**Other owners.** The namespace maps a range: the box's ids 0 to :data:`COUNT` - 1 are
the host's :data:`UID` on (ids no account, group or subordinate range has: checked at
start), and the box keeps :data:`OWNER_CAPS` there, so ``chown`` and ``tar -xp`` work as
for root bare and leave, on the host, files owned by ids no one has. bwrap makes no user
namespace of its own in it (:func:`box_options`: it would map one id), and it can make
none (its limit is 0).

**Files.** The stand-in owns nothing, so the session shows bwrap the host's folders
through *idmapped mounts* made in a mount namespace of its own:

- each folder the box writes (the project, a linked worktree's common dir,
  ``[sandbox] writable``, the private temp folder) maps its owner and group to the
  stand-in, and the rest of the range to itself (:func:`owner_map`). In the box its files
  are the box user's; what the box makes there is, on the host, the folder owner's, as
  if that user had made it (root's project stays root's); what it gives its id N is the
  host's UID + N; a file of any other owner is unmapped (no one's, to the box);
- each folder at the top of the tree (``/usr``, ``/etc``, ``/root``, ``/tmp``...) maps
  root, and root alone, to the stand-in, so the box reads what it read when it ran as
  root (the hidden paths stay hidden) and reaches the bind sources beneath folders of
  mode 0700. The box sees all of it read-only, so owning it there gives no write. A
  top folder on a file system without idmapped mounts is left as it is: the box then
  reads there what any user may (less, never more).

A folder the box writes on a file system without idmapped mounts (Linux 5.12 or later:
ext4, xfs, btrfs; tmpfs from 6.3) refuses the session with the fix: the box would be
the host's root again, or could write nothing.

**Where the mounts live.** In the session's stage (:mod:`sandbox.linux.stage`), a
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
# The box's ids 0 to COUNT - 1 are the host's UID to UID + COUNT - 1 (and so for the
# groups): ids no account has (checked with the stand-in's), which ``chown`` and
# ``tar -xp`` give to the files of a folder the box writes.
COUNT = 65_536

FIX = ("run the harness as a normal user, or keep the folders the box writes on a file "
       "system with idmapped mounts (Linux 5.12 or later: ext4, xfs, btrfs; tmpfs from "
       "6.3)")

# What root bare uses to give files to other owners (``chown``, ``tar -xp``) and to act
# on them, kept by a box of the stand-in in its own user namespace, where they reach only
# the files of the range (a host file of a real account is no id of the box's). Never
# CAP_FSETID (a write to a set-id file of the box's would keep its bits) nor CAP_SETUID.
OWNER_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")

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


def box_options(options: Sequence[str]) -> tuple[str, ...]:
    """bwrap's ``options`` for a box of the stand-in: bwrap starts in the stand-in's user
    namespace (entered by ``nsenter``, which maps the range) and makes none of its own,
    which would map one id (``--unshare-all`` makes one: each other namespace is named
    instead; ``--disable-userns`` needs one, and the filter refuses every new namespace
    in the box); and the box keeps :data:`OWNER_CAPS` in that namespace, as root bare
    has them, on what its range owns."""
    share_net = "--share-net" in options
    out: list[str] = []
    for arg in options:
        if arg == "--unshare-all":
            out += ["--unshare-ipc", "--unshare-pid", "--unshare-uts",
                    "--unshare-cgroup-try", *(() if share_net else ("--unshare-net",))]
        elif arg not in ("--unshare-user", "--disable-userns", "--share-net"):
            out.append(arg)
    if "--cap-drop" in out:
        at = out.index("--cap-drop") + 2
        out[at:at] = [x for cap in OWNER_CAPS for x in ("--cap-add", cap)]
    return tuple(out)


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
    nothing else. Asked once per process and effective uid: every warm run asks."""
    key = (os.getpid(), os.geteuid())
    if key not in _owner:
        _owner.clear()
        _owner[key] = (UID, GID) if needed() else None
    return _owner[key]


# The answer of stdio_owner for this process and effective uid.
_owner: dict[tuple[int, int], tuple[int, int] | None] = {}


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
    # The box's own, mapping the whole range; the top folders', root to the stand-in
    # alone (their other owners are real accounts: never the box's); each owner of a
    # folder the box writes, that owner to the stand-in and the rest of the range as it
    # is (what the box gives its ids 1 and up lands on the host as those ids).
    spaces: dict[tuple[int, int] | str, _Space] = {}
    try:
        spaces["box"] = _Space(last=True)
        spaces["top"] = _Space()
        for m in writes:
            if (m.uid, m.gid) not in spaces:
                spaces[(m.uid, m.gid)] = _Space()
        idmaps = [(m.path, spaces[(m.uid, m.gid)].pid, True) for m in writes]
        idmaps += [(m.path, spaces["top"].pid, False) for m in tops]

        def mapped() -> None:
            _check_unused()  # here, while the children make their namespaces
            for key, space in spaces.items():
                if key == "box":
                    space.map(_line(0, UID, COUNT), _line(0, GID, COUNT))
                elif key == "top":
                    space.map(_line(0, UID, 1), _line(0, GID, 1))
                elif isinstance(key, tuple):
                    space.map(owner_map(key[0], UID), owner_map(key[1], GID))

        mntns = make(idmaps, mapped)
        try:
            box = spaces["box"].open()  # a mount keeps the mapping it was given
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


def _line(inside: int, outside: int, count: int) -> str:
    return f"{inside} {outside} {count}\n"


def owner_map(owner: int, first: int) -> str:
    """An idmapped folder's map (``uid_map`` or ``gid_map``) for the folder's ``owner``:
    the owner is the stand-in (``first``, the box's 0), and each other id of the range
    (``first + 1`` on) is itself. An owner inside the range trades places with the
    stand-in's own id, so that every id of the range has one owner on the disk."""
    end = first + COUNT
    if not first < owner < end:
        return _line(owner, first, 1) + _line(first + 1, first + 1, COUNT - 1)
    return (_line(owner, first, 1) + _line(first, owner, 1)
            + _line(first + 1, first + 1, owner - first - 1)
            + (_line(owner + 1, owner + 1, end - owner - 1) if owner + 1 < end else ""))


def _check_unused() -> None:
    """Refuses the stand-in when an account, a group or a subordinate range of
    ``/etc/subuid`` or ``/etc/subgid`` has an id of its range."""
    import grp
    import pwd

    named = [("uid", UID, p.pw_name, p.pw_uid) for p in pwd.getpwall()]
    named += [("gid", GID, g.gr_name, g.gr_gid) for g in grp.getgrall()]
    for what, base, name, number in named:
        if base <= number < base + COUNT:
            raise SandboxUnavailable(
                f"the box of a session started by root runs as {what}s {base} to "
                f"{base + COUNT - 1}, and the account {escape(name)} has {what} "
                f"{number}: the box would share that account's files",
                "give that account an id outside that range, or run the harness as a "
                "normal user")
    for table, base in (("/etc/subuid", UID), ("/etc/subgid", GID)):
        for owner, first, count in _ranges(table):
            if first < base + COUNT and first + count > base:
                raise SandboxUnavailable(
                    f"the box of a session started by root runs as ids {base} to "
                    f"{base + COUNT - 1}, and {table} gives {escape(owner)} the "
                    f"subordinate ids {first} to {first + count - 1}: that user's "
                    "containers would share them",
                    f"move that range in {table} out of the stand-in's, or run the "
                    "harness as a normal user")


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


def _no_more_namespaces() -> None:  # pragma: no cover - in a _Space's child
    """This user namespace's limit of user namespaces made in it set to 0 (each one's
    own sysctl; raising it needs CAP_SYS_RESOURCE there, which no box has). Where the
    host's /proc/sys is read-only (a container), the filter alone refuses them."""
    with contextlib.suppress(OSError):
        fd = os.open("/proc/sys/user/max_user_namespaces", os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


class _Space:
    """A child that makes a user namespace and waits while it is mapped and opened:
    :meth:`map`, then :meth:`open` (or a child of the session's opens it by the pid),
    then :meth:`release`."""

    def __init__(self, *, last: bool = False) -> None:
        """``last``: no user namespace can be made in this one (the box's: as bwrap's
        ``--disable-userns`` would, beneath the filter that refuses them), where
        ``/proc/sys`` can be written."""
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's side
            try:
                os.close(go_w)
                try:
                    libc.unshare(libc.CLONE_NEWUSER)
                    if last:
                        _no_more_namespaces()
                    os.write(ready_w, b"\0")
                except OSError as err:
                    os.write(ready_w, b"%d" % (err.errno or 1))
                os.read(go_r, 1)
            finally:
                os._exit(0)
        for fd in (ready_w, go_r):
            os.close(fd)
        self.pid, self._ready, self._go = pid, ready_r, go_w

    def map(self, uid_map: str, gid_map: str) -> None:
        """Wait for the namespace, then write its ``uid_map`` and ``gid_map`` (lines of
        the stand-in's range). Raises :class:`SandboxUnavailable`."""
        said = os.read(self._ready, 16)
        if said != b"\0":
            code = int(said or b"1")
            if code == errno.ENOSPC:  # the namespaces' limit, which bwrap would meet too
                from sandbox.linux.causes import diagnose_start_failure

                raise diagnose_start_failure(os.strerror(code))
            from sandbox.linux.causes import named

            raise named(SandboxUnavailable(
                f"a box started by root runs as uid {UID}, and this system refused the "
                f"user namespace for it: {os.strerror(code)}", FIX), 0)
        # Root writes the maps, so set-groups stays allowed: nsenter drops the groups.
        for name, line in (("uid_map", uid_map), ("gid_map", gid_map)):
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
