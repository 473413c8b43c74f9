"""Unix sockets the box may connect to (``[sandbox] allow_unix_sockets``), and the
environment variables that point a program at one.

A listening Unix socket is a door to the program behind it: ``docker.sock`` runs
containers with the host mounted, an ssh-agent signs as the user, tmux and an editor's
server type commands into the user's shells. The box reaches none of them unless the
user lists the socket (or a folder of sockets). Each variable below names such a socket;
it is not passed into the box unless what it names is allowed, so a tool in the box
does not try a door that is shut, and a path the box could not use is not shown to it.

One list for both backends. macOS enforces it in the profile (``network-outbound`` to a
``remote unix-socket``). Under bubblewrap ``/run`` is an empty tmpfs and an allowed
socket there is bound back in; everywhere else each run's Unix-socket guard
(:mod:`sandbox.linux.warm.unixguard`) refuses a connection or a datagram to a pathname socket
that lies neither in one of the box's own folders (:func:`guard_roots`) nor on the list
(:func:`guard_allowed`). A box per run starts its command through the guard's launcher
(:func:`guarded`); the warm box's starter arms the guard in each run itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from sandbox.platform import MACOS

if TYPE_CHECKING:
    pass

Form = Literal["path", "path:", "path,", "unix://", "unix:"]

# name -> how its value names a socket. Host hooks keep them all: they run as the user.
SOCKET_VARS: tuple[tuple[str, Form], ...] = (
    ("SSH_AUTH_SOCK", "path"),           # ssh-agent, and the 1Password / Secretive agents
    ("GPG_AGENT_INFO", "path:"),         # gpg-agent (socket:pid:protocol)
    ("DOCKER_HOST", "unix://"),          # the Docker daemon: root on the host
    ("CONTAINER_HOST", "unix://"),       # Podman's service
    ("TMUX", "path,"),                   # tmux's server (socket,pid,session): send-keys
    ("NVIM", "path"),                    # a Neovim server: remote commands
    ("NVIM_LISTEN_ADDRESS", "path"),
    ("VSCODE_IPC_HOOK_CLI", "path"),     # VS Code's command line channel
    ("VSCODE_IPC_HOOK", "path"),
    ("VSCODE_GIT_IPC_HANDLE", "path"),   # VS Code's git credential helper
    ("KITTY_LISTEN_ON", "unix:"),        # kitty's remote control
    ("WEZTERM_UNIX_SOCKET", "path"),     # WezTerm's mux server
)


def socket_path(value: str, form: Form) -> str | None:
    """The socket a variable's value names; ``""`` when it names no Unix socket (a TCP
    address), None when it cannot be read as one (refused: fail closed)."""
    if form == "path":
        path = value
    elif form == "path:":
        path = value.split(":", 1)[0]
    elif form == "path,":
        path = value.split(",", 1)[0]
    else:
        if not value.startswith(form):
            return "" if "://" in value or value.startswith("tcp:") else None
        path = value[len(form):]
    return path if os.path.isabs(path) else None


def _key(path: str) -> str:
    p = os.path.realpath(path)
    # macOS's usual volumes ignore case: ~/.Docker/run is the same folder as ~/.docker.
    return p.casefold() if MACOS else p


def is_allowed(path: str, allowed: Iterable[str]) -> bool:
    """True when ``path`` (where it leads) is an allowed socket or lies below one."""
    key = _key(path)
    for a in allowed:
        root = _key(a)
        if key == root or key.startswith(root.rstrip("/") + "/"):
            return True
    return False


def without_shut_sockets(env: Mapping[str, str], allowed: Iterable[str]) -> dict[str, str]:
    """``env`` without each :data:`SOCKET_VARS` entry whose socket is not allowed."""
    allow = tuple(allowed)
    out = dict(env)
    for name, form in SOCKET_VARS:
        value = out.get(name)
        if value is None:
            continue
        path = socket_path(value, form)
        if path == "":
            continue
        if path is None or not is_allowed(path, allow):
            del out[name]
    return out
