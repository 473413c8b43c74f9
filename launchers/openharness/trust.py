"""Trust by content for project files that name programs (openHarness ``.oh/config.yaml``).

The agent writes the project, so a file there that says what runs on the host is only
as good as the last person who wrote it. As ``direnv allow`` and ``mise trust`` do, the
user reviews the file once and its SHA-256 is recorded with its path; from then on the
file runs only while its bytes are exactly those. A new file, or one byte changed, and
nothing in it runs until it is trusted again.

The store is ``$XDG_DATA_HOME/harness/trusted.json`` (else
``~/.local/share/harness/trusted.json``): outside every folder the box can write, mode
600, replaced atomically under a lock. A store that cannot be trusted itself (not valid,
another user's, writable by others, a link, inside a folder the box can write) is
refused with a one-line error naming it: never read as empty, never as trusting.

The file is read once (:func:`read_file`): the digest is of those bytes and the hooks
are parsed from those bytes, so a change between the check and the run cannot slip in.
Its path is the real path of what was opened (through the open descriptor), and
neither the file nor its folder may be a link, so one project's ``.oh/config.yaml``
cannot pass for a file trusted in another.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Literal

from launchers.errors import OhConfigError
from launchers.openharness.config import OhConfig, parse
from pathguard.records import NamedTuple
from sandbox.platform import LINUX, MACOS

if TYPE_CHECKING:
    from pathguard.argv import Refusal
    from sandbox.policy import Policy

STORE_VERSION = 1
STORE_NAME = "trusted.json"
# A config file larger than this is refused before it is hashed or parsed.
FILE_CAP = 1 << 20
# The store holds one short entry per trusted file; past this it is not ours.
STORE_CAP = 4 << 20

State = Literal["new", "changed"]


class TrustStoreError(OhConfigError):
    """The trust store cannot be used. ``file`` is the store; nothing is trusted."""


class Untrusted(OhConfigError):
    """The file's content is not trusted at its path. ``state``: "new" (never trusted
    here) or "changed" (trusted with other content)."""

    def __init__(self, file: str, state: State) -> None:
        self.state = state
        self.path = file
        command = f"harness-sandbox trust --openharness {quote(file)}"
        if state == "new":
            text = ("not trusted: it is new (never trusted at this path), so none of its "
                    f"hooks run. Review them, then trust the file: {command}")
        else:
            text = ("not trusted: it changed since it was trusted, so none of its hooks "
                    f"run. Review them, then trust the file again: {command}")
        super().__init__(shown(file), text)


def shown(text: str) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\n``,
    ``\\u202e``), so that a name or command chosen by the agent reaches a terminal as
    plain characters and cannot hide what follows it."""
    import unicodedata

    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"):
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def quote(path: str) -> str:
    import shlex

    return shlex.quote(shown(path))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def untrusted_refusal(err: Untrusted) -> Refusal:
    """The refusal ``audit`` reports for an untrusted file (``kind: "untrusted"``)."""
    from pathguard.argv import Refusal

    return Refusal(os.path.abspath(err.path), str(err), "untrusted")


# -- the file under review -----------------------------------------------------------


class FileRead(NamedTuple):
    """One read of a file: its bytes, their SHA-256, and the real path of what was
    opened."""

    data: bytes
    sha256: str
    real: str


def _fd_path(fd: int, fallback: str) -> str:
    """The path the kernel has for an open descriptor (what was actually opened)."""
    if LINUX:
        return os.readlink(f"/proc/self/fd/{fd}")
    if MACOS:
        buf = fcntl.fcntl(fd, 50, b"\0" * 1024)  # F_GETPATH
        return buf.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    return os.path.realpath(fallback)


LINKED = ("is {what} a symbolic link ({link}), which the agent could re-point, so it is "
          "refused. Name the file it leads to instead.")


def _open_config(path: str) -> int:
    """Open ``path`` for reading, following no link in its last two components (the
    file and its folder, ``.oh``): a link there could make one project's file pass for
    a file trusted in another. Raises :class:`OhConfigError` naming it."""
    folder, name = os.path.split(os.path.abspath(path))
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(folder, dir_flags)
    except OSError as err:
        if os.path.islink(folder):
            raise OhConfigError(shown(path), LINKED.format(what="in a folder that is",
                                                           link=shown(folder))) from err
        raise OhConfigError(shown(path), f"cannot read: {err.strerror or err}") from err
    # Without blocking: a FIFO put in its place would hang the host.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OhConfigError(shown(path), LINKED.format(what="itself",
                                                           link=shown(path))) from err
        raise OhConfigError(shown(path), f"cannot read: {err.strerror or err}") from err
    finally:
        os.close(dir_fd)


def _read_capped(fd: int, path: str) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OhConfigError(shown(path), "is not a regular file")
    chunks = []
    size = 0
    while size <= FILE_CAP:
        chunk = os.read(fd, FILE_CAP + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > FILE_CAP:
        raise OhConfigError(shown(path), f"is larger than {FILE_CAP} bytes")
    return b"".join(chunks)


def read_file(path: str) -> FileRead:
    """Read ``path`` once: only a regular file of at most :data:`FILE_CAP` bytes, not
    through a link (see :func:`_open_config`). Raises :class:`OhConfigError` naming it.
    """
    fd = _open_config(path)
    try:
        data = _read_capped(fd, path)
        real = _fd_path(fd, path)
    except OSError as err:
        raise OhConfigError(shown(path), f"cannot read: {err.strerror or err}") from err
    finally:
        os.close(fd)
    return FileRead(data, digest(data), real)


def parse_bytes(data: bytes, path: str) -> OhConfig:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise OhConfigError(shown(path), "is not UTF-8 text") from err
    return parse(text, path)


# -- the store -------------------------------------------------------------------------


def store_path(env: Mapping[str, str] | None = None) -> str:
    """Where the store is: ``$XDG_DATA_HOME/harness/trusted.json``, else
    ``~/.local/share/harness/trusted.json`` (a relative XDG_DATA_HOME is ignored, as
    the XDG specification says)."""
    env = os.environ if env is None else env
    data_home = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        home = env.get("HOME") or os.path.expanduser("~")
        data_home = os.path.join(home, ".local", "share")
    return os.path.join(data_home, "harness", STORE_NAME)


def _refuse_stat(what: str, st: os.stat_result, path: str, store: str, mode: int) -> None:
    """Refuse ``what`` (the store or its folder) unless it is ours and only we write it."""
    me = os.geteuid()
    if st.st_uid != me:
        raise TrustStoreError(shown(store), f"{what} is owned by uid {st.st_uid}, not by "
                              f"you (uid {me}), so it is refused and nothing is trusted.")
    if st.st_mode & 0o022:
        raise TrustStoreError(
            shown(store),
            f"{what} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}), "
            f"so it is refused and nothing is trusted. Fix it: chmod {mode:o} {quote(path)}")


def _open_folder(store: str, *, create: bool) -> int | None:
    """A descriptor of the store's folder, checked; None when it does not exist."""
    folder = os.path.dirname(store)
    if create:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise TrustStoreError(shown(store), f"its folder cannot be opened: "
                              f"{err.strerror or err}, so nothing is trusted.") from err
    try:
        _refuse_stat("its folder", os.fstat(fd), folder, store, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _corrupt(store: str, why: str) -> TrustStoreError:
    return TrustStoreError(shown(store), f"the trust store is corrupt ({why}), so nothing "
                           "is trusted. Remove it and trust your files again.")


def _read_store(dir_fd: int, store: str) -> dict[str, str]:
    """The store's entries (real path -> SHA-256); empty when there is no store."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(STORE_NAME, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return {}
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise TrustStoreError(shown(store), "the trust store is a symbolic link, so "
                                  "it is refused and nothing is trusted.") from err
        raise TrustStoreError(shown(store), f"the trust store cannot be read: "
                              f"{err.strerror or err}, so nothing is trusted.") from err
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _corrupt(store, "not a regular file")
        _refuse_stat("the trust store", st, store, store, 0o600)
        if st.st_nlink != 1:
            raise TrustStoreError(shown(store), f"the trust store has {st.st_nlink} hard "
                                  "links, so it is refused and nothing is trusted.")
        raw = f.read(STORE_CAP + 1)
    if len(raw) > STORE_CAP:
        raise _corrupt(store, f"larger than {STORE_CAP} bytes")
    return _entries(raw, store)


def _entries(raw: bytes, store: str) -> dict[str, str]:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise _corrupt(store, "not valid JSON") from err
    if not isinstance(doc, dict) or doc.get("version") != STORE_VERSION:
        raise _corrupt(store, f"not a version {STORE_VERSION} trust store")
    files = doc.get("files")
    if not isinstance(files, dict):
        raise _corrupt(store, 'no "files" mapping')
    out: dict[str, str] = {}
    for path, entry in files.items():
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        if (not os.path.isabs(path) or not isinstance(sha, str) or len(sha) != 64
                or any(c not in "0123456789abcdef" for c in sha)):
            raise _corrupt(store, f"a bad entry for {shown(path)}")
        out[path] = sha
    return out


def refuse_store_in_box(policy: Policy | None, store: str | None = None) -> None:
    """Refuse a store the box could write (the agent could trust files itself).
    Raises :class:`TrustStoreError`."""
    if policy is None:
        return
    store = os.path.abspath(store or store_path())
    verdict = policy.guard(boxed=False).check(store, "/", check_hidden=False)
    if verdict.ok:
        return
    zone = verdict.zone
    if zone is None:
        raise TrustStoreError(shown(store), f"the trust store cannot be checked: "
                              f"{verdict.reason}, so nothing is trusted.")
    where = zone.label if zone.kind == "project" else f"{zone.label} ({shown(zone.path)})"
    raise TrustStoreError(shown(store), f"the trust store is in {where}, so the agent "
                          "could change it and nothing is trusted. Set XDG_DATA_HOME "
                          "to a folder outside it.")


class TrustStore(NamedTuple):
    """The store as read once: real path -> SHA-256."""

    path: str
    entries: Mapping[str, str]

    @classmethod
    def open(cls, path: str | None = None, *, policy: Policy | None = None) -> TrustStore:
        """Read and check the store. Raises :class:`TrustStoreError`.

        ``policy``: the session's, so that a store inside a folder the box can write
        is refused; a harness passes its session's policy."""
        store = os.path.abspath(path or store_path())
        refuse_store_in_box(policy, store)
        fd = _open_folder(store, create=False)
        if fd is None:
            return cls(store, {})
        try:
            return cls(store, _read_store(fd, store))
        finally:
            os.close(fd)

    def state(self, read: FileRead) -> State | None:
        """None when ``read`` is trusted; else why not."""
        known = self.entries.get(read.real)
        if known is None:
            return "new"
        return None if known == read.sha256 else "changed"


@contextlib.contextmanager
def _locked_folder(store: str, policy: Policy | None) -> Iterator[int]:
    refuse_store_in_box(policy, store)
    fd = _open_folder(store, create=True)
    assert fd is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _write_store(dir_fd: int, store: str, entries: Mapping[str, str]) -> None:
    """Replace the store atomically: a private temporary file, synced, renamed."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {"version": STORE_VERSION,
           "files": {p: {"sha256": s, "trusted_at": at} for p, s in sorted(entries.items())}}
    data = (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    tmp = f".{STORE_NAME}.{os.getpid()}.{time.monotonic_ns()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(tmp, STORE_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)


def record(read: FileRead, *, path: str | None = None, policy: Policy | None = None) -> str:
    """Trust ``read``'s bytes at its real path. Returns the store's path."""
    store = os.path.abspath(path or store_path())
    with _locked_folder(store, policy) as fd:
        entries = _read_store(fd, store)
        entries[read.real] = read.sha256
        _write_store(fd, store, entries)
    return store


def revoke(real: str, *, path: str | None = None, policy: Policy | None = None) -> bool:
    """Forget the file at ``real``. Returns whether it was trusted."""
    store = os.path.abspath(path or store_path())
    with _locked_folder(store, policy) as fd:
        entries = _read_store(fd, store)
        if entries.pop(real, None) is None:
            return False
        _write_store(fd, store, entries)
    return True


def load_trusted(path: str, *, policy: Policy | None = None,
                 store: str | None = None) -> OhConfig:
    """Read ``path`` once, check its bytes against the store, and parse those bytes.

    Raises :class:`Untrusted`, :class:`TrustStoreError` or :class:`OhConfigError`.
    """
    read = read_file(path)
    state = TrustStore.open(store, policy=policy).state(read)
    if state is not None:
        raise Untrusted(path, state)
    return parse_bytes(read.data, path)


def load(path: str, *, policy: Policy | None = None) -> OhConfig:
    """Read ``path`` once, refuse it unless those bytes are trusted at its path, and
    check them (see this module; ``policy``: the session's, so that a trust
    store the box could write is refused). Raises :class:`OhConfigError`, including
    ``trust.Untrusted`` and ``trust.TrustStoreError``."""
    return load_trusted(path, policy=policy)
