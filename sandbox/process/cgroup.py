"""Control groups: the box's process and memory bounds, and a group per host run.

What the machine offers decides what is used:

- **cgroup v2** (the unified hierarchy) where this process may make a child of its own
  group: root, or a group systemd delegated to the user. Bounds need the ``pids`` and
  ``memory`` controllers enabled below that group; killing needs only ``cgroup.kill``
  (Linux 5.14), which every v2 group has, controllers or not.
- **cgroup v1** as root: the ``pids`` and ``memory`` hierarchies for bounds, the
  ``freezer`` hierarchy for killing (freeze, SIGKILL every member, thaw: a frozen
  process cannot fork while its siblings are killed).

Groups are made below the group this process is in, so any bound already placed on the
harness still holds for what it starts. A process is put in a group just after it
started, with its descendants (:func:`adopt`): the group's bound holds from then on.
Every function raises :class:`CgroupUnavailable` with the reason when a group cannot be
made; callers report it and use the fallback (see :mod:`sandbox.policy.limits`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pathguard.records import NamedTuple
from sandbox.errors import CgroupUnavailable as CgroupUnavailable

_counter = itertools.count(1)
_cleared: set[str] = set()
T = TypeVar("T")
# How long a kill waits for a group to empty before it gives up.
KILL_BOUND = 2.0


class Group(NamedTuple):
    """A group made by this process: ``dirs`` are its folders, one per v1 hierarchy
    (``pids``, ``memory`` or ``freezer``) or the one v2 folder."""

    version: int
    dirs: tuple[str, ...]

    @property
    def procs(self) -> tuple[str, ...]:
        return tuple(os.path.join(d, "cgroup.procs") for d in self.dirs)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, type, super options) of every cgroup file system."""
    out: list[tuple[str, str, set[str]]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            point = fields[4].replace("\\040", " ")
            out.append((point, rest[0], set(rest[2].split(","))))
    return out


def _own(key: str) -> str | None:
    """This process's group in the hierarchy ``key`` ("" for v2, else a controller)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if (key == "" and names == "") or key in names.split(","):
            return path
    return None


def v2_base() -> str | None:
    """This process's own v2 folder, or None where there is no unified hierarchy."""
    own = _own("")
    for point, kind, _ in _mounts():
        if kind == "cgroup2" and own is not None:
            return os.path.normpath(point + own)
    return None


def v1_base(controller: str) -> str | None:
    """This process's own folder in the v1 hierarchy of ``controller``, or None."""
    own = _own(controller)
    for point, kind, opts in _mounts():
        if kind == "cgroup" and controller in opts and own is not None:
            return os.path.normpath(point + own)
    return None


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def clear_stale(base: str) -> None:
    """Remove the empty groups in ``base`` that a harness process now gone left (one
    killed before it could clean up): their names carry the maker's pid."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) == 4 and parts[0] == "harness" and parts[1] in ("box", "run") \
                and parts[2].isdigit() and not _alive(int(parts[2])):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(base, name))


def _mkdir(base: str, prefix: str) -> str:
    if base not in _cleared:  # once per folder and process
        _cleared.add(base)
        clear_stale(base)
    path = os.path.join(base, f"{prefix}-{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(path)
    except OSError as err:
        raise CgroupUnavailable(f"cannot make a group in {base}: {err.strerror}") from err
    return path


def bounded(processes: int, memory: int) -> Group:
    """A group whose members may have at most ``processes`` tasks and ``memory`` bytes
    (no swap beyond it), made where this machine allows (see the module's text)."""
    base = v2_base()
    if base is not None and _v2_has(base, ("pids", "memory")):
        path = _mkdir(base, "harness-box")
        try:
            _write(os.path.join(path, "pids.max"), str(processes))
            _write(os.path.join(path, "memory.max"), str(memory))
            with contextlib.suppress(FileNotFoundError):
                _write(os.path.join(path, "memory.swap.max"), "0")
        except OSError as err:
            remove(Group(2, (path,)))
            raise CgroupUnavailable(f"cannot set the bounds in {path}: {err.strerror}") from err
        return Group(2, (path,))
    pids, mem = v1_base("pids"), v1_base("memory")
    if pids is None or mem is None:
        raise CgroupUnavailable(
            "no cgroup with the pids and memory controllers can be made here (cgroup v2 "
            "without them delegated to this user, and no cgroup v1 pids and memory)")
    made: list[str] = []
    if not os.access(pids, os.W_OK) or not os.access(mem, os.W_OK):
        raise CgroupUnavailable(
            f"this machine has cgroup v1, where only root may make a group ({pids} and "
            f"{mem} are not writable); run as root, or use a cgroup v2 machine with "
            "systemd's user delegation")
    try:
        made.append(_mkdir(pids, "harness-box"))
        made.append(_mkdir(mem, "harness-box"))
        _write(os.path.join(made[0], "pids.max"), str(processes))
        _write(os.path.join(made[1], "memory.limit_in_bytes"), str(memory))
        with contextlib.suppress(FileNotFoundError):  # swap accounting is optional
            _write(os.path.join(made[1], "memory.memsw.limit_in_bytes"), str(memory))
    except OSError as err:
        remove(Group(1, tuple(made)))
        raise CgroupUnavailable(f"cannot set the bounds: {err.strerror}") from err
    except CgroupUnavailable:
        remove(Group(1, tuple(made)))
        raise
    return Group(1, tuple(made))


def _v2_has(base: str, controllers: tuple[str, ...]) -> bool:
    """True when a child of ``base`` gets ``controllers`` (enabling them if we may)."""
    try:
        enabled = set(_read(os.path.join(base, "cgroup.subtree_control")).split())
        if all(c in enabled for c in controllers):
            return True
        available = set(_read(os.path.join(base, "cgroup.controllers")).split())
        if not all(c in available for c in controllers):
            return False
        # Fails (EBUSY) while the group itself holds processes: v2 keeps them in leaves.
        _write(os.path.join(base, "cgroup.subtree_control"),
               " ".join(f"+{c}" for c in controllers))
        return True
    except OSError:
        return False


def killable() -> Group:
    """An empty group that :func:`kill` can end at once: v2 anywhere this process may
    make one (``cgroup.kill``), else the v1 freezer as root."""
    base = v2_base()
    if base is not None and os.access(base, os.W_OK):
        path = _mkdir(base, "harness-run")
        if os.path.exists(os.path.join(path, "cgroup.kill")):
            return Group(2, (path,))
        remove(Group(2, (path,)))
    return frozen()


def frozen() -> Group:
    """An empty group of the v1 freezer (killed by freeze, SIGKILL, thaw)."""
    freezer = v1_base("freezer")
    if freezer is None:
        raise CgroupUnavailable("no cgroup v2 group can be made here and there is no "
                                "cgroup v1 freezer")
    return Group(1, (_mkdir(freezer, "harness-run"),))


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children",
                                                    "rb") as f:
                out += [int(p) for p in f.read().split()]
    return out


def adopt(group: Group, pid: int, *, stop: bool = False) -> None:
    """Move ``pid`` and then its descendants into ``group``. Each process is moved
    before its children are listed, so a child forked meanwhile is born inside or
    listed. Raises OSError when ``pid`` itself cannot be moved.

    A move waits for the kernel (an RCU grace period: milliseconds on a busy machine),
    long enough for a program to double-fork out of reach first. With ``stop`` each
    process is stopped (SIGSTOP) before it is moved and continued once all are in: a
    stopped process cannot fork (a fork under way when the signal comes is restarted
    after it), so only what the program did in the moment before the first stop can
    be outside."""
    todo = [pid]
    stopped: list[int] = []
    first = True
    try:
        while todo:
            p = todo.pop()
            if stop:
                try:
                    os.kill(p, signal.SIGSTOP)
                    stopped.append(p)
                except OSError:
                    if first:
                        raise
                    continue
            try:
                for procs in group.procs:
                    _write(procs, str(p))
            except OSError:
                if first:
                    raise
                continue  # it exited meanwhile
            first = False
            todo += children(p)
    finally:
        for p in stopped:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGCONT)


def members(group: Group) -> list[int]:
    """The processes in ``group``, never this one: a spawner thread of ours may sit in
    it (:class:`Spawner`), and the harness is no member to kill."""
    out: set[int] = set()
    for procs in group.procs:
        with contextlib.suppress(OSError):
            out.update(int(p) for p in _read(procs).split())
    out.discard(os.getpid())
    return sorted(out)


def kill(group: Group) -> list[int]:
    """SIGKILL every member of ``group`` (a :func:`killable` group) and wait, at most
    :data:`KILL_BOUND` s, until it is empty. Returns the pids that were members."""
    seen = members(group)
    if group.version == 2:
        with contextlib.suppress(OSError):
            _write(os.path.join(group.dirs[0], "cgroup.kill"), "1")
    else:
        state = os.path.join(group.dirs[0], "freezer.state")
        with contextlib.suppress(OSError):
            _write(state, "FROZEN")
            end = time.monotonic() + KILL_BOUND
            while _read(state).strip() != "FROZEN" and time.monotonic() < end:
                time.sleep(0.001)
        seen = members(group)
        for pid in seen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            _write(state, "THAWED")
    end = time.monotonic() + KILL_BOUND
    while members(group) and time.monotonic() < end:
        time.sleep(0.001)
    return seen


def oom_kills(group: Group) -> int:
    """How many processes the kernel killed in ``group`` for its memory bound."""
    name = "memory.events" if group.version == 2 else "memory.oom_control"
    for d in group.dirs:
        with contextlib.suppress(OSError):
            for line in _read(os.path.join(d, name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0


def remove(group: Group) -> None:
    """Remove the group's folders (each must be empty of processes; a folder that still
    has members after :data:`KILL_BOUND` s is left)."""
    for d in group.dirs:
        end = time.monotonic() + KILL_BOUND
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() >= end:
                    break
                time.sleep(0.002)


Spawn = Callable[[Callable[[], T]], T]


class Spawner:
    """A thread that lives in a v1 ``group`` and starts processes there.

    cgroup v1 lets one thread of a process sit in another group than its siblings, and a
    child is born in the groups of the thread that forks it: processes this thread
    starts are inside from their first instruction, with no move per run (a move waits
    for an RCU grace period). The harness's own memory stays charged where it was (to
    its leader's group). cgroup v2 keeps a process's threads together, so there the
    session moves each run instead.

    The thread joins the group on its own (the move waits for the kernel); until
    :attr:`joined` is set it cannot be used, and if joining fails it never is."""

    def __init__(self, group: Group) -> None:
        self._todo: queue.SimpleQueue[tuple[Callable[[], object], list[object],
                                            threading.Event] | None] = queue.SimpleQueue()
        self.joined = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(group,), daemon=True,
                                        name="harness-sandbox-spawner")
        self._thread.start()

    def _loop(self, group: Group) -> None:
        try:
            for d in group.dirs:
                _write(os.path.join(d, "tasks"), str(threading.get_native_id()))
        except OSError:
            return
        self.joined.set()
        while (item := self._todo.get()) is not None:
            fn, out, done = item
            try:
                out.append(fn())
            except BaseException as err:
                out.append(err)
            done.set()

    def __call__(self, fn: Callable[[], T]) -> T:
        out: list[object] = []
        done = threading.Event()
        self._todo.put((fn, out, done))
        done.wait()
        if isinstance(out[0], BaseException):
            raise out[0]
        return out[0]  # type: ignore[return-value]

    def stop(self) -> None:
        self._todo.put(None)

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the thread to end (after :meth:`stop`): then it has left the group."""
        self._thread.join(timeout)
