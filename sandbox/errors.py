"""The errors of the sandbox package, named by state, in one place. A leaf: imports
nothing of ours. (What runs inside the box cannot import the package: the guard's
answer to one call, ``CallRefused``, is its own, in ``sandbox/linux/warm/guardparts.py``; the
proxy's refusal of one request, ``RequestRefused``, never leaves the proxy.)"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of every error this package raises on purpose."""


class PolicyError(SandboxError):
    """The session's policy cannot be built: a path the user named is unusable."""


class GitLayoutError(PolicyError):
    """What host git reads cannot be protected as it is (a link on the way to it, a
    config git cannot read): the session must not start. Not about ``[sandbox]``."""


class UserTempUnusable(PolicyError):
    """macOS's per-user temp folder is not the folder it must be (sandbox/macos/darwin.py): a
    fact of this machine and user, not of a path the config names."""


class SandboxUnavailable(SandboxError):
    """The box cannot be built on this machine (no bwrap, user namespaces blocked, ...).

    ``diagnosis`` is the one-line cause; ``fix`` says what the user can do about it.
    Callers never fall back to running on the host when they catch this.
    """

    def __init__(self, diagnosis: str, fix: str = "") -> None:
        self.diagnosis = diagnosis
        self.fix = fix
        # One sentence: "bubblewrap (bwrap) is not installed; install the ...".
        super().__init__("; ".join(part for part in (diagnosis, fix) if part))


class GitLinkError(GitLayoutError):
    """A protected git path leads through a link the box could re-point."""


class SelfGuardError(PolicyError):
    """The toolkit's own code or interpreter lies where the agent could change it."""


class CgroupUnavailable(SandboxError):
    """No group could be made here; the message says why."""


class StageRefused(SandboxUnavailable):
    """A plain user's stage was refused its user namespace (a policy that allows bwrap
    alone, such as AppArmor's on Ubuntu): bwrap makes the same binds itself, slower."""


class WarmBoxDown(SandboxUnavailable):
    """The warm box did not start, is gone or stopped answering. ``stderr`` is what
    bwrap and the starter wrote (bwrap's own errors, such as a namespace refused)."""

    def __init__(self, diagnosis: str, fix: str = "", stderr: bytes = b"") -> None:
        super().__init__(diagnosis, fix)
        self.stderr = stderr
