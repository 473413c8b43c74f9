"""``harness-sandbox trust``: review an openHarness file and trust its content.

``trust --openharness FILE`` reads the file once, prints every hook it defines (event,
mode, where it runs, the command or URL, with control characters escaped), and records
the SHA-256 of exactly those bytes at the file's real path. ``trust --revoke FILE``
forgets it, ``trust --list`` prints what is trusted. Exit 0 done; 1 ``--revoke`` of a
file that was not trusted; 2 the file, the user config or the store cannot be used.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from launchers.cli.common import say
from launchers.errors import ConfigError, OhConfigError, UsageError
from launchers.openharness.config import OhConfig, OhHook
from launchers.openharness.trust import (
    TrustStore,
    parse_bytes,
    read_file,
    record,
    revoke,
    shown,
    store_path,
)

if TYPE_CHECKING:
    from sandbox.policy import Policy


def _say(text: str) -> None:
    say(text, named=True)


def hook_line(hook: OhHook) -> str:
    """One hook as the review shows it."""
    if hook.http is not None:
        head, what = "http POST from the host", hook.http
    else:
        mode = "jsonIO" if hook.json_io else "env mode"
        runs = "in the box" if hook.sandbox else "on the host"
        head, what = f"command ({mode}) {runs}", hook.command or ""
    if hook.match is not None:
        head += f', match "{shown(hook.match)}"'
    return f"  {hook.label}: {head}: {shown(what)}"


def review(path: str, config: OhConfig) -> list[str]:
    """What ``trust`` shows before it records: every hook of the file."""
    hooks = list(config.all_hooks())
    if not hooks:
        return [f"{shown(path)} defines no hooks."]
    noun = "hook" if len(hooks) == 1 else "hooks"
    return [f"{shown(path)} defines {len(hooks)} {noun}:", *(hook_line(h) for h in hooks)]


def _project_of(path: str) -> str:
    """The project a file belongs to: the folder holding its ``.oh``, else its own."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder) == ".oh":
        return os.path.dirname(folder)
    return folder


def _policy(args: argparse.Namespace, path: str) -> Policy:
    """The session policy for the file's project, from the user config, so that a
    store inside a folder the box can write is refused. Raises ConfigError or
    UsageError (a policy that cannot be built)."""
    from launchers.cli.common import load_user_config, policy_error_line
    from sandbox.errors import PolicyError
    from sandbox.policy import Policy

    project = args.project or _project_of(path)
    from launchers.placement import check_config

    config, found = load_user_config(args.config, project)
    try:
        policy = Policy.from_settings(project, config.sandbox)
    except PolicyError as err:
        raise UsageError(policy_error_line(err, config)) from err
    check_config(config, policy, found.source if found else None)
    return policy


def _trust(args: argparse.Namespace, path: str) -> int:
    read = read_file(path)
    config = parse_bytes(read.data, path)
    for line in review(path, config):
        print(line)
    store = record(read, policy=_policy(args, path))
    print(f"trusted: {shown(read.real)} (sha256 {read.sha256}) in {shown(store)}")
    return 0


def _revoke(args: argparse.Namespace, path: str) -> int:
    real = os.path.realpath(path)
    if revoke(real, policy=_policy(args, path)):
        print(f"revoked: {shown(real)}")
        return 0
    _say(f"{shown(real)} was not trusted")
    return 1


def _list() -> int:
    store = TrustStore.open(store_path())
    if not store.entries:
        _say(f"no file is trusted ({shown(store.path)})")
    for real, sha in sorted(store.entries.items()):
        print(f"{sha}  {shown(real)}")
    return 0


def cmd_trust(args: argparse.Namespace) -> int:
    try:
        if args.openharness:
            return _trust(args, args.openharness)
        if args.revoke:
            return _revoke(args, args.revoke)
        return _list()
    except (OhConfigError, ConfigError, UsageError) as err:
        _say(str(err))
        return 2
    except OSError as err:
        _say(f"the trust store cannot be written: {err.strerror or err}")
        return 2
