"""Say why: a boxed command that failed on something the box refused gets one short line
a harness can show beside its output (:attr:`~sandbox.plan.RunResult.hint`), as
``refused`` names what the network allow-list turned away.

Read from the command's own error output, the last lines first: a write the kernel
answered with "Read-only file system" (``EROFS``) on a path the toolkit keeps
read-only (what host tools read to decide what to run), on a host package cache (the
box has its own, :mod:`sandbox.policy.caches`) or elsewhere outside the folders the box
writes; a "Permission denied" on a hidden path, or a "No such file or directory" below
a hidden folder (the box sees it empty); a connection refused where the box has no
network (its loopback is its own); an address the allow-list refused. A guess from
text, never a verdict: nothing is said when no line names such a path.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.plan import RunResult
    from sandbox.policy import Policy

# Only the end of the output is read: that is where a failing program says why.
TAIL = 16 * 1024
# A name bound read-only cannot be replaced either: git's "could not lock config file
# .git/config: Device or resource busy" (it writes a copy and renames it over).
_READ_ONLY = re.compile(r"read-only file system|\bEROFS\b|resource busy", re.IGNORECASE)
_DENIED = re.compile(r"permission denied|\bEACCES\b", re.IGNORECASE)
_MISSING = re.compile(r"no such file or directory|\bENOENT\b", re.IGNORECASE)
_NO_ROUTE = re.compile(r"connection refused|network is unreachable|\bECONNREFUSED\b|"
                       r"\bENETUNREACH\b", re.IGNORECASE)
NO_NETWORK = ("the box has no network ([sandbox] network = false): its loopback is its own, "
              "so a server on the host's 127.0.0.1 is not there either; write network = "
              "true, or a list of the hosts it may reach (docs/network.md)")
# A path as programs print it: quoted, or a word that starts at / (npm's "path /x").
# A relative one as a shell or git prints it, just before the error ("x/y: Read-only").
_PATHS = re.compile(r"'(/[^']+)'|\"(/[^\"]+)\"|(?:^|\s)(/[^\s:'\",]+)"
                    r"|(?:^|\s)([^\s:'\"]+): (?:Read-only|Device or resource busy)"
                    r"|'([^'/\s][^']*)': (?:Read-only|Device or resource busy)")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _paths(line: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _PATHS.finditer(line)]


def _host_cache(path: str, policy: Policy) -> str:
    """Why ``path``, in a host package cache, is read-only; "" when it is in none."""
    from sandbox.policy.caches import TABLE, box_variables

    home = os.path.realpath(policy.home or os.path.expanduser("~"))
    mine = box_variables(policy)
    for row in TABLE:
        host = os.path.join(home, row.host[2:])
        if _under(path, host):
            where = f"; the box's own is {row.variable}={mine[row.variable]}" \
                if row.variable in mine else ""
            return (f"{path} is in the host's {row.tool} cache, read-only in the box so "
                    f"that nothing the box puts there runs on the host{where}")
    return ""


def _read_only(path: str, policy: Policy) -> str:
    """Why a write to ``path`` was refused, or "" when the box writes there."""
    from sandbox.policy.caches import box_roots

    for p in policy.protected_paths():
        if _under(path, p):
            return (f"{path} is read-only in the box: a tool on the host reads it to "
                    "decide what to run (docs/linux-box.md)")
    cache = _host_cache(path, policy)
    if cache:
        return cache
    if any(_under(path, r) for r in (*box_roots(policy), "/tmp", "/dev/shm")):
        return ""
    return (f"{path} is outside the folders the box writes (the project, /tmp, "
            "[sandbox] writable); to write there, add its folder to [sandbox] writable")


def _hidden(path: str, policy: Policy) -> str:
    for h in policy.hidden:
        if _under(path, os.path.realpath(h)) or _under(path, h):
            return f"{path} is hidden from the box ([sandbox] hidden and its defaults)"
    return ""


def why(stderr: bytes, policy: Policy) -> str:
    """The hint for a failed command's error output, or ""."""
    text = stderr[-TAIL:].decode("utf-8", "replace")
    offline = not policy.network and policy.network_allow is None
    for line in reversed(text.splitlines()):
        if offline and _NO_ROUTE.search(line):
            return NO_NETWORK
        read_only, denied = _READ_ONLY.search(line), _DENIED.search(line)
        if not (read_only or denied or _MISSING.search(line)):
            continue
        for raw in _paths(line):
            path = os.path.normpath(os.path.join(policy.project, raw))
            said = _read_only(path, policy) if read_only else _hidden(path, policy)
            if not said and denied and policy.box == "landlock":
                said = _read_only(path, policy)  # Landlock refuses a write with EACCES
            if said:
                return said
    return ""


def with_hint(result: RunResult, policy: Policy) -> RunResult:
    """``result`` with its hint, when the command failed (any status but 0)."""
    if result.ok:
        return result
    hint = why(result.stderr, policy)
    if not hint and result.refused:
        host, port, reason = result.refused[0]
        hint = (f"the box was refused {host} (port {port}): {reason}; "
                "see docs/network.md")
    return result._replace(hint=hint) if hint else result
