"""Every git the toolkit itself runs on the host runs nothing the agent wrote.

The toolkit asks the host's git about the project (at a session's open, in its end
report, when it copies a config). The project's git folders are the agent's: a
``core.fsmonitor`` set by the box would make the toolkit's own ``git ls-files`` run the
agent's program on the host -- before the user has read any warning. So each key that
can make git start a program is set on the command line (``-c``, the scope that wins
over every config file), and every toolkit git goes through :func:`argv`.

The table names what git 2.x starts on its own; the commands the toolkit runs (``config``,
``rev-parse``, ``ls-files``) need none of them. Filter, diff and merge drivers are chosen
by attributes: ``core.attributesFile`` points nowhere, and none of those commands reads
the work tree's ``.gitattributes`` to run a driver. ``core.hooksPath`` is not in the
table: none of those commands runs a hook, and ``rev-parse --git-path hooks`` must answer
with the folder host git would really use, so that it is protected.

A listing of the config (``config --list``) shows these entries too, with the origin
``command line:``; :func:`ours` tells them apart from the user's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from pathguard.records import NamedTuple


class Neutral(NamedTuple):
    """A config key git may run a program from, the value that runs nothing, and why."""

    key: str
    value: str
    why: str


NEUTRAL: tuple[Neutral, ...] = (
    Neutral("core.fsmonitor", "false", "run on every read of the index (ls-files, status)"),
    Neutral("core.pager", "cat", "a pager started for output to a terminal"),
    Neutral("core.editor", "false", "an editor started for a message"),
    Neutral("sequence.editor", "false", "an editor started for a rebase's to-do"),
    Neutral("diff.external", "", "a diff program for every diff"),
    Neutral("core.sshCommand", "false", "ssh for a remote"),
    Neutral("core.askPass", "", "a program asked for a password"),
    Neutral("credential.helper", "", "credential helpers (empty resets the list)"),
    Neutral("gpg.program", "false", "signing and verifying"),
    Neutral("core.alternateRefsCommand", "", "run to list an alternate's refs"),
    Neutral("core.attributesFile", "/dev/null", "attributes choose filter and diff drivers"),
    Neutral("core.untrackedCache", "false", "the index's cache of the work tree"),
    Neutral("protocol.allow", "never", "remote helpers (ext::, fd::) start programs"),
)

_OURS = frozenset((n.key.lower(), n.value) for n in NEUTRAL)


def ours(origin: str, key: str, value: str) -> bool:
    """Whether a listed config entry is one this module put on the command line."""
    return origin == "command line:" and (key.lower(), value) in _OURS


# Options before the subcommand: no pager, no lazy fetch, no replace refs.
_GLOBAL = ("--no-pager", "--no-replace-objects")


def argv(git: str, args: Sequence[str]) -> list[str]:
    """The command line that runs ``git args`` with every program-running key off."""
    out = [git, *_GLOBAL]
    for n in NEUTRAL:
        out += ["-c", f"{n.key}={n.value}"]
    return [*out, *args]
