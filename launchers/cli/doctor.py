"""``harness-sandbox doctor``: what this machine can do, and whether the box works.

The report is for people (stderr), ending with a one-line verdict; ``--json`` prints
one document on stdout instead. Exit 0 when the box works, 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.doctor.probe import Probe


def _sysctl(value: int | None) -> str:
    return "not present" if value is None else str(value)


def _other_report(p: Probe) -> list[str]:
    """The report of a box that is not bwrap's: Seatbelt, or the Landlock box with what
    it gives up."""
    lines = [f"{p.backend}: {p.program}"]
    if p.euid == 0:
        lines.append("running as root: run as a normal user where you can")
    if p.backend == "landlock":
        from sandbox.box.kind import BoxKind

        lines.append(BoxKind(p.box, p.box_gives_up).said())
    lines.append(p.verdict)
    if p.fix:
        lines.append(f"fix: {p.fix}")
    return lines


def report(p: object, *, shared_network: bool = False) -> list[str]:
    """The human report's lines for a :class:`sandbox.doctor.probe.Probe`. With
    ``shared_network`` (``[sandbox] network = true``) a box has the host's links, not
    the trial box's own loopback."""
    from sandbox.doctor.probe import Probe

    assert isinstance(p, Probe)
    if p.backend != "bwrap":
        return _other_report(p)
    lines = [f"bwrap: {p.bwrap or 'not found on PATH'}"]
    if p.bwrap:
        lines.append(f"version: {p.version or 'unknown'}")
        notable = ("--disable-userns", "--die-with-parent", "--new-session", "--cap-drop",
                   "--clearenv", "--size")
        lines.append("options: " + ", ".join(
            f"{f} {'yes' if f in p.features else 'no'}" for f in notable))
        lines.append("user namespaces: " + ("ok" if p.userns_ok
                                             else f"failed ({p.userns_error})"))
    lines += [
        "kernel.apparmor_restrict_unprivileged_userns: " + _sysctl(p.apparmor_restrict),
        "user.max_user_namespaces: " + _sysctl(p.max_user_namespaces),
        "kernel.unprivileged_userns_clone: " + _sysctl(p.unprivileged_userns_clone),
    ]
    if shared_network:
        lines.append("network links in a box: the host's (network = true)")
    elif p.links is not None:
        lines.append("network links in a box: " + (", ".join(p.links) or "none"))
    if p.euid == 0:
        lines.append("running as root: the box runs as root's stand-in, an id no account "
                     "has, with root's capabilities only over the files of its own ids; "
                     "run as a normal user where you can")
    who = p.box_identity
    caps = who["capabilities"]
    caps = "no capabilities" if caps == "none" else f"capabilities {caps}"
    lines.append(f"the box runs as: host uid {who['host_uid']}, {caps}; files it "
                 f"makes are owned by {who['files_made_owned_by']}")
    lines.append(f"box: {p.box}" + (f" (weaker here: {'; '.join(p.box_gives_up)})"
                                    if p.box_gives_up else ""))
    verdict = p.verdict
    if shared_network and p.ok:
        verdict = verdict.partition(", network links inside:")[0] + \
            ", network: the host's (network = true)"
    lines.append(verdict)
    if p.fix:
        lines.append(f"fix: {p.fix}")
    return lines


def bound_lines(bounds: list[object]) -> list[str]:
    """One line per protection of the box: in force (how) or not (why)."""
    from sandbox.policy.limits import Bound

    out = []
    for b in bounds:
        assert isinstance(b, Bound)
        out.append(f"{b.name}: in force ({b.how})" if b.state == "in force"
                   else f"{b.name}: not in force: {b.why}")
    return out


def _settings() -> object:
    """The user config's [sandbox] table (defaults when there is none or it is broken:
    doctor reports on the machine, audit reports on the config). It reads it for a
    project in the folder it runs from."""
    import os

    from launchers.config import load, locate
    from launchers.errors import ConfigError
    from sandbox.settings import SandboxSettings

    found = locate(os.environ)
    try:
        # The project is where doctor was asked from, as for the other commands.
        return load(found.path if found else None, project=os.getcwd()).sandbox
    except (ConfigError, OSError):
        return SandboxSettings()


def _caches() -> list[tuple[str, str]]:
    """Where each package manager's cache goes in a box of the project doctor was asked
    from (sandbox/policy/caches.py)."""
    import os

    from sandbox.policy.caches import entries

    home = os.environ.get("HOME") or os.path.expanduser("~")
    return entries(os.path.realpath(os.getcwd()), os.environ, home)


def _warm(settings: object) -> list[str]:
    """Which host caches a box of the project starts warm from (sandbox/policy/layers.py);
    what cannot be said is said so."""
    import os

    from sandbox.errors import PolicyError
    from sandbox.policy import Policy
    from sandbox.policy.layers import lines

    try:
        policy = Policy.from_settings(os.path.realpath(os.getcwd()), settings,  # type: ignore[arg-type]
                                      env=dict(os.environ))
    except (PolicyError, OSError) as err:
        return [f"cache warmth: not known here ({err})"]
    return lines(policy)


def _network_line(backend: str, network: object) -> str:
    """The network a box has here: the Landlock box has no loopback of its own."""
    from sandbox.network.session import mode_line

    if backend != "landlock":
        return mode_line(network)  # type: ignore[arg-type]
    return ("network: all of the host's (network = true)" if network is True else
            "network: none (the Landlock box makes no socket but netlink's)")


def cmd_doctor(args: argparse.Namespace) -> int:
    from sandbox.doctor.inforce import hardening
    from sandbox.doctor.probe import probe
    from sandbox.network.session import mode

    settings = _settings()
    p = probe(box=getattr(settings, "box", "auto"))
    # The Landlock box's bounds are a host run's: said in what it gives up.
    bounds = hardening(settings) if p.ok and p.backend == "bwrap" else []  # type: ignore[arg-type]
    network = settings.network  # type: ignore[attr-defined]
    caches = _caches() if p.ok and p.backend == "bwrap" else []
    warm = _warm(settings) if caches else []
    if args.json:
        doc = {**p.as_dict(), "hardening": [b.as_dict() for b in bounds],
               "network": mode(network),
               "caches": [{"tool": t, "where": w} for t, w in caches], "warm": warm}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        lines = report(p, shared_network=network is True)
        said = [f"cache {t}: {w}" for t, w in caches] + warm
        sys.stderr.write("\n".join([*lines[:-1], *bound_lines(list(bounds)),
                                    *([_network_line(p.backend, network)] if p.ok else []),
                                    *said,
                                    *lines[-1:]]) + "\n")
    return 0 if p.ok else 1
