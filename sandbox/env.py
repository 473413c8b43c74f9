"""The environment a hook or a boxed command starts with.

Provider keys never reach a hook or a boxed command. A host hook in a session with a
sandbox also loses every PATH entry the agent could plant a program in; pathguard decides
which those are, this module only applies its answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .policy import Policy

# Removed from every hook's and every boxed command's environment, together with any name
# ending in _API_KEY. One list, here; tests cover each entry.
PROVIDER_KEYS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEX_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "PERPLEXITY_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
)

_PROVIDER_KEY_SET = frozenset(PROVIDER_KEYS)
_API_KEY_SUFFIX = "_API_KEY"

# Passed through to host hooks untouched, so a notification hook reaches the desktop.
# Nothing removes them; the names are listed so the rule is visible and tested.
DESKTOP_VARS: tuple[str, ...] = (
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
)


def is_provider_key(name: str) -> bool:
    """True for a name that must never reach a hook or a boxed command."""
    return name in _PROVIDER_KEY_SET or name.endswith(_API_KEY_SUFFIX)


def scrub(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without provider keys (the list above and any ``*_API_KEY``)."""
    return {k: v for k, v in env.items() if not is_provider_key(k)}


def drop_names(env: Mapping[str, str], patterns: Sequence[str]) -> dict[str, str]:
    """``env`` without the names ``[sandbox] scrub`` lists (``*`` and ``?`` patterns)."""
    if not patterns:
        return dict(env)
    return {k: v for k, v in env.items() if not any(fnmatchcase(k, p) for p in patterns)}


def host_env(policy: Policy) -> dict[str, str]:
    """The environment of a hook run on the host.

    Provider keys go. In a session with a sandbox PATH keeps only the entries pathguard
    accepts (none empty or relative, none inside a folder the agent can write, none
    that cannot be traced); when none is left there is no PATH at all, so the hook
    must name its programs by absolute path. With no sandbox PATH is unchanged: the
    agent's commands can write anywhere, so pruning would protect nothing.
    """
    env = scrub(policy.env)
    if policy.boxed:
        # Imported here: pathguard is only needed for a boxed session's host hooks.
        from pathguard.argv import prune_path

        pruned = prune_path(env.get("PATH"), policy.guard(boxed=False))
        if pruned is None:
            env.pop("PATH", None)
        else:
            env["PATH"] = pruned
    return env


def box_env(policy: Policy, env_extra: Mapping[str, str] | None = None, *,
            tmpdir: str = "/tmp") -> dict[str, str]:
    """The environment of a boxed hook or command: the session's and the caller's
    additions, scrubbed (no path into the box carries a key), with ``TMPDIR`` at the
    box's temp folder (``/tmp`` in the Linux box; the private folder itself on macOS),
    and no variable naming a Unix socket the box may not reach (``SSH_AUTH_SOCK``, ...)."""
    from .sockets import without_shut_sockets

    env = scrub(policy.env)
    if env_extra:
        env.update(scrub(env_extra))
    env = without_shut_sockets(env, policy.allow_unix_sockets)
    env["TMPDIR"] = tmpdir
    return env
