"""Which box a Linux session gets here, and what it gives up: said, never silent.

- ``namespaces``: the box of docs/linux-box.md, with a fresh ``/proc`` of its own PID
  namespace.
- ``landlock, no namespaces`` (``[sandbox] box = "landlock"``): where namespaces are
  refused; :mod:`.landlockbox`, and what it gives up: :data:`LANDLOCK_GIVES_UP`.
- ``namespaces, the container's /proc``: where a fresh ``/proc`` is refused (a
  container's ``/proc`` has covered parts: Podman, Docker with ``seccomp=unconfined``,
  user-namespaced pods, a masked ``/proc``). The namespaces and mounts are the same; the
  box's ``/proc`` is the container's, bound read-only (with the same covers), and the
  whole box (bwrap and all it starts) is in a Landlock domain of its own
  (:mod:`sandbox.linux.landlock`), so the container's other processes, the harness among
  them, are out of reach: their ``environ``, ``mem`` and descriptors (ptrace-mode
  access), their signals and abstract sockets. Needs Landlock ABI 6 (Linux 6.12).
"""

from __future__ import annotations

from sandbox.box.kind import BOUND_PROC, LANDLOCK, NAMESPACES, BoxKind

__all__ = ["BOUND_PROC", "BOUND_PROC_GIVES_UP", "LANDLOCK", "LANDLOCK_GIVES_UP", "NAMESPACES",
           "BoxKind", "bound_proc_args", "choose", "in_domain"]

LANDLOCK_GIVES_UP = (
    "no namespaces: the box sees the place's processes in /proc (their ids, names and "
    "command lines), though its Landlock domain keeps their environment, memory, "
    "descriptors, signals and abstract sockets out of its reach",
    "git's inputs and other tools' configs in a writable folder are not read-only: "
    "what a run changes there is moved out and put back when the run ends, and a host "
    "program that reads them while a run is going (a host hook beside a boxed command) "
    "sees the change",
    "/tmp is the session's private folder only through TMPDIR: /tmp itself is "
    "unreadable and unwritable, as are /run and /dev but its null, zero, full, random, "
    "urandom and tty (no new terminal can be made: no /dev/ptmx)",
    "Landlock does not govern a file's mode, times or extended attributes: a command can "
    "chmod or touch a file of the user's outside the writable folders (not write it, "
    "nor read a hidden one)",
    "the names in a hidden folder can be listed (not read); a file made after a run "
    "started in a folder on the way to a hidden path cannot be read in that run",
    "no Unix socket can be made (socketpair's stream pairs can), so no local server on "
    "one; with network = true every TCP and UDP address is reachable; no allow-list",
    "the [sandbox] processes and memory bounds are a host run's (a control group where "
    "the place gives one); a lock on a host file the box reads can stall its writer "
    "until the run ends; package caches of tools found by a bind (cargo, pnpm) are the "
    "host's, unwritable",
    "no warm box: each command starts a Python wrapper of its own (about 15 ms)",
)
BOUND_PROC_GIVES_UP = (
    "the box's /proc is the container's: it lists the container's processes (their "
    "ids, names and command lines), though a Landlock domain keeps their environment, "
    "memory, descriptors, signals and abstract sockets out of the box's reach",
    "/proc/PID names a process by the container's ids: /proc/self is right, a shell's "
    "$$ (the box's own id) is not",
    "the box's /proc is read-only: a command cannot write its own /proc/self entries "
    "(oom_score_adj, attr)",
    "no warm box: each command starts a box of its own",
    "bwrap's --disable-userns is not used (it writes a sysctl the container keeps "
    "read-only): the session's system-call filter alone refuses new namespaces",
)


def choose() -> BoxKind:
    """The box this place allows: the container's ``/proc`` where the one here has
    covered parts, Landlock has the scopes the box needs and namespaces can be made
    (no seccomp profile refusing them, no root without the capability its stand-in
    needs); else the full box (refused, where it cannot be built, naming the cause)."""
    import os

    from sandbox.linux import landlock
    from sandbox.linux.causes import covered_proc, no_sys_admin, seccomp_refuses
    from sandbox.linux.standin import needed

    covered = covered_proc()
    if not covered or landlock.abi() < landlock.NEEDED_ABI or seccomp_refuses() or \
            (needed() and no_sys_admin(os.geteuid())):
        return BoxKind()
    return BoxKind(BOUND_PROC, BOUND_PROC_GIVES_UP, covered)


def bound_proc_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """bwrap's options with the fresh ``/proc`` (``--proc /proc``) replaced by the
    container's, bound read-only (its covers come with it; no entry of another process
    that its owner may write, such as ``oom_score_adj``, can be written), and
    without ``--disable-userns`` (which writes ``/proc/sys/user``, read-only here)."""
    for at in range(len(args) - 1):
        if args[at] == "--proc" and args[at + 1] == "/proc":
            rest = tuple(a for a in args[at + 2:] if a != "--disable-userns")
            return (*args[:at], "--ro-bind", "/proc", "/proc", *rest)
    raise ValueError("a box's options mount a fresh /proc")


def in_domain(argv: tuple[str, ...]) -> tuple[str, ...]:
    """bwrap's ``argv`` started in the box's Landlock domain. (Root's stand-in enters
    its namespaces first: nsenter, outside the domain, opens the stage's descriptors
    through ``/proc``, which the domain would refuse it.)"""
    from sandbox.linux import landlock
    from sandbox.linux.sockets import interpreter

    return (interpreter(), "-I", "-S", landlock.HERE, "--", *argv)
