"""``hook_openharness``: one event through ``.oh/config.yaml`` hooks, as ``hook
--openharness`` fires it: the file is read and its trust checked for each event (a
changed byte untrusts it), its hooks are guarded and pinned, then fired in the
session's box."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, Any

from launchers.serve import wire
from launchers.serve.wire import WireError

if TYPE_CHECKING:
    from sandbox.session import Session


def fire_one(session: Session, path: str, p: dict[str, Any], args: argparse.Namespace,
             cancel: threading.Event, *, no_hooks: bool) -> dict[str, Any]:
    from launchers.cli.common import JSON_VERSION
    from launchers.cli.hook_openharness import context_from_args
    from launchers.errors import OhConfigError
    from launchers.openharness.config import EVENTS, TOOL_EVENTS, unknown_event
    from launchers.openharness.fire import Result, admit, fire, session_runner
    from launchers.openharness.trust import Untrusted, load, refuse_store_in_box

    event: str = p["event"]
    if event not in EVENTS:
        raise WireError(wire.INVALID_PARAMS, f"hook_openharness: {unknown_event(event)}")
    if event in TOOL_EVENTS and not p.get("tool"):
        raise WireError(wire.INVALID_PARAMS, f"hook_openharness: {event} needs a tool")
    if no_hooks:
        return {"version": JSON_VERSION, **Result(event).to_json()}
    try:
        config = load(path, policy=session.policy)
        refuse_store_in_box(session.policy)
    except Untrusted as err:
        raise WireError(wire.REFUSED, str(err)) from err
    except OhConfigError as err:
        raise WireError(wire.CONFIG, str(err)) from err
    try:
        ctx = context_from_args(args, session.policy.project_as_written)
    except ValueError as err:
        raise WireError(wire.INVALID_PARAMS, f"hook_openharness: {err}") from err
    admitted = admit(config, policy=session.policy)
    if admitted.refusals:
        raise WireError(wire.REFUSED, "\n".join(admitted.refusals))
    result = fire(config, event, ctx, runner=session_runner(session, admitted.hooks),
                  cancel=cancel)
    if cancel.is_set():
        raise WireError(wire.INTERRUPTED, f"{event}: interrupted; the running hook was ended")
    return {"version": JSON_VERSION, **result.to_json()}
