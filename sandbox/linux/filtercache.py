"""The compiled system-call filter, kept between sessions so a session need not build it.

Building the filter costs a session's start about ten milliseconds (importing the
binding and ``ctypes.util``, loading libseccomp, compiling); the program it gives
depends only on the table, the ABIs it covers and the libseccomp and binding that
compiled it. So the program is kept, named by a digest of all four, in the per-user
private temp root (``/tmp/harness-sandbox-<uid>``, mode 0700, refused by every session
when it lies in a folder a box could write; a box sees only its own session's folder in
it). A kept program is used only when it is a regular file (not a link) owned by this
user, of mode 0600, in that root, with the size of a whole BPF program; anything else
is ignored and the filter is built as before, never loaded from an unsure file.

What identifies libseccomp is the file its soname leads to in the usual library
folders (device, inode, size, change time): an upgraded library makes a new name. Where
the library is not found there, nothing is kept.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from sandbox.fs import kept
from sandbox.fs.digest import sha256_hex
from sandbox.linux.seccomp import DENIED, SONAME, Compiled, Denial, arches, compile_filter

# Where a distribution puts libseccomp (Debian's multiarch folders first).
_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
             "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib",
             "/usr/local/lib")
# A BPF instruction is 8 bytes; the kernel takes at most 4096 of them.
_INSN = 8
_MAX = 4096 * _INSN


def _file_id(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_ctime_ns}"


def key(table: Sequence[Denial] = DENIED) -> str | None:
    """The digest that names the program for ``table`` here, or None when libseccomp
    cannot be identified without loading it."""
    library = next((i for d in _LIB_DIRS if (i := _file_id(os.path.join(d, SONAME)))), None)
    if library is None:
        return None
    import importlib.util

    spec = importlib.util.find_spec("pyseccomp")
    binding = _file_id(spec.origin) if spec is not None and spec.origin else None
    if binding is None:
        return None
    text = repr((tuple(table), arches(), os.uname().machine, library, binding))
    return sha256_hex(text.encode())[:32]


def _read_kept(path: str) -> bytes | None:
    """The kept program at ``path``, if it is one this user can trust (see above)."""
    data = kept.read(path, mode=0o600, most=_MAX)
    return None if data is None or len(data) % _INSN else data


def _sealed(data: bytes) -> Compiled:
    """``data`` in a sealed memfd, as :func:`sandbox.linux.seccomp.compile_filter` gives it."""
    from sandbox.libc import sealed

    return Compiled(sealed("harness-sandbox-seccomp", data), len(data), arches())


def file_name(table: Sequence[Denial] = DENIED) -> str | None:
    """The kept program's file name for ``table``: ``filter-TABLE-KEY.bpf``, where TABLE
    names the table alone and KEY (:func:`key`) the rest; None when nothing is kept."""
    name = key(table)
    if name is None:
        return None
    return f"filter-{sha256_hex(repr(tuple(table)).encode())[:8]}-{name}.bpf"


def load(root: str, table: Sequence[Denial] = DENIED) -> Compiled:
    """The filter for ``table``: the program kept in the private temp root ``root`` when
    there is a sound one, else built (and kept for the next session, in place of the
    table's programs built by another libseccomp, binding or machine)."""
    name = file_name(table) if kept.private(root) else None
    if name is None:
        return compile_filter(table)
    path = os.path.join(root, name)
    data = _read_kept(path)
    if data is not None:
        return _sealed(data)
    compiled = compile_filter(table)
    kept.write(path, os.pread(compiled.fd, compiled.size, 0), mode=0o600)
    _forget_others(root, name)
    return compiled


def _forget_others(root: str, name: str) -> None:
    """Remove the same table's other kept programs from ``root``, and those named before
    names held the table (``filter-KEY.bpf``): nothing else would."""
    table = name[:len("filter-") + 9]  # filter-TABLE-
    for other in os.listdir(root):
        if other == name or not (other.startswith("filter-") and other.endswith(".bpf")):
            continue
        old_form = len(other) == len("filter-.bpf") + 32 and "-" not in other[7:]
        if other.startswith(table) or old_form:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, other))
