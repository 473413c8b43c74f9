"""``harness-sandbox run``: one command in the session's box, as bash and exec run it.

The command's stdout and stderr pass on as they come, uncapped (:mod:`launchers.cli.stream`);
a reader that goes away ends the run and everything it started, with status 141.

Exit status: the command's own; 124 timed out; 125 the box could not be built (or the
config or a path it names is unusable, or a usage error); 126 the command could not be
executed; 127 it was not found; 128+N killed by signal N (in the box, as bwrap reports
it); 130 cancelled.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING

from launchers.cli.common import load_user_config, policy_error_line, say

if TYPE_CHECKING:
    import argparse

    from sandbox.plan import RunResult
    from sandbox.process.pty import TtySize
    from sandbox.session import Session

EXIT_TIMED_OUT = 124
EXIT_NO_BOX = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
EXIT_CANCELLED = 130


def _say(message: str) -> None:
    say(message, named=True)


def _stdin() -> bytes:
    """What we were given on stdin, unless it is a terminal: a box never gets one."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        return b""
    return stream.buffer.read()


def _terminal(args: argparse.Namespace) -> TtySize | bool:
    """The terminal ``--tty`` or ``--tty-size`` asks for: of that size, else of the
    size of ours (the first of stdout, stderr and stdin that is one), else 80x24; its
    ``TERM`` ours, where we have one."""
    if not (getattr(args, "tty", False) or getattr(args, "tty_size", None)):
        return False
    from sandbox.process.pty import TtySize

    default = TtySize()
    size = args.tty_size
    for fd in (1, 2, 0):
        if size is not None:
            break
        try:
            size = tuple(os.get_terminal_size(fd))
        except OSError:
            continue
    cols, rows = size or (default.cols, default.rows)
    return TtySize(cols, rows, os.environ.get("TERM") or default.term)


def cmd_run(args: argparse.Namespace) -> int:
    # Imported here: `run` is on the hot path and pays only for what it uses.
    from launchers.cli.stream import StreamingPipes
    from launchers.config import ConfigError
    from launchers.placement import check_config
    from sandbox.errors import PolicyError, SandboxUnavailable
    from sandbox.session import Session

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        _say("run needs a command: harness-sandbox run -- CMD [ARG...]")
        return EXIT_NO_BOX  # 125: the toolkit's own failure, never the command's status

    project = os.path.abspath(args.project)
    try:
        config, found = load_user_config(args.config, project)
    except ConfigError as err:
        _say(str(err))
        return EXIT_NO_BOX

    tty = _terminal(args)
    if tty and args.host:
        _say("run: --tty is for boxed runs; the host runner gives no terminal")
        return EXIT_NO_BOX
    stdin = _stdin()
    try:
        # One command: a box for it alone costs less than a warm box and its starter.
        with Session.open(project, config.sandbox, warm=False) as session:
            check_config(config, session.policy, found.source if found else None)
            if args.host:
                program = host_program(session, argv[0])
                if program is None:
                    _say(f"{argv[0]}: command not found")
                    return EXIT_NOT_FOUND
                argv[0] = program
            # The output as it comes; a closed reader ends the run.
            result = session.run(argv, stdin=stdin, timeout=args.timeout,
                                 boxed=not args.host, pipes=StreamingPipes, tty=tty)
    except PolicyError as err:
        _say(policy_error_line(err, config))
        return EXIT_NO_BOX
    except ConfigError as err:
        _say(str(err))
        return EXIT_NO_BOX
    except SandboxUnavailable as err:
        _say(str(err))
        return EXIT_NO_BOX
    return _report(result, session, argv[0], args.timeout)


def host_program(session: Session, name: str) -> str | None:
    """The absolute program the host runner starts for ``name``. A bare name is looked
    up once, on the PATH a host command gets (pruned of the agent's folders)."""
    if "/" in name:
        return os.path.abspath(name)
    from pathguard.argv import find_program

    return find_program(name, session.host_env().get("PATH"))


def _report(result: RunResult, session: Session, program: str,
            timeout: float | None) -> int:
    """The command's output, the session's warnings, and the exit status."""
    if result.outcome == "failed_to_start":
        _say(f"{program}: {result.error}")
        _say_why_not_started(result, session, program)
        return exit_status(result)
    out, err_ = sys.stdout.buffer, sys.stderr.buffer
    out.write(result.stdout)
    out.flush()
    err_.write(result.stderr)
    err_.flush()
    for warning in session.warnings:
        _say(warning)
    for name, capped in (("stdout", result.stdout_capped), ("stderr", result.stderr_capped)):
        if capped:
            _say(f"the command's {name} passed {session.policy.output_cap} bytes; "
                 "the rest was dropped")
    if result.outcome == "exited" and result.returncode == EXIT_NOT_FOUND:
        _say_why_not_started(result, session, program)  # #!/usr/bin/env python3\r
    _say_why_failed(result, session)
    if result.outcome == "timed_out":
        _say(f"{result.plan.description if result.plan else program} timed out after "
             f"{timeout or 0:g} s")
    return exit_status(result)


def _say_why_failed(result: RunResult, session: Session) -> None:
    """Why a boxed command failed, where the box refused it (sandbox/box/hints.py), from
    the stderr it passed on; an address the allow-list refused is said among the
    session's warnings already."""
    if result.ok or result.plan is None or result.plan.backend == "host":
        return
    from launchers.cli.stream import stderr_tail
    from sandbox.box.hints import why

    hint = why(result.stderr + stderr_tail(), session.policy)
    if hint:
        _say(f"hint: {hint}")


def _say_why_not_started(result: RunResult, session: Session, program: str) -> None:
    """"No such file or directory" of a script that exists: its ``#!`` line ends in a
    carriage return (Windows line ends). A name with no ``/`` was looked up on a PATH,
    so what ran is not known here; a relative one is the project's, where the box
    starts. The file may be the agent's: only its line end is looked at, and nothing of
    it is shown."""
    if result.outcome == "failed_to_start" and result.errno != errno.ENOENT:
        return
    if "/" not in program:
        return
    from launchers.startable import crlf_reason

    reason = crlf_reason(os.path.abspath(os.path.join(session.policy.project, program)))
    if reason is not None:
        _say(reason)


def exit_status(result: RunResult) -> int:
    """The status ``run`` exits with for ``result`` (see the module's doc)."""
    return result.exit
