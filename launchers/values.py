"""How a config's values are named in its error messages: a value's type ("an integer"),
the value as TOML writes it, and the check that a value is a list of strings."""

from __future__ import annotations

from collections.abc import Callable

from launchers.errors import ConfigError

# Makes the error for a key from its name and the message.
Error = Callable[[str, str], ConfigError]


def a_type(value: object) -> str:
    """A TOML value's type, as a message names it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def as_toml(value: object) -> str:
    """A value as it would be written in TOML (strings quoted)."""
    if isinstance(value, str):
        import json

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def strings(value: object, error: Callable[[str], ConfigError]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise error(f"must be a list of strings, not {a_type(value)}.")
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise error(f"element {i} must be a string, not {a_type(item)}.")
    return tuple(value)
