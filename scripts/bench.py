"""The performance figures that matter to a harness calling hooks on every tool call.

Every case is measured in the same run, interleaved (one sample of each case per round),
so that a slow moment of the machine falls on all of them alike. Prints a table and
writes the figures as JSON (``--out``, default bench-results.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launchers.config import Config, HookSpec  # noqa: E402
from launchers.hooks import HookRunner  # noqa: E402
from sandbox.backends import host  # noqa: E402
from sandbox.process import supervisor  # noqa: E402
from sandbox.session import Session  # noqa: E402

TRUE = shutil.which("true") or "/bin/true"
CLI = str(Path(sys.executable).parent / "harness-sandbox")

Sample = Callable[[], None]


def timed(fn: Sample) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {"median_ms": round(statistics.median(xs), 3), "p95_ms": round(p95, 3), "n": len(xs)}


def interleave(
    cases: dict[str, Sample], rounds: int, warmup: int = 3
) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(rounds + warmup):
        for name, fn in cases.items():
            t = timed(fn)
            if i >= warmup:
                samples[name].append(t)
    return {k: summary(v) for k, v in samples.items()}


def write_config(folder: Path, hook_dir: Path, n: int) -> Path:
    """A generated config of n hooks, all pointing at one script outside the project."""
    lines = []
    for i in range(n):
        lines += [
            "[[hooks]]",
            f'name = "hook-{i}"',
            'event = "PreToolUse"' if i % 2 == 0 else 'event = "UserPromptSubmit"',
            *(['tools = ["bash", "exec"]'] if i % 2 == 0 else []),
            f'command = ["{hook_dir}/ok.sh", "--rules={hook_dir}/rules.txt"]',
            f"sandbox = {'true' if i % 3 else 'false'}",
            "",
        ]
    path = folder / f"config-{n}.toml"
    path.write_text("\n".join(lines))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a sanity run in under 30 s")
    ap.add_argument("--out", default=str(ROOT / "bench-results.json"))
    opts = ap.parse_args()
    rounds = 15 if opts.quick else 60
    cli_rounds = 8 if opts.quick else 30

    # Hook files live outside the project and outside /tmp (the box's /tmp is the agent's).
    base = Path(tempfile.mkdtemp(prefix="hs-bench-", dir="/var/tmp"))
    project = base / "project"
    project.mkdir()
    hook_dir = base / "hooks"
    hook_dir.mkdir()
    ok = hook_dir / "ok.sh"
    ok.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")
    ok.chmod(0o755)
    (hook_dir / "rules.txt").write_text("rules\n")
    env = {k: v for k, v in os.environ.items()}
    results: dict[str, object] = {}
    try:
        with Session.open(str(project)) as session:
            box_plan = session.plan([TRUE])
            host_plan = host.plan(session.policy, [TRUE])
            spec = HookSpec(name="ok", event="PreToolUse", command=(str(ok),), tools=("bash",))
            runner = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="bench")

            def bare() -> None:
                subprocess.run([TRUE], check=False)

            def bwrap_direct() -> None:
                subprocess.run(list(box_plan.argv), env=dict(box_plan.env), cwd=box_plan.cwd,
                               stdin=subprocess.DEVNULL, check=False)

            def boxed() -> None:
                session.run([TRUE])

            def hook_round_trip() -> None:
                d = runner.pre_tool_use("bash", {"command": "ls"}, tool_use_id="bench")
                assert d.outcome == "allowed", d

            def host_run() -> None:
                supervisor.run(host_plan)

            def cli_run() -> None:
                subprocess.run([CLI, "run", "--project", str(project), "--", TRUE],
                               env=env, check=True)

            inner = interleave(
                {"a_bare_spawn": bare, "b_bwrap_direct": bwrap_direct, "c_library_boxed": boxed,
                 "d_pretooluse_boxed_hook": hook_round_trip, "e_host_runner": host_run},
                rounds * 2,
            )
            results.update(inner)

        outer: dict[str, Sample] = {"f_cli_run_true": cli_run}
        # The peers, where installed, on the same `true` in the same project. A peer that
        # cannot run here is reported as such, not timed.
        peers = {"srt_true": ["srt", TRUE], "codex_sandbox_true": ["codex", "sandbox", "--", TRUE]}
        for name, argv in peers.items():
            exe = shutil.which(argv[0])
            if exe is None:
                continue
            cmd = [exe, *argv[1:]]
            trial = subprocess.run(cmd, cwd=str(project), capture_output=True)
            if trial.returncode != 0:
                results[name] = {"error": trial.stderr.decode(errors="replace")[-300:]}
                continue
            outer[name] = lambda cmd=cmd: subprocess.run(  # type: ignore[misc]
                cmd, cwd=str(project), check=True, capture_output=True)
        results.update(interleave(outer, cli_rounds))

        home = base / "home"
        home.mkdir()
        audit_cases: dict[str, Sample] = {}
        for n in (10, 100, 1000):
            cfg = write_config(home, hook_dir, n)

            def audit(cfg: Path = cfg) -> None:
                r = subprocess.run([CLI, "audit", "--json", "--config", str(cfg),
                                    "--project", str(project)], env=env, capture_output=True)
                assert r.returncode == 0, r.stderr.decode()
            audit_cases[f"g_audit_{n}_hooks"] = audit
        results.update(interleave(audit_cases, max(5, cli_rounds // 3), warmup=1))

        def imports() -> None:
            subprocess.run([sys.executable, "-c", "import launchers.hooks, sandbox.session"],
                           check=True, cwd=str(ROOT))

        def interpreter() -> None:
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        imp = interleave({"h_import": imports, "h_interpreter_alone": interpreter}, cli_rounds)
        alone = imp["h_interpreter_alone"]["median_ms"]
        imp["h_import_package"] = {
            "median_ms": round(imp["h_import"]["median_ms"] - alone, 3),
            "p95_ms": None, "n": imp["h_import"]["n"],
        }
        results.update(imp)

        # Peak memory of one CLI process: a fresh parent whose only child is the CLI.
        def peak_kib(*argv: str) -> int:
            probe = ("import resource, subprocess, sys; "
                     "subprocess.run(sys.argv[1:], capture_output=True); "
                     "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
            out = subprocess.run([sys.executable, "-c", probe, *argv], env=env,
                                 capture_output=True, check=True)
            return int(out.stdout)

        results["cli_peak_rss_kib_run_true"] = peak_kib(
            CLI, "run", "--project", str(project), "--", TRUE)
        results["cli_peak_rss_kib_audit_1000"] = peak_kib(
            CLI, "audit", "--json", "--config", str(home / "config-1000.toml"),
            "--project", str(project))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    def med(k: str) -> float:
        v = results[k]
        assert isinstance(v, dict)
        return float(v["median_ms"])

    derived = {
        "c_minus_b_ms": round(med("c_library_boxed") - med("b_bwrap_direct"), 3),
        "e_minus_a_ms": round(med("e_host_runner") - med("a_bare_spawn"), 3),
    }
    if "median_ms" in results.get("srt_true", {}):  # type: ignore[operator]
        derived["srt_over_f"] = round(med("srt_true") / med("f_cli_run_true"), 2)
    if "median_ms" in results.get("codex_sandbox_true", {}):  # type: ignore[operator]
        derived["codex_over_f"] = round(med("codex_sandbox_true") / med("f_cli_run_true"), 2)
    targets = {
        "c_minus_b_ms < 2": derived["c_minus_b_ms"] < 2,
        "d < 15 ms": med("d_pretooluse_boxed_hook") < 15,
        "e_minus_a_ms < 1.5": derived["e_minus_a_ms"] < 1.5,
        "f < 60 ms": med("f_cli_run_true") < 60,
        "audit of 1,000 hooks < 500 ms": med("g_audit_1000_hooks") < 500,
    }
    doc = {
        "version": 1,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "quick": opts.quick,
        "results": results,
        "derived": derived,
        "targets_met": targets,
    }
    Path(opts.out).write_text(json.dumps(doc, indent=2) + "\n")

    print(f"{'case':32} {'median ms':>10} {'p95 ms':>10} {'n':>5}")
    for k, v in results.items():
        if isinstance(v, dict) and "median_ms" in v:
            p95 = "-" if v["p95_ms"] is None else f"{v['p95_ms']:.2f}"
            print(f"{k:32} {v['median_ms']:>10.2f} {p95:>10} {v['n']:>5}")
        elif isinstance(v, dict):
            print(f"{k:32} could not run: {v['error'].strip().splitlines()[-1:]}")
    for k, v in results.items():
        if not isinstance(v, dict):
            print(f"{k:32} {v:>10}")
    for k, v in derived.items():
        print(f"{k:32} {v:>10}")
    for k, ok_ in targets.items():
        print(f"target {k}: {'met' if ok_ else 'NOT met'}")
    print(f"written: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
