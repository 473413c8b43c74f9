"""For ``doctor``: which of the box's protections are in force on this machine, and why
not where one is not. A real session is opened and a real box asked, so nothing here
is inferred from what should work."""

from __future__ import annotations

import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

from sandbox.errors import SandboxError
from sandbox.policy.limits import Bound

if TYPE_CHECKING:
    from sandbox.settings import SandboxSettings

# What the kernel says of a process under a filter (Documentation/filesystems/proc.rst).
_FILTERED = "Seccomp:\t2"
_ASK = "print(open('/proc/self/status').read())"


def hardening(settings: SandboxSettings | None = None) -> list[Bound]:
    """The filter and each bound, as a box of this session would have them."""
    from sandbox.session import Session

    base = tempfile.mkdtemp(prefix="hs-doctor-", dir="/var/tmp")
    try:
        with Session.open(base, settings) as session:
            h = session.hardening
            assert h is not None
            out = h.bounds()
            r = session.run([sys.executable, "-I", "-c", _ASK], timeout=30)
            status = r.stdout.decode(errors="replace")
            if not (r.ok and _FILTERED in status.splitlines()):
                out[0] = Bound("seccomp", "not in force", "",
                               f"a box did not report a filter ({r.outcome}, "
                               f"{r.returncode})")
            return out
    except SandboxError as err:
        return [Bound("seccomp", "not in force", "", str(err))]
    finally:
        shutil.rmtree(base, ignore_errors=True)
