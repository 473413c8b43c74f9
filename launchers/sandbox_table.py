"""The ``[sandbox]`` table of the user config, checked key by key into
:class:`~sandbox.settings.SandboxSettings`."""

from __future__ import annotations

import os
import re
from typing import Any

from launchers.errors import ConfigError
from launchers.values import Error, a_type, as_toml
from sandbox.settings import SandboxSettings

# The keys and their defaults are SandboxSettings' own, in its order.
SANDBOX_KEYS: tuple[str, ...] = SandboxSettings._fields
_DEFAULTS = SandboxSettings._field_defaults
# [sandbox] box: the Linux boxes a user may ask for (sandbox/linux/kind.py).
BOXES = ("auto", "landlock")
# A scrub entry: an environment name, or a pattern of one with * and ?.
_ENV_PATTERN = r"[A-Za-z0-9_*?]+"  # compiled at its first use (re caches it)


def sandbox_table(file: str, raw: object) -> SandboxSettings:
    if raw is None:
        return SandboxSettings()
    if not isinstance(raw, dict):
        raise ConfigError(file, f'key "sandbox": must be a table ([sandbox]), not {a_type(raw)}.',
                          key="sandbox")

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(file, f'[sandbox]: key "{key}": {message}', key=key)

    for key in raw:
        if key not in SANDBOX_KEYS:
            raise ConfigError(file, f'[sandbox]: unknown key "{key}"; the keys are '
                                    + ", ".join(SANDBOX_KEYS) + ".", key=key)
    paths = {key: _sandbox_paths(raw, key, error)
             for key in ("writable", "hidden", "allow_unix_sockets")}
    flags: dict[str, bool] = {}
    for key in ("hide_defaults", "protect", "enabled"):
        value = raw.get(key, _DEFAULTS[key])
        if not isinstance(value, bool):
            raise error(key, f"must be true or false, not {a_type(value)}.")
        flags[key] = value
    box = raw.get("box", _DEFAULTS["box"])
    if box not in BOXES:
        raise error("box", f"must be one of {', '.join(map(as_toml, BOXES))}, not "
                           f"{as_toml(box) if isinstance(box, str) else a_type(box)}.")
    return SandboxSettings(box=box, writable=paths["writable"], hidden=paths["hidden"],
                           scrub=_scrub_names(raw, error), network=_network(raw, error),
                           allow_unix_sockets=paths["allow_unix_sockets"],
                           allow_tool_configs=_tool_configs(raw, error), **flags,
                           **_limits(raw, error))


def _limits(raw: dict[str, Any], error: Error) -> dict[str, Any]:
    """The box's bounds (sandbox/policy/limits.py): sizes are kept as written."""
    from sandbox.policy import limits

    out: dict[str, Any] = {}
    n = raw.get("processes", _DEFAULTS["processes"])
    span = f"a whole number from 16 to {limits.MAX_PROCESSES}"
    if isinstance(n, bool) or not isinstance(n, int):
        raise error("processes", f"must be {span}, not {a_type(n)}.")
    if not 16 <= n <= limits.MAX_PROCESSES:
        raise error("processes", f"{n} is out of range; use {span}.")
    out["processes"] = n
    for key in ("memory", "tmp_size", "shm_size"):
        if key in raw:
            why = limits.size_error(raw[key])
            if why is not None:
                if why.startswith("must"):
                    why += f", not {a_type(raw[key])}"
                raise error(key, why + ".")
            out[key] = raw[key]
    return out


def _listed(raw: dict[str, Any], key: str) -> object:
    """The value of a list key, the table's default (an empty list) when it is not set."""
    return raw.get(key, list(_DEFAULTS[key]))


def _sandbox_paths(raw: dict[str, Any], key: str, error: Error) -> tuple[str, ...]:
    value = _listed(raw, key)
    if not isinstance(value, list):
        raise error(key, f"must be a list of paths, not {a_type(value)}.")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise error(key, f"element {i} must be a string, not {a_type(item)}.")
        # A relative path would mean whatever the current folder is at start.
        if not (os.path.isabs(item) or item == "~" or item.startswith("~/")):
            raise error(key, f"{as_toml(item)} is not an absolute path; write it from / or ~/.")
    return tuple(value)


def _network(raw: dict[str, Any], error: Error) -> bool | tuple[str, ...]:
    """false, true, or a list of hosts (sandbox/network/allow.py), each checked: a
    string, or a table ``{ host = "...", private = true }``, kept as the library's text
    (``"name (private)"``)."""
    value = raw.get("network", _DEFAULTS["network"])
    if isinstance(value, bool):
        return value
    if not isinstance(value, list):
        raise error("network", "must be true, false or a list of host names, not "
                               f"{a_type(value)}.")
    from sandbox.network.allow import PRIVATE, parse

    out = []
    for i, item in enumerate(value, 1):
        text = _network_entry(i, item, error)
        try:
            # A table's host is checked as written, then with its mark.
            entry = parse(item["host"] if isinstance(item, dict) else text)
            entry = parse(text)
        except ValueError as err:
            raise error("network", f"element {i}: {err}; write a host name, *.name or an "
                                   "address, with :port if not 80 and 443.") from err
        if entry.private and isinstance(item, str):
            host = text[:-len(PRIVATE)]
            raise error("network", f'element {i}: write {as_toml(text)} as {{ host = '
                                   f'"{host}", private = true }}.')
        out.append(text)
    return tuple(out)


def _network_entry(i: int, item: object, error: Error) -> str:
    """An element of the list as the library's text; a table's keys checked."""
    if isinstance(item, str):
        return item
    private_form = '{ host = "npm.corp.internal", private = true }'
    if not isinstance(item, dict):
        # (The table form is for a private entry: the message stays a string's.)
        raise error("network", f"element {i} must be a string, not {a_type(item)}.")
    for key in item:
        if key not in ("host", "private"):
            raise error("network", f'element {i}: unknown key "{key}"; a table entry has '
                                   f"host and private, as in {private_form}.")
    host, private = item.get("host"), item.get("private", False)
    if not isinstance(host, str) or not host:
        got = "missing" if host is None else f"not {a_type(host)}"
        raise error("network", f'element {i}: "host" must be a host name or *.name '
                               f"({got}), as in {private_form}.")
    if not isinstance(private, bool):
        raise error("network", f'element {i}: "private" must be true or false, not '
                               f"{a_type(private)}.")
    if host.endswith(")"):
        raise error("network", f'element {i}: "host" is a host name alone; write '
                               f"{private_form}.")
    from sandbox.network.allow import PRIVATE

    return host + PRIVATE if private else host


def _scrub_names(raw: dict[str, Any], error: Error) -> tuple[str, ...]:
    names = _listed(raw, "scrub")
    if not isinstance(names, list):
        raise error("scrub", f"must be a list of environment names, not {a_type(names)}.")
    for i, item in enumerate(names, 1):
        if not isinstance(item, str):
            raise error("scrub", f"element {i} must be a string, not {a_type(item)}.")
        if not re.fullmatch(_ENV_PATTERN, item):
            raise error("scrub", f"{as_toml(item)} is not an environment name; use letters, "
                                 "digits and _, with * or ? for any characters.")
    return tuple(names)


def _tool_configs(raw: dict[str, Any], error: Error) -> tuple[str, ...]:
    from sandbox.policy.toolconfigs import NAMES

    names = _listed(raw, "allow_tool_configs")
    if not isinstance(names, list):
        raise error("allow_tool_configs", f"must be a list of names, not {a_type(names)}.")
    for i, item in enumerate(names, 1):
        if not isinstance(item, str):
            raise error("allow_tool_configs",
                        f"element {i} must be a string, not {a_type(item)}.")
        if item not in NAMES:
            raise error("allow_tool_configs", f"{as_toml(item)} is not a project config the "
                                              "box guards; the names are "
                                              + ", ".join(NAMES) + ".")
    return tuple(names)
