"""``harness-sandbox``: audit, banner, run, hook, trust, doctor, import, serve.

Each command lives in its own module, imported only when that command runs, so that
``harness-sandbox run`` pays for nothing it does not use. Messages to people go to
stderr; ``--json`` output is one document on stdout.

The first statements drop every import-path entry that names the working directory
(see :mod:`launchers.cli.syspath`), before anything else is imported; so this module has no
``from __future__`` import, and its annotations that name argparse are strings.
"""

from launchers.cli import syspath

syspath.clean()

import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from importlib import import_module  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import TYPE_CHECKING, Any, NoReturn, cast  # noqa: E402

if TYPE_CHECKING:
    import argparse

# command -> (module, function); the function takes the parsed arguments, returns the exit.
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": ("launchers.cli.audit", "cmd_audit"),
    "banner": ("launchers.cli.audit", "cmd_banner"),
    "run": ("launchers.cli.run", "cmd_run"),
    "hook": ("launchers.cli.hook", "cmd_hook"),
    "doctor": ("launchers.cli.doctor", "cmd_doctor"),
    "trust": ("launchers.cli.trust", "cmd_trust"),
    "import": ("launchers.cli.import_claude", "cmd_import"),
    "serve": ("launchers.cli.serve", "cmd_serve"),
}


def _session_options(p: "argparse.ArgumentParser") -> None:
    p.add_argument("--config", metavar="FILE", help="the user config (default: discovered)")
    p.add_argument("--project", metavar="DIR", default=".", help="the project (default: .)")


def parser() -> "argparse.ArgumentParser":
    import argparse

    top = argparse.ArgumentParser(
        prog="harness-sandbox",
        description="Run an agent harness's hooks and tool commands in a box.",
    )
    top.add_argument("--version", action=_version_action(), help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("audit", help="check every configured hook before a session")
    _session_options(p)
    p.add_argument("--no-sandbox", action="store_true", help="audit for a session with no sandbox")
    p.add_argument("--openharness", metavar="FILE", help="also audit .oh/config.yaml hooks")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")

    p = sub.add_parser("banner", help="print the hooks: line a session starts with")
    _session_options(p)
    p.add_argument("--no-sandbox", action="store_true", help="a session with no sandbox")
    p.add_argument("--no-hooks", action="store_true", help="a session with hooks turned off")

    p = sub.add_parser("run", help="run a command in the session's box")
    _session_options(p)
    p.add_argument("--host", action="store_true", help="run on the host (the host runner)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds before the box is ended")
    p.add_argument("--tty", action="store_true",
                   help="on a terminal made for the run (its size: your terminal's, or 80x24)")
    p.add_argument("--tty-size", type=tty_size, metavar="COLSxROWS",
                   help="on a terminal of that size (implies --tty)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]",
                   help="the command and its arguments, after --")

    p = sub.add_parser("hook", help="fire one event through the configured hooks")
    p.add_argument("event", metavar="EVENT",
                   help="PreToolUse or UserPromptSubmit (with --openharness: one of its "
                        "17 events, such as preToolUse)")
    _session_options(p)
    p.add_argument("--openharness", metavar="FILE", help="use .oh/config.yaml hooks instead")
    p.add_argument("--tool", metavar="NAME", help="the tool called (PreToolUse)")
    p.add_argument("--input", metavar="JSON", help="the tool's input, a JSON object")
    p.add_argument("--prompt", metavar="TEXT", help="the prompt (UserPromptSubmit)")
    p.add_argument("--session-id", metavar="ID", default=None, help="the session's id")
    p.add_argument("--permission-mode", metavar="MODE", default="auto",
                   help="the harness's permission mode, given to the hooks as "
                        "permission_mode (default: auto)")
    p.add_argument("--no-sandbox", action="store_true", help="a session with no sandbox")
    p.add_argument("--no-hooks", action="store_true", help="run with hooks turned off")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")

    _more_commands(sub)
    from launchers.cli.helptext import EPILOGS

    for name, command in sub.choices.items():  # each --help ends with its exits, an example
        command.epilog = EPILOGS[name]
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return top


def _more_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """trust, doctor, import and serve."""
    p = sub.add_parser("trust", help="review an openHarness file and trust its content")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--openharness", metavar="FILE", help="show its hooks, then trust it")
    which.add_argument("--revoke", metavar="FILE", help="stop trusting it")
    which.add_argument("--list", action="store_true", help="the files trusted")
    p.add_argument("--config", metavar="FILE", help="the user config (default: discovered)")
    p.add_argument("--project", metavar="DIR", default=None,
                   help="the file's project (default: the folder holding its .oh)")

    p = sub.add_parser("doctor", help="what this machine can do")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")

    p = sub.add_parser("import", help="convert Claude Code hooks into [[hooks]] entries")
    p.add_argument("source", choices=["claude"], help="where the hooks come from")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="settings files (default: ~/.claude/settings.json, "
                        ".claude/settings.json, .claude/settings.local.json)")
    _session_options(p)
    p.add_argument("--write", action="store_true",
                   help="append the entries to the user config, after audit's checks")
    p = sub.add_parser("serve", help="one session over JSON lines on stdin and stdout")
    _session_options(p)
    p.add_argument("--no-hooks", action="store_true", help="a session with hooks turned off")
    p.add_argument("--no-sandbox", action="store_true", help="a session with no sandbox")
    p.add_argument("--schema", action="store_true",
                   help="print the protocol's JSON Schema and exit (docs/serve.md)")


def version() -> str:
    """The installed package's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("harness-sandbox")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _version_action() -> "type[argparse.Action]":
    import argparse

    class Version(argparse.Action):
        """``--version``: the version is looked up only when asked for."""

        def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
            super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

        def __call__(self, parser: "argparse.ArgumentParser", *a: Any, **kw: Any) -> None:
            print(f"harness-sandbox {version()}")
            parser.exit()

    return Version


def tty_size(text: str) -> tuple[int, int]:
    """``--tty-size``'s ``COLSxROWS``: each a whole number from 1 to 65535."""
    cols, x, rows = text.lower().partition("x")
    size = (int(cols), int(rows)) if x else (0, 0)
    if not all(0 < n < 1 << 16 for n in size):
        raise ValueError(text)
    return size


tty_size.__name__ = "COLSxROWS"  # argparse's error names it: "invalid COLSxROWS value"


# The commands on the path of every tool call, parsed by hand (importing argparse and
# building the parser cost several milliseconds): per command, its valued options (the
# attribute and the type), its flags, and the defaults argparse gives them.
_Valued = dict[str, tuple[str, Callable[[str], Any]]]
_SESSION: _Valued = {"--config": ("config", str), "--project": ("project", str)}
_FAST: dict[str, tuple[_Valued, dict[str, str], dict[str, Any]]] = {
    "run": (_SESSION | {"--timeout": ("timeout", float), "--tty-size": ("tty_size", tty_size)},
            {"--host": "host", "--tty": "tty"},
            {"config": None, "project": ".", "host": False, "timeout": None, "tty": False,
             "tty_size": None, "argv": []}),
    "hook": (_SESSION | {"--openharness": ("openharness", str), "--tool": ("tool", str),
                         "--input": ("input", str), "--prompt": ("prompt", str),
                         "--session-id": ("session_id", str),
                         "--permission-mode": ("permission_mode", str)},
             {"--no-sandbox": "no_sandbox", "--no-hooks": "no_hooks", "--json": "json"},
             {"event": None, "config": None, "project": ".", "openharness": None,
              "tool": None, "input": None, "prompt": None, "session_id": None,
              "permission_mode": "auto", "no_sandbox": False, "no_hooks": False,
              "json": False}),
}


def _parse_fast(words: Sequence[str]) -> Any:
    """``run [--config F] [--project D] [--host] [--timeout S] -- CMD...`` and ``hook
    EVENT [options]`` by hand, as argparse parses them. Anything unusual (help, an
    unknown or abbreviated option, a value that starts with ``-``, a bad number) returns
    None, and argparse parses it and words the error."""
    spec = _FAST.get(words[0]) if words else None
    if spec is None:
        return None
    valued, flags, defaults = spec
    args = SimpleNamespace(command=words[0], **defaults)
    i = 1
    while i < len(words):
        word = words[i]
        if word == "--" and args.command == "run":
            args.argv = list(words[i + 1 :])
            return args
        if word in flags:
            setattr(args, flags[word], True)
        elif not word.startswith("-") and args.command == "hook" and args.event is None:
            args.event = word
        else:
            name, eq, value = word.partition("=")
            if name not in valued:
                return None
            if not eq:
                if i + 1 >= len(words) or words[i + 1].startswith("-"):
                    return None
                i += 1
                value = words[i]
            attr, kind = valued[name]
            try:
                setattr(args, attr, kind(value))
            except ValueError:
                return None
        i += 1
    return args if args.command == "hook" and args.event is not None else None


# The commands the launcher (bin/harness-sandbox) runs without the cyclic garbage
# collector: each is short and leaves few cycles, and the collector's passes over what
# their imports and set-up allocate cost each about 3 ms (some 30 passes). Every other
# command may last (serve) or make many objects (audit): it gets the collector back.
_NO_COLLECTOR = ("run", "hook")


def main(argv: Sequence[str] | None = None) -> int:
    from launchers.cli.closed_pipe import closed_pipe, flush_stdout

    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] not in _NO_COLLECTOR:
        import gc

        gc.enable()
    try:
        try:
            return _dispatch(words)
        finally:
            flush_stdout()  # --help and --version end with SystemExit: flushed here too
    except BrokenPipeError as err:
        status = closed_pipe()
        if status is None:  # not our stdout or stderr: a bug like any other
            from launchers.cli.crash import report

            return report(words[0] if words else "", err)
        return status


def leave(status: int) -> NoReturn:
    """End the program with ``status`` once its output is written, without the
    interpreter's teardown: freeing every module and object one by one costs a short
    command about as much as its box. Everything that must happen at the end has
    happened when :func:`main` returns (the session's folders, mounts and groups are
    removed inside it), and what is registered to run at exit still runs here. A stream
    that cannot be flushed, or a thread still running that is not a daemon, gets the
    ordinary exit, which says or waits as Python does."""
    import atexit
    import os
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        sys.exit(status)  # Python joins them first, then runs the exit functions
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)


def _dispatch(words: list[str]) -> int:
    fast = _parse_fast(words)
    try:
        args = cast("argparse.Namespace", fast) if fast is not None else \
            parser().parse_args(words)
    except SystemExit as stop:  # argparse's usage error is 2; run's and hook's are 125
        if stop.code == 2 and words and words[0] in _FAST:
            from launchers.cli.helptext import EXIT_USAGE

            raise SystemExit(EXIT_USAGE) from None
        raise
    module, name = COMMANDS[args.command]
    try:
        func: Callable[[argparse.Namespace], int] = getattr(import_module(module), name)
        return func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # a reader that went away, or not: main() tells
    except Exception as err:  # a bug: one line and an unambiguous status, no traceback
        from launchers.cli.crash import report

        return report(args.command, err)
