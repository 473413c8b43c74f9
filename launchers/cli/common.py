"""What every command shares: loading the user config, saying things, the JSON version,
and the one line each error is told with.

Messages to people go to stderr. ``run`` and ``hook --openharness`` put the program's
name before their own lines (``harness-sandbox: ...``): the first shares stderr with the
command it ran, the second has always spoken so. The seed's texts (refusals, blocks,
warnings) are printed as the seed has them.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from launchers.config import Config, Located, load, locate

if TYPE_CHECKING:
    from sandbox.errors import PolicyError

PROG = "harness-sandbox"
# The version of every ``--json`` document; it changes when a document's shape does.
JSON_VERSION = 1


def say(text: str, *, named: bool = False) -> None:
    """One line for people, on stderr; ``named`` puts the program's name first. The one
    point every human-facing line goes through: control characters a hook or a boxed
    command chose are written out (:func:`sandbox.text.for_terminal`); ``--json`` and the
    protocol's answers keep them verbatim."""
    from sandbox.text import for_terminal

    text = for_terminal(text)
    sys.stderr.write(f"{PROG}: {text}\n" if named else f"{text}\n")
    sys.stderr.flush()


def load_user_config(explicit: str | None, project: str, *,
                     named_must_exist: bool = False) -> tuple[Config, Located | None]:
    """The user config ``--config`` or the environment names (an empty one when no file
    exists), and where it was looked for. With ``named_must_exist``, a ``--config`` file
    that is not there is an error: the command would quietly run no hooks at all.
    Raises :class:`~launchers.errors.ConfigError`."""
    found = locate(os.environ, explicit=explicit)
    if found is None:
        return Config(path=None), None
    if named_must_exist and found.source == "--config" and not os.path.lexists(found.path):
        from launchers.errors import ConfigError

        raise ConfigError(found.path, "no such file (named by --config); give the path of "
                                      "the user config, or leave --config out to use the "
                                      "one found by default.")
    return load(found.path, project=project, source=found.source), found


def policy_error_line(err: PolicyError, config: Config) -> str:
    """A policy that cannot be built, in one line. Only the project is checked before
    ``[sandbox]``'s paths, and those come from the config, so they name it."""
    from sandbox.errors import GitLayoutError, UserTempUnusable
    from sandbox.session.selfguard import SelfGuardError

    if isinstance(err, SelfGuardError):
        return str(err)  # about the toolkit itself, whole sentences already
    # Neither the project, git's layout nor macOS's user temp folder comes from the config.
    not_config = (isinstance(err, (UserTempUnusable, GitLayoutError))
                  or str(err).startswith("the project "))
    where = "" if not_config or config.path is None else f"{config.path}: [sandbox]: "
    return f"{where}{err}."
