"""The session's staging namespaces: where the box's git binds are made once, by us.

bubblewrap makes each bind by reading the whole mount table (``/proc/self/mountinfo``)
to set the new mount's flags, so a box with many binds costs it quadratic time: a
repository with 200 modules has 1,400 pinned and protected paths, seconds for every
bwrap. A *stage* is a user and mount namespace of the session's own, copied from the
host's (later host mounts reach it, none go back), in which those binds are made with
the kernel's mount calls, a constant cost each; bwrap then starts inside it (through
``nsenter``) and its recursive binds of the read-write roots carry them into the box,
where they are *locked*: a box in a user namespace of its own cannot unmount one to
reach the writable file below.

Each bind is made on the descriptor of what it covers, reached without following a
link (:func:`sandbox.fs.beneath.open_path`) and checked against what the session held at
its open (device and inode), so a path swapped for a link in between fails the open,
as bwrap's ``--bind-fd`` would.

Root's stand-in (:mod:`sandbox.linux.standin`) is a stage too, whose user namespace
maps the stand-in's range of ids and whose read-write roots are idmapped. Any other
user's stage maps that user, alone, to itself and is made only for a box with many
binds (:data:`STAGE_AT`): a few binds cost bwrap less than the stage's two short-lived
children and ``nsenter``.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Sequence
from typing import Any

from sandbox import libc
from sandbox.errors import PolicyError, SandboxUnavailable, StageRefused

# Imported here, not in the child: a forked child of a process with threads imports
# nothing.
from sandbox.linux import standin
from sandbox.linux.stagebinds import (
    Bind,
    Said,
    bind_all,
    copy_root,
    detach_others,
    idmap_roots,
    mount_layers,
    share_roots,
)
from sandbox.text import escape

# A plain user's box is staged from this many binds on (pins, protected names, covers).
STAGE_AT = 64

# Held while a stage's children are forked and until they are let go: a child forked
# (without exec) by another thread meanwhile would hold a copy of the pipe each waits
# on to be let go, and two sessions opening at once in one process would wait for each
# other's children for ever.
FORKS = threading.Lock()

# Beside the session's private temp folder: where the stage mounts its copy of ``/``
# without the stage's binds (see :func:`root_copy`).
ROOT_SUFFIX = ".root"


def root_copy(private: str) -> str:
    """The folder where the stage of the session whose private temp folder is
    ``private`` mounts its copy of ``/`` as it was before its binds: a staged box's
    ``/`` comes from there, so that the binds are in the box once, under the read-write
    roots bwrap binds from the stage's own tree, and not again under a ``/`` that those
    cover. Empty on the host (the mount is the stage's); removed with the session."""
    return private + ROOT_SUFFIX


class Stage:
    """One session's stage. Build with :meth:`open`; :meth:`close` gives it back."""

    def __init__(self, userns: int, mntns: int, program: str, stand_in: bool,
                 root: str = "/", *, children: Sequence[int] = (),
                 late: Sequence[Bind] = ()) -> None:
        self._userns = userns
        self._mntns = mntns
        # The binds not made yet (see open's ``late``), made by bind_late; a box's
        # plan in another thread waits for them.
        self._late = tuple(late)
        self._late_lock = threading.Lock()
        self._failed: BaseException | None = None
        # The children that made the namespaces, let go: each exits at once, and is
        # reaped when the first box's plan is made (waiting at the open would wait for
        # its memory's release), or at the close.
        self._children = list(children)
        self.program = program
        self.stand_in = stand_in
        # What a box of the stage binds as its /: the stage's own, or its copy from
        # before its binds (:func:`root_copy`).
        self.root = root
        # Each package cache's overlay the kernel refused, as "tool: why".
        self.unlayered: tuple[str, ...] = ()

    @classmethod
    def open(cls, roots: Sequence[str], binds: Sequence[Bind], *, stand_in: bool,
             late: bool = False, layers: Sequence[Any] = ()) -> Stage:
        """The stage for a box that writes ``roots`` (the private temp folder first),
        with ``binds`` made in it (in order: shallowest first). ``stand_in`` makes it
        root's stand-in. ``late`` leaves the binds to :meth:`bind_late`, for one box
        started before them: see :meth:`bind_late`. ``layers``: the overlays that warm
        the package caches (:mod:`sandbox.policy.layers`), made before the binds; each
        one the kernel refused is in :attr:`unlayered`. Raises
        :class:`SandboxUnavailable`, or :class:`PolicyError` for a path that changed."""
        program = standin.nsenter()
        libc.libc()  # loaded before any fork
        private = roots[0] if roots else ""
        # The copy doubles the mount table every bwrap of the stage reads for each of
        # its mounts (about 5 ms a box as root): made only where the binds are many,
        # and so would be in the box twice at a cost.
        copy = _made_folder(root_copy(private)) if private and len(binds) >= STAGE_AT \
            else ""
        children: list[int] = []
        unlayered: list[str] = []
        with FORKS:  # see FORKS
            try:
                if stand_in:
                    # The private temp folder's folder is a mount of the stage's own (see
                    # _detach_others), mapped as the top folders are.
                    userns, mntns = standin.open_spaces(
                        roots, lambda idmaps, mapped: _stage(idmaps, mapped, binds,
                                                             private=private, copy=copy,
                                                             children=children, late=late,
                                                             layers=(layers, unlayered)),
                        also=(os.path.dirname(private),) if private else (), children=children)
                else:
                    userns, mntns = _own_stage(binds, copy, children, late=late,
                                               layers=(layers, unlayered))
            except BaseException:
                standin.reap(children)
                raise
        made = cls(userns, mntns, program, stand_in, copy or "/", children=children,
                   late=binds if late else ())
        made.unlayered = tuple(unlayered)
        return made

    def bind_late(self) -> None:
        """Make the binds :meth:`open` was told to leave (``late``), once; nothing if
        there are none left. Safe from any thread: a second caller waits for the first.

        bwrap reads the whole mount table after each of its own binds, so a box started
        in a stage that holds 1,400 mounts pays for them a dozen times. A stage made
        ``late`` has instead each read-write root that holds binds bound onto itself
        and *shared*, and the warm box's bwrap starts there while this makes the binds:
        a bind made before bwrap copies the namespace is copied with it, and one made
        after reaches bwrap's copy of its root, a slave of the stage's; either way the
        box has each once. No run is made in the box before this returns (a run's
        namespace is a private copy), and a bind that would cover a mount bwrap makes
        itself is never left late (:func:`~sandbox.linux.bwrap_args.bindable_late`):
        arriving after it, it would lay the folder bare over that mount.

        The kernel locks every mount of a propagated tree but its top, which a process
        with ``CAP_SYS_ADMIN`` in the box's user namespace could unmount; so it could
        every bind bwrap makes itself. The commands have no capability there, and their
        filter refuses them a namespace of their own (which would copy every mount
        locked). Raises
        :class:`PolicyError` for a path that changed since the session held it, else
        :class:`SandboxUnavailable`; after a failure, every later call raises it
        again (some binds may be made, and no box may start here)."""
        with self._late_lock:
            if self._failed is not None:
                raise self._failed  # some may be made: no box starts here any more
            if self._late:
                try:
                    self._bind(self._late)
                except BaseException as err:
                    self._failed = err
                    raise
                self._late = ()

    def _bind(self, binds: Sequence[Bind]) -> None:
        userns, mntns = self._userns, self._mntns

        def work(_report: int) -> bytes:
            # Root's stage is a mount namespace of the host's user namespace; anyone
            # else's, of a user namespace this user made, entered first.
            if not self.stand_in:
                libc.setns(userns, libc.CLONE_NEWUSER)
            libc.setns(mntns, libc.CLONE_NEWNS)
            bind_all(binds)
            return b""

        with FORKS:
            _, report, finish = _run_child(work)
            try:
                _said(report)
            finally:
                standin.reap([finish()])

    def argv(self) -> tuple[str, ...]:
        """What goes before bwrap's own argv: ``nsenter`` into the stage's namespaces,
        opened through this process's ``/proc`` (no descriptor of them is passed on:
        bwrap hands its command what it inherits).
        Root's stand-in enters the mount namespace first (a process of the stand-in
        could not enter the host's) and becomes the stand-in's uid and gid 0 with no
        supplementary group; anyone else enters the user namespace first and stays who
        they are."""
        self._reap()
        me = f"/proc/{os.getpid()}/fd"
        ns = (f"--mount={me}/{self._mntns}", f"--user={me}/{self._userns}")
        if self.stand_in:
            return (self.program, *ns, "--setuid=0", "--setgid=0", "--")
        return (self.program, *ns, "--preserve-credentials", "--")

    def close(self) -> None:
        for fd in (self._userns, self._mntns):
            if fd >= 0:
                os.close(fd)
        self._userns = self._mntns = -1
        self._reap()

    def _reap(self) -> None:
        children, self._children = self._children, []
        standin.reap(children)


Idmap = standin.Idmap


def _made_folder(path: str) -> str:
    """``path``, an empty folder of ours (mode 700): made, or found so (a session's
    stage made again). Anything else refuses the stage."""
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or os.listdir(path):
        raise PolicyError(f"{escape(path)} is not the empty folder of this session's "
                          "stage; remove it and try again")
    return path


def _stage(idmaps: Sequence[Idmap], mapped: Callable[[], None], binds: Sequence[Bind], *,
           private: str, copy: str, children: list[int], late: bool = False,
           layers: Layers) -> int:
    """Root's mount namespace: copied from this one, with ``idmaps`` and ``binds``
    made in it; as a descriptor. A child makes it (see :func:`_run_child`), its pid
    added to ``children``; it copies the namespace while :func:`mapped` waits for the
    user namespaces of ``idmaps`` and maps them, then opens them by their holders' pids.

    The ``/tmp`` tmpfs of every other session started by root (in the folder of the
    session's ``private`` temp folder) is left out: a host that does not share its
    mounts would leave one in the copy after its session removed it, and bwrap fails on
    a mount whose folder is gone."""
    mapped_r, mapped_w = os.pipe()

    def work(_report: int) -> bytes:
        os.close(mapped_w)
        libc.unshare(libc.CLONE_NEWNS)
        libc.make_rslave("/")
        if private:
            detach_others(private)
        if os.read(mapped_r, 1) != b"m":
            raise OSError(0, "the session did not map the stand-in's user namespaces")
        idmap_roots(idmaps)
        copy_root(copy)
        failed = mount_layers(layers[0], own=False)
        (share_roots if late else bind_all)(binds)
        return os.fsencode("\0".join(failed))

    pid, report, finish = _run_child(work)
    os.close(mapped_r)
    try:
        mapped()
        os.write(mapped_w, b"m")
        _layers_said(_said(report), layers[1])
        return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(mapped_w)
        children.append(finish())


def _own_stage(binds: Sequence[Bind], copy: str, children: list[int], *,
               layers: Layers, late: bool = False) -> tuple[int, int]:
    """A plain user's stage: a user namespace mapping this user to itself, and a mount
    namespace with ``binds`` made in it (and ``/`` copied on ``copy`` before them); as
    descriptors. The child that makes them is added to ``children``."""
    uid, gid = os.getuid(), os.getgid()
    maps_r, maps_w = os.pipe()

    def work(report: int) -> bytes:
        os.close(maps_w)
        try:
            libc.unshare(libc.CLONE_NEWUSER)
        except OSError as err:
            raise Said("refused", "", err.strerror or str(err)) from err
        os.write(report, b"u")  # the parent maps us now
        if os.read(maps_r, 1) != b"m":
            raise OSError(0, "the session did not map the stage's user namespace")
        libc.unshare(libc.CLONE_NEWNS)
        libc.make_rslave("/")
        copy_root(copy)
        failed = mount_layers(layers[0], own=True)
        (share_roots if late else bind_all)(binds)
        return os.fsencode("\0".join(failed))

    pid, report, finish = _run_child(work)
    os.close(maps_r)
    try:
        first = report.read(1)
        if first != b"u":
            _said(report, first=first)
        try:
            for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"),
                               ("gid_map", f"{gid} {gid} 1\n")):
                with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as f:
                    f.write(line)
        except OSError as err:
            raise SandboxUnavailable(
                f"the box's staging namespace could not be mapped: {err.strerror}",
                standin.FIX) from err
        os.write(maps_w, b"m")
        _layers_said(_said(report), layers[1])
        return (os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC),
                os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
    finally:
        os.close(maps_w)
        children.append(finish())


# The layers a stage's child mounts, and the list it adds each refused one to.
Layers = tuple[Sequence[Any], list[str]]


def _layers_said(said: bytes, into: list[str]) -> None:
    into += [p for p in os.fsdecode(said).split("\0") if p]


class _Report:
    """The parent's end of a child's report: bytes up to the end of the pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, n: int) -> bytes:
        return os.read(self.fd, n)

    def rest(self) -> bytes:
        out = b""
        while chunk := os.read(self.fd, 65536):
            out += chunk
        return out


def _run_child(work: Callable[[int], bytes]
               ) -> tuple[int, _Report, Callable[[], int]]:
    """Fork a child that runs ``work(report)`` (``report``: its end of the report pipe,
    for anything it says first) and reports ``ok`` and its result, or the
    error (``no``, ``changed``), then waits to be let go while its namespaces are
    opened. The child's pid, the report, and the function that lets it go and gives
    its pid, to reap (:func:`~sandbox.linux.standin.reap`)."""
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's side
        os.close(go_w)
        os.close(out_r)
        try:
            said = b"ok\0" + work(out_w)
        except Said as err:
            said = os.fsencode(f"{err.kind}\0{err.path}\0{err.why}")
        except OSError as err:
            said = os.fsencode(f"no\0{err.filename or ''}\0{err.strerror or err}")
        except BaseException as err:
            said = os.fsencode(f"no\0\0{err}")
        try:
            # The session may have stopped listening (it failed first): nothing to say.
            os.write(out_w, said)
            os.close(out_w)
            os.read(go_r, 1)
        finally:
            os._exit(0)
    os.close(out_w)
    os.close(go_r)

    def finish() -> int:
        os.close(go_w)
        os.close(out_r)
        return pid

    return pid, _Report(out_r), finish


def _said(report: _Report, first: bytes = b"") -> bytes:
    """The child's result, or its error raised."""
    kind, _, rest = os.fsdecode(first + report.rest()).partition("\0")
    if kind == "ok":
        return os.fsencode(rest)
    path, _, why = rest.partition("\0")
    if kind == "changed":
        raise PolicyError(f"{escape(path)} changed while the session opened ({why}); "
                          "try again")
    if kind == "refused":
        raise StageRefused(f"this user may not make the box's staging namespace: {why}",
                      "bwrap makes the binds itself instead")
    if kind == "unmapped":
        raise SandboxUnavailable(
            f"a box started by root runs as uid {standin.UID}, and {escape(path)}, which "
            f"the box writes, cannot be mapped to it: {why}", standin.FIX)
    where = f"{escape(path)}: " if path else ""
    from sandbox.linux.causes import named

    raise named(SandboxUnavailable(f"the box's namespaces could not be staged: {where}"
                                   f"{why or 'the child ended'}",
                                   "see harness-sandbox doctor, and say so in a bug report"))
