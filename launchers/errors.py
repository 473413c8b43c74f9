"""The errors of the launchers, named by state. A leaf: imports nothing of ours.

Each carries one line for people (its ``str``): what could not be done and where.
"""

from __future__ import annotations

from collections.abc import Sequence


class ConfigError(Exception):
    """The config could not be loaded. The message names the file, and the hook and key
    where there is one. ``index`` counts the ``[[hooks]]`` tables from 1, for a hook
    whose name is not known (yet)."""

    def __init__(self, file: str, message: str, *, hook: str | None = None,
                 key: str | None = None, index: int | None = None) -> None:
        self.file = file
        self.hook = hook
        self.key = key
        self.message = message
        self.index = index
        super().__init__(message)

    def __str__(self) -> str:
        # One line: the file, then the hook (by name, else by its place in the file),
        # then the message, which names the key itself where there is one.
        where = ""
        if self.hook is not None:
            where = f'hook "{self.hook}": '
        elif self.index is not None:
            where = f"hook #{self.index}: "
        return f"{self.file}: {where}{self.message}"


class OhConfigError(Exception):
    """``.oh/config.yaml`` could not be loaded. The message names the file and, where
    there is one, the event and the hook's index: ``F: hooks.preToolUse[2]: ...``."""

    def __init__(
        self,
        file: str,
        message: str,
        *,
        event: str | None = None,
        index: int | None = None,
    ) -> None:
        self.file = file
        self.event = event
        self.index = index
        self.message = message
        where = file
        if event is not None:
            where += f": hooks.{event}"
            if index is not None:
                where += f"[{index}]"
        super().__init__(f"{where}: {message}")


class HookRefused(Exception):
    """One or more hooks may not run: their files lie where the agent could change them
    (or where a boxed hook could not read them). The session must not start.

    ``messages`` holds one full refusal line per problem.
    """

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        super().__init__("\n".join(self.messages))


class UsageError(Exception):
    """The options do not describe an event that can be fired."""
