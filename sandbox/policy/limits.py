"""The box's bounds: how many processes, how much memory, how big /tmp and /dev/shm.

The ``[sandbox]`` keys ``processes``, ``memory``, ``tmp_size`` and ``shm_size`` name
them; sizes are whole bytes or a number with K, M, G or T (powers of 1024), or a
percentage of the machine's memory. :func:`resolve` turns them into bytes once per
session, as its policy's ``limits``. How each bound is enforced depends on the machine
(see :mod:`sandbox.process.cgroup` and :class:`Bound`); where one cannot be, the session says so
and ``doctor`` reports it.

The defaults are chosen so that a normal build never meets them: 4,096 processes, half
the machine's memory, and a quarter of it for each of /tmp and /dev/shm (tmpfs pages
count against the memory bound too, so together they cannot take more than it).
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pathguard.records import NamedTuple
from sandbox.settings import SandboxSettings

# The table's own defaults (sandbox/settings.py), named here for the messages.
_DEFAULTS = SandboxSettings._field_defaults
DEFAULT_PROCESSES: int = _DEFAULTS["processes"]
DEFAULT_MEMORY: str = _DEFAULTS["memory"]
DEFAULT_TMP_SIZE: str = _DEFAULTS["tmp_size"]
DEFAULT_SHM_SIZE: str = _DEFAULTS["shm_size"]
MAX_PROCESSES = 1 << 22

_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(?:i?B)?|(\d{1,3})%", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# Below this a box cannot start a shell: refused as a typo rather than obeyed.
MIN_SIZE = 1 << 20


def physical_memory() -> int:
    """The machine's memory in bytes."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def size_error(value: object) -> str | None:
    """Why ``value`` is not a size ``[sandbox]`` accepts, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return "must be a size such as 512M, 8G or 50% (of the machine's memory)"
    if isinstance(value, str) and not _SIZE.fullmatch(value.strip()):
        return (f'"{value}" is not a size; write bytes, or a number with K, M, G or T, '
                "or a percentage of the machine's memory such as 50%")
    try:
        n = to_bytes(value)
    except ValueError as err:
        return str(err)
    if n < MIN_SIZE:
        return f"{value} is below 1M, too small for any command"
    return None


def to_bytes(value: int | str, memory: int | None = None) -> int:
    """A size as bytes (a percentage of ``memory``, default the machine's)."""
    if isinstance(value, int):
        return value
    m = _SIZE.fullmatch(value.strip())
    if m is None:
        raise ValueError(f'"{value}" is not a size')
    if m.group(3) is not None:
        pct = int(m.group(3))
        if not 1 <= pct <= 100:
            raise ValueError(f"{value} is not a percentage from 1% to 100%")
        return (physical_memory() if memory is None else memory) * pct // 100
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


class Limits(NamedTuple):
    """The session's bounds, in processes and bytes."""

    processes: int = DEFAULT_PROCESSES
    memory: int = 0
    tmp_size: int = 0
    shm_size: int = 0


def resolve(processes: int, memory: int | str, tmp_size: int | str,
            shm_size: int | str) -> Limits:
    """The bounds of a ``[sandbox]`` table, in bytes, against this machine's memory."""
    total = physical_memory()
    return Limits(processes, to_bytes(memory, total), to_bytes(tmp_size, total),
                  to_bytes(shm_size, total))


State = Literal["in force", "not in force"]


class Bound(NamedTuple):
    """One protection as this machine gives it: ``how`` it is enforced, or ``why`` not."""

    name: str
    state: State
    how: str
    why: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "in_force": self.state == "in force", "how": self.how,
                "why": self.why}


def describe(size: int) -> str:
    """``size`` bytes for people: whole T or G, else G with one decimal from 1G up, else
    MiB."""
    for unit, factor in (("T", 1 << 40), ("G", 1 << 30)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f}G"
    return f"{size / (1 << 20):.0f}M"
