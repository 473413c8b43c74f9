"""The user's temp folder on macOS, which the box writes: asked of the system, never
taken from ``TMPDIR``.

It comes from ``confstr(_CS_DARWIN_USER_TEMP_DIR)``: with ``TMPDIR`` unset (ssh
sessions, launchd jobs) a fallback would make all of ``/private/tmp`` writable, and a
``TMPDIR`` of ``$HOME`` the home folder. The answer must be the per-user
``/private/var/folders/<xx>/<id>/T`` folder, a real folder owned by the user and
writable by no one else; anything else refuses the session. Importable on any
platform; the ctypes call is made only when a macOS session asks.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat
from collections.abc import Mapping

from sandbox.errors import UserTempUnusable
from sandbox.platform import MACOS

# <unistd.h> on macOS: the per-user temp folder launchd makes for each user.
CS_DARWIN_USER_TEMP_DIR = 65537
USER_FOLDERS = "/private/var/folders"
# /private/var/folders/<two characters>/<an opaque id>/T: what macOS gives every user.
_USER_TEMP_FORM = r"(?P<folders>/.*)/[^/]{2}/[^/]+/T"  # compiled at its first use (macOS)
_NO_WIDENING = "the box uses neither TMPDIR nor /tmp instead"


def confstr(name: int) -> str | None:
    """The C library's ``confstr(name)`` through ctypes; None when it has no value."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.confstr
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_size_t
    size = fn(name, None, 0)
    if size == 0:
        return None
    buf = ctypes.create_string_buffer(size)
    if fn(name, buf, size) == 0:
        return None
    return os.fsdecode(buf.value)


def check_user_temp_dir(path: str, *, uid: int, folders: str = USER_FOLDERS) -> str:
    """``path`` as the canonical user temp folder, or :class:`UserTempUnusable` saying why not.

    Accepted: ``<folders>/<xx>/<id>/T`` once ``/var`` is spelled ``/private/var`` (the
    link macOS ships), with no other link on the way, a folder owned by ``uid`` that
    neither its group nor others may write. ``folders`` is a parameter so the rule can
    be exercised on real folders anywhere.
    """
    given = path
    p = os.path.normpath(path)
    if p == "/var" or p.startswith("/var/"):
        p = "/private" + p
    m = re.fullmatch(_USER_TEMP_FORM, p)
    if m is None or m.group("folders") != folders:
        raise UserTempUnusable(
            f"the user temp folder {given} is not a per-user folder of the form "
            f"{folders}/…/T; {_NO_WIDENING}")
    if os.path.realpath(p) != p:
        raise UserTempUnusable(
            f"the user temp folder {given} leads through a link (to "
            f"{os.path.realpath(p)}); {_NO_WIDENING}")
    try:
        st = os.lstat(p)
    except OSError as err:
        raise UserTempUnusable(f"the user temp folder {given} cannot be used: "
                          f"{err.strerror}; {_NO_WIDENING}") from err
    if not stat.S_ISDIR(st.st_mode):
        raise UserTempUnusable(f"the user temp folder {given} is not a folder; {_NO_WIDENING}")
    if st.st_uid != uid:
        raise UserTempUnusable(
            f"the user temp folder {given} belongs to uid {st.st_uid}, not to you "
            f"(uid {uid}); {_NO_WIDENING}")
    if st.st_mode & 0o022:
        raise UserTempUnusable(
            f"the user temp folder {given} has mode {stat.S_IMODE(st.st_mode):04o}, "
            f"writable by others; {_NO_WIDENING}")
    return p


def user_temp_dir() -> str:
    """The user temp folder macOS gives this user, checked (see the module's docstring)."""
    found = confstr(CS_DARWIN_USER_TEMP_DIR)
    if not found:
        raise UserTempUnusable(
            "macOS gave no user temp folder (confstr _CS_DARWIN_USER_TEMP_DIR); "
            + _NO_WIDENING)
    return check_user_temp_dir(found, uid=os.getuid())


def session_user_tmp(env: Mapping[str, str], *, platform: str, boxed: bool,
                     fallback: str) -> str:
    """The policy's user temp folder: asked of macOS for a sandboxed session on a Mac;
    elsewhere (no sandbox, or a macOS plan built on another system) ``TMPDIR`` or
    ``fallback``, as the guard's rules for the system temp folders expect."""
    if platform == "darwin" and boxed and MACOS:
        return user_temp_dir()
    return env.get("TMPDIR") or fallback
