"""The environment a run starts with, from its session's policy: a hook's on the host
(:func:`host_env`) or a command's in the box (:func:`box_env`).

The tables they apply (provider keys, loader variables) are :mod:`sandbox.policy.env`'s; this
module sits above both them and the policy, so neither reaches back to the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sandbox.policy.env import loader_var, prune_loaders, scrub

if TYPE_CHECKING:
    from sandbox.policy import Policy


def host_env(policy: Policy, env_extra: Mapping[str, str] | None = None, *,
             base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a run on the host: a hook's, or a command a harness runs there
    (``serve``'s ``"host": true``, ``run --host``, :meth:`Session.run` with ``boxed``
    False), with the caller's ``env_extra`` on top.

    Provider keys go. In a session with a sandbox PATH keeps only the entries pathguard
    accepts (none empty or relative, none inside a folder the agent can write, none
    that cannot be traced); when none is left there is no PATH at all, so the hook
    must name its programs by absolute path. With no sandbox PATH is unchanged: the
    agent's commands can write anywhere, so pruning would protect nothing.

    ``env_extra`` goes through the same table as the session's own environment: a
    caller's ``LD_PRELOAD`` or ``BASH_ENV`` naming a file the box wrote would be host
    code chosen by the agent, whichever entry point carried it. ``base`` is this
    function's answer without ``env_extra`` when the caller kept it (pruning PATH walks
    every entry).
    """
    env = dict(base) if base is not None else _pruned(policy, scrub(policy.env))
    if env_extra:
        extra = scrub(env_extra)
        # A guard is built only for names the table prunes: a host hook's own
        # variables (CLAUDE_PROJECT_DIR, ...) come with every run and need none.
        if any(k == "PATH" or loader_var(k) is not None for k in extra):
            extra = _pruned(policy, extra)
        env.update(extra)
    return env


def _pruned(policy: Policy, env: dict[str, str]) -> dict[str, str]:
    """``env`` with PATH and the loader variables pruned by the host runs' guard, in a
    session with a sandbox."""
    if not policy.boxed:
        return env
    # Imported here: pathguard is only needed for a boxed session's host runs.
    from pathguard.argv import prune_path

    guard = policy.guard(boxed=False)
    if "PATH" in env:
        pruned = prune_path(env.get("PATH"), guard)
        if pruned is None:
            env.pop("PATH", None)
        else:
            env["PATH"] = pruned
    # The loader variables, by the same rule (their table is sandbox/policy/env.py's).
    return prune_loaders(env, guard)


def box_env(policy: Policy, env_extra: Mapping[str, str] | None = None, *,
            tmpdir: str = "/tmp") -> dict[str, str]:
    """The environment of a boxed hook or command: the session's and the caller's
    additions, scrubbed (no path into the box carries a key), with ``TMPDIR`` at the
    box's temp folder (``/tmp`` in the Linux box; the private folder itself on macOS),
    no variable naming a Unix socket the box may not reach (``SSH_AUTH_SOCK``, ...),
    and the package managers' cache variables at the project's own caches."""
    from sandbox.policy.sockets import without_shut_sockets

    env = scrub(policy.env)
    if env_extra:
        env.update(scrub(env_extra))
    env = without_shut_sockets(env, policy.allow_unix_sockets)
    env["TMPDIR"] = tmpdir
    # Package managers' caches: the project's own, never the host's (sandbox/policy/caches.py).
    from sandbox.policy.caches import box_variables

    env.update(box_variables(policy))
    return env
