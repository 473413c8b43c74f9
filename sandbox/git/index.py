"""The gitlinks a git index records, read here: never by git from an index the box wrote.

At a session's end the report lists the repositories the box staged as gitlinks
(:mod:`sandbox.git.report`). The index it reads them from was written by the box; git
reading it would parse the box's bytes with all of git's index code (and its
extensions), so the few fields needed are read here instead: the header, and each
entry's mode and path. Versions 2, 3 and 4 (paths prefix-compressed), SHA-1 and SHA-256
object names (told apart by the checksum at the file's end). A split index (its entries
partly in a shared file) and anything that does not parse cleanly give None: the caller
says it could not look, and never guesses.
"""

from __future__ import annotations

import os
import stat
import struct

_GITLINK = 0o160000
# Far above a large repository's index (tens of MiB), and what a box could make the
# host read into memory at most.
_MAX_INDEX = 256 << 20
# The fixed part of an entry before the object name: ctime, mtime, dev, ino, mode,
# uid, gid, size (ten 32-bit words).
_STAT = 40


def _digest(name: str, data: bytes) -> bytes:
    """SHA-1 or SHA-256 from the interpreter's own modules (hashlib would load OpenSSL)."""
    try:
        if name == "sha1":
            from _sha1 import sha1 as h  # type: ignore[import-not-found]
        else:
            from _sha256 import sha256 as h  # type: ignore[import-not-found]
    except ImportError:
        try:
            from _sha2 import sha256 as h  # type: ignore[import-not-found]
        except ImportError:
            import hashlib

            h = getattr(hashlib, name)
    return bytes(h(data).digest())


def _hash_size(data: bytes) -> int | None:
    """20 or 32: the object names' size, from the checksum that ends the file."""
    for name, size in (("sha1", 20), ("sha256", 32)):
        if len(data) > 12 + size and _digest(name, data[:-size]) == data[-size:]:
            return size
    return None


def gitlinks(index: str, top: str) -> list[str] | None:
    """The paths (under ``top``) that the index file ``index`` records as gitlinks; []
    when there is no index; None when it cannot be read soundly (see above)."""
    try:
        fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return []
    except OSError:
        return None
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(_MAX_INDEX + 1)
    if len(data) > _MAX_INDEX:
        return None
    names = _entries(data)
    if names is None:
        return None
    return [os.path.join(top, os.fsdecode(name)) for name, mode in names if mode == _GITLINK]


def _entries(data: bytes) -> list[tuple[bytes, int]] | None:
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack(">II", data[4:12])
    size = _hash_size(data)
    if version not in (2, 3, 4) or size is None:
        return None
    end = len(data) - size
    pos, prev, out = 12, b"", []
    for _ in range(count):
        start = pos
        if pos + _STAT + size + 2 > end:
            return None
        mode = struct.unpack(">I", data[pos + 24:pos + 28])[0]
        pos += _STAT + size
        flags = struct.unpack(">H", data[pos:pos + 2])[0]
        pos += 2
        if flags & 0x4000:  # extended flags (version 3 and later)
            if version < 3:
                return None
            pos += 2
        named = _name(data, pos, end, entry=start, version=version, prev=prev)
        if named is None:
            return None
        name, pos = named
        out.append((name, mode))
        prev = name
    return None if _split(data, pos, end) else out


def _name(data: bytes, pos: int, end: int, *, entry: int, version: int, prev: bytes
          ) -> tuple[bytes, int] | None:
    """The path of the entry that starts at ``entry``, read from ``pos``, and where the
    next entry starts; None when it does not parse. Version 4 writes how much of the
    previous path (``prev``) to drop, then the rest; the others the whole path,
    NUL-padded to 8 bytes."""
    if version == 4:
        strip, pos = _varint(data, pos, end)
        if strip is None or strip > len(prev):
            return None
        nul = data.find(b"\0", pos, end)
        if nul < 0:
            return None
        return prev[:len(prev) - strip] + data[pos:nul], nul + 1
    nul = data.find(b"\0", pos, end)
    if nul < 0:
        return None
    return data[pos:nul], entry + ((nul + 1 - entry + 7) // 8) * 8


def _varint(data: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """Git's offset encoding (each continuation adds one before shifting)."""
    if pos >= end:
        return None, pos
    c = data[pos]
    pos += 1
    value = c & 0x7F
    while c & 0x80:
        if pos >= end:
            return None, pos
        c = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (c & 0x7F)
    return value, pos


def _split(data: bytes, pos: int, end: int) -> bool:
    """Whether the extensions after the entries hold ``link``: a split index, whose
    other entries are in a shared file (or the extensions do not parse)."""
    while pos + 8 <= end:
        sig, length = data[pos:pos + 4], struct.unpack(">I", data[pos + 4:pos + 8])[0]
        if sig == b"link":
            return True
        pos += 8 + length
    return pos != end
