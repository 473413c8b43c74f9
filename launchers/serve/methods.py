"""What each method does to the one session a server holds.

Every document is the one the CLI gives: ``open`` answers with ``audit --json``'s
document (built by the same functions), ``hook`` with ``hook --json``'s, and
``hook_openharness`` with ``hook --openharness --json``'s. The session is the library's
:class:`~sandbox.session.Session` and :class:`~launchers.harness.hooks.HookRunner`, so records,
replay, resume, the identity pins (checked before each hook runs) and the trust of an
openHarness file (read again for each event) are as in the library.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from launchers.harness import records as rec
from launchers.serve import wire
from launchers.serve.wire import WireError
from pathguard.records import NamedTuple

if TYPE_CHECKING:
    from launchers.config import Config, Source
    from launchers.harness.hooks import HookRunner
    from launchers.serve.output import Stream
    from launchers.serve.server import Emit
    from sandbox.plan import RunResult
    from sandbox.process.pty import TtySize
    from sandbox.session import Session


# The refusals keep the hook protocol's words ("or start with --no-hooks"); through
# serve the same way out is a param.
NO_HOOKS_HERE = 'Through serve, --no-hooks is open\'s "no_hooks": true.'


class Defaults(NamedTuple):
    """What ``serve``'s options give ``open`` when its params do not say."""

    project: str = "."
    config: str | None = None
    no_hooks: bool = False
    no_sandbox: bool = False


class LockedRecorder(rec.Recorder):
    """A recorder that several threads' events write to: one record at a time."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._lock = threading.Lock()

    def write(self, record: rec.Record) -> None:
        with self._lock:
            super().write(record)


def run_document(result: RunResult, stream: Stream | None = None) -> dict[str, Any]:
    """A run's result: ``exit`` is the status ``harness-sandbox run`` would exit with;
    the rest as records keep a run (:func:`launchers.harness.records.result_to_json`),
    and where a stream was cut (:mod:`launchers.serve.output`)."""
    from launchers.serve.output import cuts

    doc = rec.result_to_json(result)
    del doc["returncode"], doc["errno"]
    return {"exit": result.exit, "timed_out": result.outcome == "timed_out",
            **doc, **cuts(result, stream),
            "network_refused": [{"host": h, "port": p, "why": w}
                                for h, p, w in result.refused],
            "hint": result.hint}


def _not_found(name: str) -> dict[str, Any]:
    return {"exit": 127, "outcome": "failed_to_start", "timed_out": False, "signal": None,
            "stdout": "", "stderr": "", "stdout_capped": False, "stderr_capped": False,
            "stdout_capped_at": None, "stderr_capped_at": None,
            "error": f"{name}: command not found", "elapsed": 0.0, "network_refused": [],
            "hint": ""}


def _in_project(project: str, cwd: str) -> str:
    """``cwd`` (relative to the project, or absolute) as a real folder inside it."""
    real = os.path.realpath(os.path.join(project, cwd))
    if os.path.commonpath([real, project]) != project:
        raise WireError(wire.INVALID_PARAMS, f"run: cwd {cwd!r} is not inside the project "
                        f"{project}")
    if not os.path.isdir(real):
        raise WireError(wire.INVALID_PARAMS, f"run: cwd {cwd!r} is not a folder")
    return real


def _terminal(p: dict[str, Any], host: bool) -> TtySize | bool:
    """A run's ``tty``, ``cols`` and ``rows`` as ``Session.run``'s ``tty``."""
    from sandbox.process.pty import TtySize

    if not p.get("tty"):
        if "cols" in p or "rows" in p:
            raise WireError(wire.INVALID_PARAMS, "run: cols and rows are the size of the "
                            "terminal \"tty\": true asks for")
        return False
    if host:
        raise WireError(wire.INVALID_PARAMS, "run: a terminal is for boxed runs only; "
                        "the host runner gives none")
    default = TtySize()
    return TtySize(p.get("cols", default.cols), p.get("rows", default.rows))


# The box starts in the project; another folder of it is entered by a shell in the box.
_CD = 'cd -- "$1" || exit 125; shift; exec "$@"'


class ServeSession:
    """The session a server holds: closed, then open, then closed for good."""

    def __init__(self, defaults: Defaults) -> None:
        self.defaults = defaults
        self._stack: ExitStack | None = None
        self.session: Session | None = None
        self.runner: HookRunner | None = None
        self.config: Config | None = None
        self.openharness: str | None = None
        self.no_hooks = False
        self._recorder: rec.Recorder | None = None

    @property
    def is_open(self) -> bool:
        return self.session is not None

    # -- open ----------------------------------------------------------------------

    def open(self, p: dict[str, Any]) -> dict[str, Any]:
        from launchers.cli.common import load_user_config, policy_error_line
        from launchers.config import ConfigError
        from launchers.harness.hooks import new_session_id
        from sandbox.errors import PolicyError, SandboxError
        from sandbox.policy import DEFAULT_OUTPUT_CAP
        from sandbox.session import Session

        d = self.defaults
        project = os.path.abspath(p.get("project", d.project))
        try:
            config, found = load_user_config(p.get("config", d.config), project)
        except ConfigError as err:
            raise WireError(wire.CONFIG, str(err)) from err
        boxed = not p.get("no_sandbox", d.no_sandbox)
        stack = ExitStack()
        try:
            session = stack.enter_context(Session.open(
                project, config.sandbox, boxed=boxed,
                output_cap=p.get("output_cap", DEFAULT_OUTPUT_CAP)))
        except PolicyError as err:
            raise WireError(wire.POLICY, policy_error_line(err, config)) from err
        except SandboxError as err:
            raise WireError(wire.SANDBOX, str(err)) from err
        try:
            _placed(p, config, session, found.source if found else None)
            self.no_hooks = bool(p.get("no_hooks", d.no_hooks))
            sid = p.get("session_id") or new_session_id()
            doc = self._admit(p, config, session, sid, stack)
        except BaseException:
            stack.close()
            self._recorder = None
            raise
        self._stack, self.session, self.config = stack, session, config
        self.openharness = p.get("openharness")
        return doc

    def _admit(self, p: dict[str, Any], config: Config, session: Session, sid: str,
               stack: ExitStack) -> dict[str, Any]:
        """The audit, then the hook runner (its records, replay and resume)."""
        from launchers.cli.audit import check_hooks, document, warnings_of
        from launchers.config import banner
        from launchers.errors import OhConfigError

        try:
            checked = check_hooks(config, session.policy, p.get("openharness"))
        except OhConfigError as err:
            raise WireError(wire.CONFIG, str(err)) from err
        warnings = warnings_of(checked, config, session.policy)
        audit = document(checked, config, session.policy, warnings)
        if not audit["ok"] and not self.no_hooks:
            lines = [r.message for c in checked for r in c.refusals]
            raise WireError(wire.REFUSED, "\n".join([*lines, NO_HOOKS_HERE]),
                            {"audit": audit})
        warnings = list(warnings)
        self.runner = self._runner(p, config, session, sid=sid, warnings=warnings,
                                   stack=stack)
        return {"version": wire.PROTOCOL_VERSION, "session_id": sid,
                "banner": banner(config, no_hooks=self.no_hooks, boxed=session.policy.boxed),
                "warnings": warnings, "audit": audit, "output_cap": session.policy.output_cap}

    def _runner(self, p: dict[str, Any], config: Config, session: Session, *, sid: str,
                warnings: list[str], stack: ExitStack) -> HookRunner:
        from launchers.harness.hooks import HookRefused, HookRunner

        recorded: list[dict[str, Any]] | None = None
        replay: rec.Replay | None = None
        try:
            if "replay" in p:
                replay = rec.Replay(rec.read(p["replay"]))
            if "resume" in p:
                log = rec.read(p["resume"])
                recorded = rec.recorded_hooks(log)
                replay = rec.Replay(log)
                killed = rec.killed_during_hook(log)
                if killed is not None:
                    warnings.append(killed)
            if "records" in p:
                self._recorder = stack.enter_context(LockedRecorder(p["records"]))
        except (OSError, rec.RecordError) as err:
            raise WireError(wire.CONFIG, f"open: {err}") from err
        try:
            runner = HookRunner(config, session, no_hooks=self.no_hooks,
                                recorder=self._recorder, replay=replay, session_id=sid,
                                recorded=recorded, resumed="resume" in p)
        except HookRefused as err:
            raise WireError(wire.REFUSED, "\n".join([*err.messages, NO_HOOKS_HERE])) from err
        warnings += runner.warnings
        return runner

    def _open(self) -> Session:
        if self.session is None:
            raise WireError(wire.NOT_OPEN, "no session is open: send open first")
        return self.session

    # -- run -----------------------------------------------------------------------

    def run(self, p: dict[str, Any], cancel: threading.Event,
            emit: Emit | None = None) -> dict[str, Any]:
        """One command; with ``stream`` its output also comes as it is read, in
        ``output`` events before the result (:func:`streaming`), and the result's
        ``stdout`` and ``stderr`` are then empty."""
        from launchers.cli.run import host_program
        from launchers.serve.output import Stream, capped_at
        from sandbox.errors import SandboxUnavailable
        from sandbox.process.pipes import Pipes

        session = self._open()
        argv: list[str] = list(p["argv"])
        host = bool(p.get("host", False))
        if host:
            if "cwd" in p:
                raise WireError(wire.INVALID_PARAMS, "run: cwd is for the box; the host "
                                "runner always starts from /")
            program = host_program(session, argv[0])
            if program is None:
                return _not_found(argv[0])
            argv[0] = program
        elif "cwd" in p:
            cwd = _in_project(session.policy.project, p["cwd"])
            if cwd != session.policy.project:
                argv = ["/bin/sh", "-c", _CD, "sh", cwd, *argv]
        stdin = p.get("stdin", "").encode("utf-8", errors="surrogateescape")
        cap = p.get("output_cap")
        stream = Stream(emit, cap) if p.get("stream") and emit is not None else None
        try:
            result = session.run(argv, stdin=stdin, timeout=p.get("timeout"), cancel=cancel,
                                 boxed=not host, env_extra=p.get("env"), on_output=stream,
                                 pipes=capped_at(cap, Pipes) if cap and not stream else None,
                                 tty=_terminal(p, host))
        except SandboxUnavailable as err:
            raise WireError(wire.SANDBOX, str(err)) from err
        if result.outcome == "failed_to_start" and result.error:
            result = result._replace(error=f"{p['argv'][0]}: {result.error}")
        if stream is not None:
            stream.finish()
            result = result._replace(stdout=b"", stderr=b"")
        return run_document(result, stream)

    # -- hooks ---------------------------------------------------------------------

    def hook(self, p: dict[str, Any], cancel: threading.Event,
             emit: Emit | None = None) -> dict[str, Any]:
        from launchers.cli.hook import (
            PARAM_WORDS,
            document,
            event_fields,
            fire_event,
            tool_option_warnings,
        )
        from launchers.errors import UsageError

        self._open()
        runner = self.runner
        assert runner is not None
        args = _event_args(p)
        try:
            event, fields = event_fields(args, PARAM_WORDS)
        except UsageError as err:
            raise WireError(wire.INVALID_PARAMS, f"hook: {err}") from err
        if p.get("new_turn"):
            runner.new_turn()
        decision = fire_event(runner, event, fields, args.permission_mode, cancel,
                              session_id=p.get("session_id"),
                              tool_use_id=p.get("tool_use_id"))
        named = tool_option_warnings(args.tool, "tool") if event == "PreToolUse" else []
        return document(event, outcome=decision.outcome, decision=decision,
                        warnings=[*named, *decision.warnings])

    def hook_openharness(self, p: dict[str, Any], cancel: threading.Event,
                         emit: Emit | None = None) -> dict[str, Any]:
        from launchers.serve.openharness import fire_one

        session = self._open()
        path = p.get("file") or self.openharness or os.path.join(
            session.policy.project_as_written, ".oh", "config.yaml")
        return fire_one(session, os.path.abspath(path), p, _event_args(p), cancel,
                        no_hooks=self.no_hooks)

    # -- close ---------------------------------------------------------------------

    def close(self) -> list[str]:
        """End the session (everything it made removed, the records closed); what the
        session's end reports (see :meth:`Session.open`)."""
        stack, session = self._stack, self.session
        self._stack = self.session = self.runner = None
        if stack is None or session is None:
            return []
        stack.close()
        return list(session.warnings)


def _placed(p: dict[str, Any], config: Config, session: Session,
            source: Source | None) -> None:
    """The user config and the record files where the box cannot change them
    (:mod:`launchers.placement`). Raises :class:`WireError`."""
    from launchers.config import ConfigError
    from launchers.placement import check_config, check_records

    try:
        check_config(config, session.policy, source)
        for key in ("records", "replay", "resume"):
            if key in p:
                check_records(p[key], session.policy, key)
    except ConfigError as err:
        raise WireError(wire.CONFIG, str(err)) from err


def _event_args(p: dict[str, Any]) -> argparse.Namespace:
    """The ``hook`` command's options from a request's params."""
    return argparse.Namespace(
        event=p["event"], tool=p.get("tool"), prompt=p.get("prompt"),
        input=json.dumps(p["input"]) if "input" in p else None,
        session_id=p.get("session_id"), permission_mode=p.get("permission_mode", "auto"))
