"""The compiled launcher of a box per run (``sandbox/linux/warm/guardinit.c``), which is also
the warm box's starter (``sandbox/linux/warm/warmstart.c``): built once, kept, and handed to
each box as a sealed memfd.

Each boxed command of a box per run is started by a launcher, the box's PID 1, that
arms the Unix-socket guard (:mod:`sandbox.linux.warm.unixguard`). The Python one
(:mod:`sandbox.linux.warm.guarded`) costs each box an interpreter's start; the compiled one
costs it almost nothing, and starts the Python supervisor only at the first call that
needs its judgement (:mod:`sandbox.linux.warm.guardmain`).

The compiled launcher is built at the first session that needs it, by the system's C
compiler: ``cc`` or ``gcc`` in ``/usr/bin`` or ``/bin``, never one found on ``PATH``, run
with an environment of its own (a compiler reads variables that would have it take
other headers, libraries or programs). It is linked statically: no variable of the
box's (``LD_PRELOAD``) then has a dynamic linker load anything into the box's PID 1
(where the C library cannot be linked statically, the Python launcher is used, which
gives those variables to the command alone). It is kept in the per-user private temp
root beside the cached filter (:mod:`sandbox.linux.filtercache`), named by a digest of the
source, the compiler and the static C library it links in (for each, the file it leads
to: device, inode, size, change time) and the machine: an update of the C library (its
fixes are in the launcher's own code) builds it again. A kept launcher is used only when
it is a regular file (not a link) owned by this user, of mode 0700, with one link, in
that root; anything else is built again over it, never executed. A new build removes
the builds kept under other names (each session reads its launcher once, at its first
box; one whose file went builds it again).

Each box gets it as a sealed memfd (no write, shrink or grow, and no new seal), which
bwrap executes as ``/proc/self/fd/N``: the box cannot see the private temp root, and
what it runs cannot be changed after the check. The launcher closes that descriptor
before the command starts.

Where there is no compiler, the build fails or this kernel will not execute a memfd,
each box is started by the Python launcher instead: the same guard, slower.
:func:`load` says which launcher, and why (``harness-sandbox doctor`` reports it).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading

from pathguard.records import NamedTuple
from sandbox.fs import kept
from sandbox.fs.digest import sha256_hex

_WARM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm")
# One program: the box per run's launcher, and the warm box's starter (``warm``).
SOURCES = tuple(os.path.join(_WARM, n) for n in ("guardinit.c", "guardcore.c",
                                                  "warmstart.c", "guard.h"))
# Where a system keeps its compiler: never one found on PATH.
COMPILERS = tuple(os.path.join(d, n) for d in ("/usr/bin", "/bin") for n in ("cc", "gcc"))
# Static: no dynamic linker in PID 1 (see above).
# Hardened as a distribution builds its daemons: bounds-checked libc calls, a stack
# guard, and the warnings that catch format, shadowing and narrowing mistakes.
FLAGS = ("-O2", "-Wall", "-Wextra", "-Wformat=2", "-Wshadow", "-Wconversion",
         "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong", "-s", "-static")
# The compiler's own environment: nothing of the session's (its temporary files go in
# the build's own folder).
_BUILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
_MAX = 16 << 20
MFD_EXEC = 0x10  # linux/memfd.h, Linux 6.3: an executable memfd, asked for as one


class Launcher(NamedTuple):
    """The compiled launcher's bytes, or None where the Python launcher is used; and
    which it is, and why, in words."""

    program: bytes | None
    how: str


def compiler() -> str | None:
    """The system's C compiler, or None."""
    return next((c for c in COMPILERS if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def static_libc() -> str | None:
    """The static C library the compiler links in, where a Debian or Fedora system
    keeps it (asking the compiler would cost a process on every box's path)."""
    arch = getattr(sys.implementation, "_multiarch", "")
    for d in ((f"/usr/lib/{arch}",) if arch else ()) + ("/usr/lib64", "/usr/lib"):
        path = os.path.join(d, "libc.a")
        if os.path.isfile(path):
            return path
    return None


def _identity(path: str) -> tuple[object, ...]:
    """What says that the file ``path`` leads to changed."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)


def key(source: bytes, cc: str, libc: str | None = None) -> str | None:
    """The digest that names the launcher built from ``source`` by ``cc`` against the
    static C library ``libc`` here."""
    try:
        made_by = (_identity(cc), _identity(libc) if libc is not None else None)
    except OSError:
        return None
    text = repr((sha256_hex(source), made_by, os.uname().machine, FLAGS))
    return sha256_hex(text.encode())[:32]


def read_kept(path: str) -> bytes | None:
    """The kept launcher at ``path``, if it is one this user can trust (see above)."""
    data = kept.read(path, mode=0o700, most=_MAX)
    return data if data is not None and data.startswith(b"\x7fELF") else None


def build(cc: str, root: str, path: str) -> str | None:
    """Build the launcher into ``path`` (in a folder of its own first, then moved, so a
    reader sees a whole file or none); None, or why it could not be built."""
    import shutil  # not for every session: tempfile imports shutil, random and weakref
    import subprocess
    import tempfile

    try:
        work = tempfile.mkdtemp(prefix="build-", dir=root)
    except OSError as err:
        return f"no folder to build it in: {err.strerror}"
    out = os.path.join(work, "guardinit")
    try:
        try:
            r = subprocess.run([cc, *FLAGS, "-o", out,
                                *(p for p in SOURCES if p.endswith(".c"))], cwd=work,
                               env={**_BUILD_ENV, "TMPDIR": work},
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                               check=False)
        except (OSError, subprocess.SubprocessError) as err:
            return f"{cc} could not run: {err}"
        if r.returncode != 0:
            lines = r.stderr.decode(errors="replace").strip().splitlines()
            return f"{cc} failed: {lines[-1] if lines else f'exit status {r.returncode}'}"
        try:
            os.chmod(out, 0o700)
            os.replace(out, path)
        except OSError as err:
            return f"it could not be kept: {err.strerror}"
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _remove_others(root: str, path: str) -> None:
    """Remove the launchers kept in ``root`` under another name than ``path`` (built
    by another compiler or C library, or from another source): this user's files,
    never through a link."""
    keep = os.path.basename(path)
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name.startswith("guardinit-") and name != keep:
            other = os.path.join(root, name)
            try:
                st = os.lstat(other)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                    os.unlink(other)
            except OSError:
                continue


def memfd() -> int:
    """An empty memfd that may be executed and sealed. Raises OSError (EACCES where the
    kernel executes no memfd: ``vm.memfd_noexec = 2``)."""
    try:
        return os.memfd_create("harness-sandbox-launcher",
                               os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING | MFD_EXEC)
    except OSError as err:
        if err.errno != errno.EINVAL:  # before Linux 6.3 every memfd may be executed
            raise
    return os.memfd_create("harness-sandbox-launcher", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


def sealed(program: bytes) -> int:
    """``program`` in a sealed memfd (see above): its descriptor."""
    from sandbox.libc import filled

    return filled(memfd(), program)


def _sources() -> bytes:
    """Every source file's name and bytes, for the key. Raises OSError."""
    out = []
    for path in SOURCES:
        with open(path, "rb") as f:
            out.append(os.fsencode(os.path.basename(path)) + b"\0" + f.read())
    return b"\0".join(out)


def _made(root: str) -> Launcher:
    cc = compiler()
    if cc is None:
        return Launcher(None, "the Python launcher: no C compiler (cc or gcc in /usr/bin "
                        "or /bin)")
    try:
        os.close(memfd())
    except OSError as err:
        return Launcher(None, "the Python launcher: this kernel executes no memfd "
                        f"({err.strerror})")
    try:
        name = key(_sources(), cc, static_libc())
    except OSError as err:
        return Launcher(None, f"the Python launcher: no source to build the compiled one "
                        f"from ({err.strerror})")
    if name is None or not kept.private(root):
        return Launcher(None, "the Python launcher: no private folder to keep the "
                        "compiled one in")
    path = os.path.join(root, f"guardinit-{name}")
    program = read_kept(path)
    if program is None:
        why = build(cc, root, path)
        if why is not None:
            return Launcher(None, f"the Python launcher: the compiled one could not be "
                            f"built ({why})")
        _remove_others(root, path)
        program = read_kept(path)
    if program is None:
        return Launcher(None, "the Python launcher: the compiled one was not as built")
    return Launcher(program, f"the compiled launcher, built by {os.path.realpath(cc)}")


_loaded: dict[str, Launcher] = {}
_lock = threading.Lock()


def load(root: str) -> Launcher:
    """The launcher of this process's boxes, for the private temp root ``root``: found
    or built once per process."""
    with _lock:
        got = _loaded.get(root)
        if got is None:
            got = _loaded[root] = _made(root)
        return got


def forget() -> None:
    """Forget what :func:`load` found (the next session looks again)."""
    with _lock:
        _loaded.clear()
