"""What a session adds to the box beyond its namespaces, set up once per session.

- the system-call filter (:mod:`sandbox.linux.seccomp`), compiled once; each run reads it
  from a descriptor of its own;
- the bounds (:mod:`sandbox.policy.limits`): processes and memory through a control group
  where the machine allows one (:mod:`sandbox.process.cgroup`), else processes through
  ``RLIMIT_NPROC``, which counts per user namespace, so per box; ``/dev/shm`` a tmpfs of
  ``shm_size`` always; the private ``/tmp`` a tmpfs of ``tmp_size`` mounted on the
  session's folder where this process may mount (root), so it keeps its files across
  the session's runs; an unprivileged user cannot mount one that outlives a run, and it
  stays an unbounded folder (said in :meth:`Hardening.bounds`);
- host runs each in a control group of their own, killed whole when the run ends;
- the child subreaper role while the session is open, with a box or without
  (:mod:`sandbox.process.reaper`): what a host run leaves behind outside its group comes
  here, and what hides from the marker sweep is killed.

The box that owns it makes it (:class:`~sandbox.linux.linuxbox.LinuxBox`, with
``boxed=True``, and hands the filter, the guard and the launcher to its backend;
:class:`~sandbox.macos.macbox.MacBox`), and the session's host runs share it; a session
with no box makes its own, for host runs only. Which run is a box run is said by the
caller of :meth:`Hardening.supervise`, never guessed from the plan.

Whatever cannot be had is reported by :meth:`Hardening.bounds`, never pretended.
"""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sandbox.errors import SandboxUnavailable
from sandbox.libc import detach, mount_tmpfs
from sandbox.linux import filtercache
from sandbox.linux.seccomp import Compiled, reader
from sandbox.plan import LaunchPlan, RunResult
from sandbox.policy.limits import Bound, Limits, describe
from sandbox.process import cgroup, reaper
from sandbox.process.hostseat import Seat, Seats

if TYPE_CHECKING:
    from sandbox.linux.initcache import Launcher

# The supervisor, given what to do at a run's start and (or None) what starts it.
Runner = Callable[[Callable[[int], None] | None, "cgroup.Spawn[Any] | None"], RunResult]

FILTER_FIX = "install libseccomp (sudo apt-get install libseccomp2) and pyseccomp"


def _ours(marker: str) -> bool:
    """A run marker of this process (its watchdog's instance)."""
    from sandbox.process.watchdog import watchdog

    instance = watchdog.instance if watchdog.pid > 0 else ""
    return bool(instance) and marker.startswith(instance + ".")


def unmount_stale(root: str) -> None:
    """Unmount the session tmpfs mounts under ``root`` whose harness process is gone
    (killed before its session ended: its tmpfs would hold memory until a reboot). A
    session folder is named ``session-<pid>-...``."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            points = [line.split()[4] for line in f]
    except OSError:
        return
    for point in points:
        head, _, name = point.rpartition("/")
        parts = name.split("-")
        if head != root or len(parts) < 3 or parts[0] != "session" or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue
        except ProcessLookupError:
            pass
        except OSError:
            continue
        detach(point)


def _mount_tmpfs(path: str, size: int) -> str | None:
    """Mount a tmpfs of ``size`` bytes on ``path``; None, or why it could not be."""
    if os.geteuid() != 0:
        return ("mounting a size-capped tmpfs that lasts for the session needs root; an "
                "unprivileged user's private /tmp is a folder on the host's disk")
    unmount_stale(os.path.dirname(path))
    try:
        mount_tmpfs(path, f"size={size},mode=0700")
    except OSError as err:
        return str(err.strerror)  # "mounting a tmpfs failed: <the OS's reason>"
    return None


GUARD_FIX = ("run the box on Linux 5.6 or later (x86-64 or arm64), where seccomp's user "
             "notification and pidfd_getfd exist")


def _guard_program(root: str, host_network: bool) -> bytes:
    """The Unix-socket guard's filter for every boxed run (sandbox/linux/warm/unixguard.py),
    with binds supervised too in a box on the host's network. A kernel that cannot
    carry it refuses the session: never a box that lets the command reach any listening
    socket."""
    from sandbox.linux.seccomp import UNIX_GUARD, UNIX_GUARD_BIND
    from sandbox.linux.warm.guardparts import unsupported

    why = unsupported()
    if why is not None:
        raise SandboxUnavailable(f"the box cannot guard Unix sockets: {why}", GUARD_FIX)
    try:
        compiled = filtercache.load(root, UNIX_GUARD_BIND if host_network else UNIX_GUARD)
    except (ImportError, OSError, RuntimeError, AttributeError) as err:
        raise SandboxUnavailable(
            f"the Unix-socket guard's filter could not be built: {err}", FILTER_FIX) from err
    try:
        return os.pread(compiled.fd, compiled.size, 0)
    finally:
        os.close(compiled.fd)


class Hardening:
    """The session's filter, bounds and groups. Build with :meth:`open` (``boxed``: a
    Linux box's, with the filter, the guard and the box's bounds; else host runs' alone);
    :meth:`close` gives everything back."""

    def __init__(self, limits: Limits, *, boxed: bool, private_tmp: str) -> None:
        self.limits = limits
        self.boxed = boxed
        self.private_tmp = private_tmp
        self.filter: Compiled | None = None
        # The Unix-socket guard's filter (sandbox/linux/warm/unixguard.py), as its BPF bytes.
        self.guard: bytes | None = None
        self.box_group: cgroup.Group | None = None
        self.box_group_why: str | None = None
        self.tmp_why: str | None = "the session has no box"
        self.host_why: str | None = None
        self._subreaper = False
        self._oom = 0
        self._moves: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._mover: threading.Thread | None = None
        self._spawner: cgroup.Spawner | None = None
        self._seats: Seats | None = None
        self._seats_wanted = False

    @classmethod
    def open(cls, limits: Limits, *, boxed: bool, private_tmp: str,
             host_network: bool = False) -> Hardening:
        """The session's hardening: for a box (``boxed``) the filter, the guard's (which
        supervises binds too on the ``host_network``) and the bounds; else the host
        runs' groups only."""
        self = cls(limits, boxed=boxed, private_tmp=private_tmp)
        # Host seats are made at the first host run, not here: a session that runs only
        # in the box (one `harness-sandbox run`) makes no group for host runs.
        self._seats_wanted = Seats.wanted()
        if not boxed:
            # Host runs only: their leftovers come here to be found (reaper.py).
            reaper.acquire()
            self._subreaper = True
            return self
        try:
            # Kept between sessions in the private temp root (sandbox/linux/filtercache.py).
            self.filter = filtercache.load(os.path.dirname(private_tmp))
        except (ImportError, OSError, RuntimeError, AttributeError) as err:
            raise SandboxUnavailable(
                f"the system-call filter could not be built: {err}", FILTER_FIX) from err
        self.guard = _guard_program(os.path.dirname(private_tmp), host_network)
        try:
            self.box_group = cgroup.bounded(limits.processes, limits.memory)
            if self.box_group.version == 1:
                self._spawner = cgroup.Spawner(self.box_group)
        except cgroup.CgroupUnavailable as err:
            self.box_group_why = str(err)
        self.tmp_why = _mount_tmpfs(private_tmp, limits.tmp_size)
        reaper.acquire()
        self._subreaper = True
        # Started now, not on the first run: a thread's start hands the interpreter's
        # lock back and forth, which a run would wait for.
        self._mover = threading.Thread(target=self._work, daemon=True,
                                       name="harness-sandbox-session")
        self._mover.start()
        return self

    def launcher(self) -> Launcher:
        """The launcher of each box per run: the compiled one, built at the first use
        (:mod:`sandbox.linux.initcache`), or the Python one, and why."""
        from sandbox.linux.initcache import load

        return load(os.path.dirname(self.private_tmp))

    def supervise(self, plan: LaunchPlan, runner: Runner, *, box: bool) -> RunResult:
        """Run ``plan`` through ``runner`` (the supervisor, given what to do at the
        start): a run in a Linux box of its own (``box``, said by the box that planned
        it) is bounded, a host run grouped; the plan's descriptors are closed after it,
        and what it orphaned here is reaped."""
        if box and not self.boxed:
            raise ValueError("a box run needs the hardening of a Linux box")
        # A host run is born in a group made ahead when one is ready (hostseat.py).
        seat = None if box else self._take_seat()
        group = None if box else seat.group if seat is not None else self.host_group()
        pids: list[int] = []
        # Born in the box's group when the spawner thread has joined it; else moved.
        spawn: cgroup.Spawn[Any] | None = (
            seat.spawn if seat is not None else self._spawner
            if box and self._spawner and self._spawner.joined.is_set() else None)

        def started(pid: int) -> None:
            pids.append(pid)
            if box:
                self.box_started(pid, moved=spawn is None)
            elif group is not None and seat is None:
                # Too late only if the run already ended: the marker still covers it.
                with contextlib.suppress(OSError):
                    cgroup.adopt(group, pid, stop=True)
        try:
            result = runner(started, spawn)
        finally:
            for fd in plan.run_fds:
                os.close(fd)
            if not box:
                self._host_run_ended(seat, group)
        if not box:
            self.reap()  # and what hides from the marker sweep (sandbox/process/reaper.py)
        elif pids:
            self._later(0)  # off this thread: bwrap's init ends a moment after the run
        return result

    def _host_run_ended(self, seat: Seat | None, group: cgroup.Group | None) -> None:
        """Kill what a host run left in its group, and give its seat back."""
        if seat is not None and cgroup.members(group or seat.group):
            # Leftovers to kill: the seat's thread leaves the group first, so the
            # freezer never stops a thread of ours (it may hold the interpreter).
            seat.spawn.stop()
            seat.spawn.join()
        if group is not None:
            self.host_ended(group, removed=seat is None)
        if seat is not None and self._seats is not None:
            self._seats.give_back(seat)

    def _take_seat(self) -> Seat | None:
        """A ready host seat (sandbox/process/hostseat.py), the seats started at the
        first host run; None until one is ready, or where the machine has none."""
        if self._seats is None and self._seats_wanted:
            self._seats = Seats()
        return None if self._seats is None else self._seats.take()

    def close(self) -> None:
        if self._seats is not None:
            self._seats.close()
            self._seats = None
        if self._spawner is not None:
            self._spawner.stop()
            self._spawner = None
        if self._mover is not None:
            # Not waited for: a move under way waits for the kernel, and concerns a run
            # that is over (its group is removed below once it is empty).
            self._moves.put(None)
            self._mover = None
        if self._subreaper:
            reaper.release(_ours)
            self._subreaper = False
        if self.box_group is not None:
            cgroup.remove(self.box_group)
            self.box_group = None
        if self.boxed and self.tmp_why is None:
            detach(self.private_tmp)
            self.tmp_why = "the session has ended"
        if self.filter is not None:
            os.close(self.filter.fd)
            self.filter = None

    # -- box runs ----------------------------------------------------------------------

    def spawner(self, *, wait: float = 0.0) -> cgroup.Spawner | None:
        """The thread that starts a box's processes inside the box's control group
        (cgroup v1), once it has joined it (waiting up to ``wait`` seconds); None
        where there is none."""
        sp = self._spawner
        return sp if sp is not None and sp.joined.wait(wait) else None

    def seccomp_reader(self) -> int | None:
        return None if self.filter is None else reader(self.filter)

    def box_started(self, pid: int, *, moved: bool = True) -> None:
        """Bound a box run that just started: ``RLIMIT_NPROC`` at once (it counts the
        box's own user namespace only), and into the session's group off this thread.

        Moving a process between groups waits for an RCU grace period in the kernel
        (milliseconds on a busy machine), which would more than double a short run;
        the move follows within that time instead, and the process bound holds from
        the start."""
        n = self.limits.processes
        todo = [pid]
        while todo:
            p = todo.pop()
            with contextlib.suppress(OSError):
                resource.prlimit(p, resource.RLIMIT_NPROC, (n, n))
                todo += cgroup.children(p)
        if self.box_group is not None and moved:
            self._later(pid)

    def _later(self, pid: int) -> None:
        """Hand ``pid`` to the session's worker thread: into the group (a pid), or a
        reaping pass (0)."""
        if self._mover is not None:
            self._moves.put(pid)

    def _work(self) -> None:
        group = self.box_group
        while (pid := self._moves.get()) is not None:
            if pid == 0:
                self.reap()
            elif group is not None and pid in reaper.running:
                # A run already over is not moved: a move waits for the kernel (see
                # box_started), and the session's end would wait for it.
                with contextlib.suppress(OSError):
                    cgroup.adopt(group, pid)

    def reap(self) -> None:
        """Reap what the session's runs orphaned here and has exited."""
        if self._subreaper:
            reaper.reap_orphans(_ours)

    def memory_killed(self, result: RunResult) -> RunResult:
        """``result`` of a box run, said as killed at the memory bound when the bound
        killed it (its init then reports 128+9)."""
        if (self.box_group is not None and result.outcome == "exited"
                and result.returncode == 128 + 9 and self._new_oom_kill()):
            return result._replace(
                outcome="signaled", returncode=None, signal=9,
                error=f"killed at the box's memory bound ({describe(self.limits.memory)})")
        return result

    def _new_oom_kill(self) -> bool:
        """Whether the kernel killed for the memory bound since last asked (read only
        for a run that ended by SIGKILL: a group is new, so it starts at 0)."""
        assert self.box_group is not None
        now = cgroup.oom_kills(self.box_group)
        seen, self._oom = self._oom, now
        return now > seen

    # -- host runs ---------------------------------------------------------------------

    def host_group(self) -> cgroup.Group | None:
        """A group for one host run, or None (then the run marker is the fallback)."""
        if self.host_why is not None:
            return None
        try:
            return cgroup.killable()
        except cgroup.CgroupUnavailable as err:
            self.host_why = str(err)  # asked once: the machine will not change
            return None

    @staticmethod
    def host_ended(group: cgroup.Group, *, removed: bool = True) -> None:
        """Kill whatever is left in the run's group, reap those adopted here, and remove
        it (``removed``; a seat's group is retired by its owner, off this path)."""
        if cgroup.members(group):
            for pid in cgroup.kill(group):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if removed:
            cgroup.remove(group)

    # -- for doctor ----------------------------------------------------------------------

    def bounds(self) -> list[Bound]:
        """Each protection, in force or not, with how or why."""
        lim, out = self.limits, []
        if self.filter is not None:
            out.append(Bound("seccomp", "in force", f"libseccomp filter for "
                             f"{', '.join(self.filter.arches).lower()}"))
        else:
            out.append(Bound("seccomp", "not in force", "", "the session has no box"))
        g, why = self.box_group, self.box_group_why
        how = "" if g is None else ("cgroup v2" if g.version == 2 else
                                    "cgroup v1 pids and memory controllers")
        if g is not None:
            out.append(Bound("processes", "in force", f"{lim.processes} per box "
                             f"(RLIMIT_NPROC) and in all the session's boxes ({how})"))
            out.append(Bound("memory", "in force", f"{describe(lim.memory)}, {how}"))
        elif self.boxed:
            out.append(Bound("processes", "in force",
                             f"{lim.processes} per box, RLIMIT_NPROC (no cgroup: {why})"))
            out.append(Bound("memory", "not in force", "", why))
        size = describe(lim.tmp_size)
        out.append(Bound("tmp", "in force" if self.tmp_why is None else "not in force",
                         f"tmpfs of {size} on the session's folder", self.tmp_why))
        if self.boxed:
            out.append(Bound("shm", "in force", f"tmpfs of {describe(lim.shm_size)}"))
            out.append(Bound("unix_guard", "in force", "each boxed command (a warm run's or "
                             f"a box per run's) started under it by {self.launcher().how}"))
        if self.host_why is None:
            self.host_group_probe()
        out.append(Bound("host_runs", "in force" if self.host_why is None else
                         "not in force", "each host run in a cgroup killed at its end",
                         None if self.host_why is None else
                         f"{self.host_why}; the run marker and process group remain"))
        return out

    def host_group_probe(self) -> None:
        g = self.host_group()
        if g is not None:
            cgroup.remove(g)
