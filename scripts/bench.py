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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launchers.config import Config, HookSpec  # noqa: E402
from launchers.harness.hooks import HookRunner  # noqa: E402
from sandbox.box import host  # noqa: E402
from sandbox.process import supervisor  # noqa: E402
from sandbox.session import Session  # noqa: E402

TRUE = shutil.which("true") or "/bin/true"
CLI = str(Path(sys.executable).parent / "harness-sandbox")

Sample = Callable[[], None]


def timed(fn: Sample) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def summary(xs: list[float]) -> dict[str, Any]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {"median_ms": round(statistics.median(xs), 3), "p95_ms": round(p95, 3), "n": len(xs)}


def interleave(cases: dict[str, Sample], rounds: int, warmup: int = 3) -> Results:
    return {k: summary(v) for k, v in samples_of(cases, rounds, warmup).items()}


def samples_of(cases: dict[str, Sample], rounds: int, warmup: int = 3
               ) -> dict[str, list[float]]:
    """Each case's times, one sample of each case per round (so sample i of every case
    comes from the same moment of the machine)."""
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(rounds + warmup):
        for name, fn in cases.items():
            t = timed(fn)
            if i >= warmup:
                samples[name].append(t)
    return samples


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


Results = dict[str, Any]


def make_hooks(base: Path) -> Path:
    """A hook that reads its stdin and says nothing, and the rules file the generated
    configs name, outside the project and outside /tmp (the box's /tmp is the agent's)."""
    hook_dir = base / "hooks"
    hook_dir.mkdir()
    ok = hook_dir / "ok.sh"
    ok.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")
    ok.chmod(0o755)
    (hook_dir / "rules.txt").write_text("rules\n")
    return hook_dir


def paired_cost(new: Sample, old: Sample, rounds: int) -> list[float]:
    """Each sample is one run of ``new`` minus the run of ``old`` beside it (in
    alternating order), so a slow moment of the machine falls on both."""
    diffs = []
    for i in range(rounds * 2):
        first, second = (new, old) if i % 2 else (old, new)
        t1, t2 = timed(first), timed(second)
        diffs.append(t1 - t2 if first is new else t2 - t1)
    return diffs


def library_cases(project: Path, hook_dir: Path, rounds: int) -> Results:
    """(a) to (e) and (i): what a harness that embeds the library pays, with a box per
    run (the warm box has its own section below)."""
    with Session.open(str(project), warm=False) as session:
        # The same session's box without the filter and the bounds (the box before they
        # came), for the hardened-vs-old figures; its plan can run many times.
        old = Session(session.policy)
        # bwrap with the box's arguments on its command line (the pure plan: no
        # descriptors, so it can run many times).
        from sandbox.linux import bwrap as bwrap_backend
        from sandbox.linux.bwrap_find import require_box

        box_plan = bwrap_backend.plan(session.policy, [TRUE],
                                      bwrap=require_box(session.policy))
        host_plan = host.plan(session.policy, [TRUE])
        spec = HookSpec(name="ok", event="PreToolUse", command=(str(hook_dir / "ok.sh"),),
                        tools=("bash",))
        runner = HookRunner(Config(path=None, hooks=(spec,)), session, session_id="bench")
        # What each run re-checks before it starts: an interpreter, a script, a file.
        checked = HookSpec(name="pinned", event="PreToolUse", sandbox=False,
                           command=("/bin/sh", str(hook_dir / "ok.sh"),
                                    f"--rules={hook_dir}/rules.txt"))
        pins = HookRunner(Config(path=None, hooks=(checked,)), session,
                          session_id="bench").hooks[0].pins
        assert len(pins.paths) == 3, pins

        def bare() -> None:
            subprocess.run([TRUE], check=False)

        def bwrap_direct() -> None:
            subprocess.run(list(box_plan.argv), env=dict(box_plan.env), cwd=box_plan.cwd,
                           stdin=subprocess.DEVNULL, check=False)

        def boxed() -> None:
            session.run([TRUE])

        def boxed_old() -> None:
            old.run([TRUE])

        def host_session() -> None:
            session.run([TRUE], boxed=False)

        def host_session_old() -> None:
            old.run([TRUE], boxed=False)

        def hook_round_trip() -> None:
            d = runner.pre_tool_use("bash", {"command": "ls"}, tool_use_id="bench")
            assert d.outcome == "allowed", d

        def host_run() -> None:
            supervisor.run(host_plan)

        def identity_recheck() -> None:
            assert pins.changed() is None

        # The filter and bounds' cost, paired.
        paired = {"c_hardened_minus_old_paired": summary(paired_cost(boxed, boxed_old, rounds))}
        return paired | interleave(
            {"a_bare_spawn": bare, "b_bwrap_direct": bwrap_direct, "c_library_boxed": boxed,
             "c_old_library_boxed": boxed_old,
             "d_pretooluse_boxed_hook": hook_round_trip, "e_host_runner": host_run,
             "e_session_host_run": host_session, "e_old_session_host_run": host_session_old,
             "j_identity_recheck_3_paths": identity_recheck},
            rounds * 2,
        )


def git_cases(base: Path, rounds: int) -> Results:
    """(i) opening and closing a session in a git repository (the git layout: host git
    asked three times; the files made over missing protected names; the watchdog told;
    the end-of-session report; all removed), and a boxed ``true`` there."""
    repo = base / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b",
                    "commit", "-q", "--allow-empty", "-m", "b"], check=True)

    def session_open() -> None:
        with Session.open(str(repo)):
            pass

    with Session.open(str(repo)) as session:

        def boxed() -> None:
            session.run([TRUE])

        return interleave({"i_session_open_git": session_open,
                           "c_library_boxed_in_git_repo": boxed}, rounds)


def cli_cases(project: Path, hook_dir: Path, env: dict[str, str], rounds: int) -> Results:
    """(f) ``harness-sandbox run -- true`` and ``hook PreToolUse`` with one boxed hook
    (the same user config for both), beside their floors in the same rounds: a raw
    bwrap with the namespaces of the box and the interpreter alone (started as the
    command starts it); and the peers where installed, on the same ``true`` in the same
    project. A peer that cannot run here is reported, not timed."""
    results: Results = {}
    config = project.parent / "cli-hook.toml"
    config.write_text(f'[[hooks]]\nname = "ok"\nevent = "PreToolUse"\ntools = ["bash"]\n'
                      f'command = ["{hook_dir}/ok.sh"]\n')
    raw = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent",
           "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", TRUE]

    def run(argv: list[str]) -> Sample:
        def once() -> None:
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        return once

    cases: dict[str, Sample] = {
        "f_raw_bwrap_true": run(raw),
        "f_interpreter_alone": run([sys.executable, "-I", "-c", "pass"]),
        "f_cli_run_true": run([CLI, "run", "--config", str(config), "--project", str(project),
                               "--", TRUE]),
        "f_cli_hook_pretooluse": run([CLI, "hook", "PreToolUse", "--tool", "bash",
                                      "--input", "{}", "--config", str(config),
                                      "--project", str(project)]),
    }
    peers = {"srt_true": ["srt", TRUE], "codex_sandbox_true": ["codex", "sandbox", "--", TRUE]}
    for name, argv in peers.items():
        exe = shutil.which(argv[0])
        if exe is None:
            continue
        cmd = [exe, *argv[1:]]
        trial = subprocess.run(cmd, cwd=str(project), capture_output=True, check=False)
        if trial.returncode != 0:
            results[name] = {"error": trial.stderr.decode(errors="replace")[-300:]}
            continue

        def peer(cmd: list[str] = cmd) -> None:
            subprocess.run(cmd, cwd=str(project), check=True, capture_output=True)
        cases[name] = peer
    got = samples_of(cases, rounds)
    results.update({k: summary(v) for k, v in got.items()})
    # Paired: each round's run against the raw bwrap and the hook beside it.
    runs, hooks = got["f_cli_run_true"], got["f_cli_hook_pretooluse"]
    ratios = [r / b for r, b in zip(runs, got["f_raw_bwrap_true"], strict=True)]
    results["f_run_over_raw_bwrap_paired"] = round(statistics.median(ratios), 2)
    results["f_hook_minus_run_paired"] = summary([h - r for h, r in zip(hooks, runs, strict=True)])
    return results


def audit_cases(project: Path, home: Path, hook_dir: Path, env: dict[str, str],
                rounds: int) -> Results:
    """(g) ``audit --json`` over generated configs of 10, 100 and 1,000 hooks."""
    cases: dict[str, Sample] = {}
    for n in (10, 100, 1000):
        cfg = write_config(home, hook_dir, n)

        def audit(cfg: Path = cfg) -> None:
            r = subprocess.run([CLI, "audit", "--json", "--config", str(cfg),
                                "--project", str(project)], env=env, capture_output=True,
                               check=False)
            assert r.returncode == 0, r.stderr.decode()
        cases[f"g_audit_{n}_hooks"] = audit
    return interleave(cases, max(5, rounds // 3), warmup=1)


def import_cases(rounds: int) -> Results:
    """(h) importing the package, over a bare interpreter."""
    def imports() -> None:
        subprocess.run([sys.executable, "-c", "import launchers.harness.hooks, sandbox.session"],
                       check=True, cwd=str(ROOT))

    def interpreter() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    imp = interleave({"h_import": imports, "h_interpreter_alone": interpreter}, rounds)
    alone = imp["h_interpreter_alone"]["median_ms"]
    return {**imp, "h_import_package": {
        "median_ms": round(imp["h_import"]["median_ms"] - alone, 3),
        "p95_ms": None, "n": imp["h_import"]["n"],
    }}


def peak_kib(env: dict[str, str], *argv: str) -> int:
    """Peak memory of one CLI process: a fresh parent whose only child is the CLI."""
    probe = ("import resource, subprocess, sys; "
             "subprocess.run(sys.argv[1:], capture_output=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], env=env,
                         capture_output=True, check=True)
    return int(out.stdout)


# -- the network allow-list (sandbox/network/) -----------------------------------------


def network_cases(base: Path, rounds: int) -> Results:
    """(n) what the allow-list's proxy costs: a session's open and close with a list
    against one without, paired; and 100 MB from a server on 127.0.0.1, fetched by curl
    through the session's proxy in the box against the same fetch on the host."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.origin import serving

    from sandbox.settings import SandboxSettings

    project = base / "net-project"
    project.mkdir()
    site = base / "net-site"
    site.mkdir()
    size = 100 << 20
    with open(site / "big", "wb") as f:
        f.truncate(size)  # sparse: the disk is not what is measured
    results: Results = {}
    with serving(site) as port:
        listed = SandboxSettings(network=(f"127.0.0.1:{port}",))

        def open_plain() -> None:
            with Session.open(str(project)):
                pass

        def open_listed() -> None:
            with Session.open(str(project), listed):
                pass

        results.update(interleave({"n_session_open_no_network": open_plain,
                                   "n_session_open_allow_list": open_listed}, rounds))
        curl = ["curl", "-sS", "-o", "/dev/null", f"http://127.0.0.1:{port}/big"]
        with Session.open(str(project), listed) as session:

            def boxed() -> None:
                r = session.run(curl, timeout=120)
                assert r.ok, r.stderr

            def host() -> None:
                subprocess.run(curl, check=True, env={"PATH": "/usr/bin:/bin"})

            got = interleave({"n_100mb_through_proxy": boxed, "n_100mb_on_host": host},
                             max(3, rounds // 5), warmup=1)
        for k in ("n_100mb_through_proxy", "n_100mb_on_host"):
            got[k]["mb_per_s"] = round(100 / (got[k]["median_ms"] / 1000), 1)
        results.update(got)
    return results


# -- a repository with many git folders (sandbox/git/dirs.py, sandbox/git/views.py) ---


def scale_cases(base: Path, rounds: int, modules: int = 200) -> Results:
    """(s) a repository with ``modules`` submodules: a session's open and close, and a
    boxed ``true`` there, beside the same in a plain folder (paired)."""
    subs = base / "scale-subs"
    subs.mkdir()
    repo = base / "scale-repo"
    ident = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(modules):
        sub = subs / f"m{i}"
        subprocess.run(["git", "init", "-q", str(sub)], check=True)
        subprocess.run(["git", "-C", str(sub), *ident, "commit", "-q", "--allow-empty",
                        "-m", "m"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "protocol.file.allow=always",
                        "submodule", "add", "-q", str(sub), f"m{i}"], check=True,
                       capture_output=True)
    subprocess.run(["git", "-C", str(repo), *ident, "commit", "-qm", "subs"], check=True)
    plain = base / "scale-plain"
    plain.mkdir()

    def opened(where: Path) -> Sample:
        def once() -> None:
            with Session.open(str(where)):
                pass
        return once

    results = interleave({"s_session_open_200_modules": opened(repo),
                          "s_session_open_plain_folder": opened(plain)}, rounds, warmup=1)
    with Session.open(str(repo)) as many, Session.open(str(plain)) as few:

        def in_many() -> None:
            many.run([TRUE])

        def in_few() -> None:
            few.run([TRUE])

        results.update(interleave({"s_boxed_true_200_modules": in_many,
                                   "s_boxed_true_plain_folder": in_few},
                                  max(2, rounds // 3), warmup=1))
        # The same with a pause before each run, as an agent's runs come: then each
        # finds a run made ahead, and what the 1,400 mounts cost a run being made
        # (its mount namespace copies them) is off the run's path.
        paced: dict[str, list[float]] = {"s_boxed_true_200_modules_paced": [],
                                         "s_boxed_true_plain_folder_paced": []}
        for _ in range(max(2, rounds // 3) + 1):
            for name, fn in zip(paced, (in_many, in_few), strict=True):
                time.sleep(PAUSE)
                paced[name].append(timed(fn))
        results.update({k: summary(v[1:]) for k, v in paced.items()})
    return results


# The pause before each paced run: more than the warm box's IDLE, after which it makes
# runs ahead again.
PAUSE = 0.02


# -- serve, from the Node.js client (examples/node-harness/bench.mjs) ----------------


def serve_cases(rounds: int) -> Results:
    """(v) ``harness-sandbox serve`` as a Node.js harness meets it: a boxed ``true`` and a
    boxed PreToolUse hook round-trip (medians), and 1,000 runs in flight at once."""
    node = shutil.which("node")
    if node is None:
        return {"v_serve": {"error": "node is not installed"}}
    done = subprocess.run([node, str(ROOT / "examples" / "node-harness" / "bench.mjs"),
                           str(rounds), CLI], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"v_serve": {"error": done.stderr or done.stdout}}
    got = json.loads(done.stdout)
    return {"v_serve_boxed_true": {"median_ms": got["serve_boxed_true_ms"], "p95_ms": None,
                                   "n": rounds},
            "v_serve_pretooluse_hook": {"median_ms": got["serve_pretooluse_hook_ms"],
                                        "p95_ms": None, "n": rounds},
            "v_serve_1000_in_flight_ok": got["in_flight_1000_ok"],
            "v_serve_1000_in_flight_ms": got["in_flight_1000_ms"]}


# -- the warm box (sandbox/linux/warm/) --------------------------------------------------------


def settled(session: Session, seconds: float = 10.0) -> None:
    """Until the warm box holds all its runs made ahead (each holds a descriptor)."""
    from sandbox.linux.warm.client import SPARE

    deadline = time.monotonic() + seconds
    while session.warm is not None and session.warm.made_ahead < SPARE \
            and time.monotonic() < deadline:
        time.sleep(0.01)


def warm_cases(project: Path, hook_dir: Path, rounds: int) -> Results:
    """(w) a boxed ``/bin/true`` through ``Session.run`` in a session's warm box, against
    a bare spawn and the box per run (``warm=False``), interleaved; a boxed PreToolUse
    hook through the warm box; 64 boxed runs at once from threads on one session."""
    import threading

    spec = HookSpec(name="ok", event="PreToolUse", command=(str(hook_dir / "ok.sh"),),
                    tools=("bash",))
    with Session.open(str(project)) as warm, \
            Session.open(str(project), warm=False) as cold:
        assert warm.warm is not None and cold.warm is None
        runner = HookRunner(Config(path=None, hooks=(spec,)), warm, session_id="bench")
        # The same round-trip with a hook that is one program (it reads nothing and
        # answers nothing: allowed), so the runner's cost stands over one spawn.
        one = HookSpec(name="one", event="PreToolUse", command=(TRUE,), tools=("bash",))
        one_runner = HookRunner(Config(path=None, hooks=(one,)), warm, session_id="bench")

        def bare() -> None:
            subprocess.run([TRUE], check=False)

        def warm_true() -> None:
            r = warm.run([TRUE])
            assert r.ok, r

        def cold_true() -> None:
            r = cold.run([TRUE])
            assert r.ok, r

        def bare_hook_script() -> None:
            # The hook's own floor: its script (a sh and a cat) started bare, with stdin.
            subprocess.run([str(hook_dir / "ok.sh")], input=b'{"hook_event_name": "x"}',
                           check=False)

        def warm_hook() -> None:
            d = runner.pre_tool_use("bash", {"command": "ls"}, tool_use_id="bench")
            assert d.outcome == "allowed", d

        def warm_one_hook() -> None:
            d = one_runner.pre_tool_use("bash", {"command": "ls"}, tool_use_id="bench")
            assert d.outcome == "allowed", d

        results = interleave({"w_bare_spawn": bare, "w_bare_hook_script": bare_hook_script,
                              "w_warm_session_run_true": warm_true,
                              "w_cold_session_run_true": cold_true,
                              "w_warm_pretooluse_boxed_hook": warm_hook,
                              "w_warm_pretooluse_one_program_hook": warm_one_hook}, rounds)
        settled(warm)
        fds = len(os.listdir("/proc/self/fd"))
        t0 = time.perf_counter()
        threads = [threading.Thread(target=warm_true) for _ in range(64)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        took = time.perf_counter() - t0
        results["w_64_concurrent_runs_per_s"] = round(64 / took, 1)
        settled(warm)
        results["w_64_concurrent_fds_left"] = len(os.listdir("/proc/self/fd")) - fds
    return results


def landlock_cases(project: Path, rounds: int) -> Results:
    """(l) The box without namespaces (``[sandbox] box = "landlock"``): a boxed
    ``/bin/true`` through ``Session.run``, against its floors (a bare spawn, the
    interpreter's start its wrapper pays) and the namespace box per run, interleaved."""
    from sandbox.linux import landlock
    from sandbox.settings import SandboxSettings

    if landlock.abi() < landlock.NEEDED_ABI:
        return {"l_landlock": {"error": "this kernel's Landlock lacks ABI 6"}}
    python = os.path.realpath(sys.executable)
    with Session.open(str(project), SandboxSettings(box="landlock")) as boxed, \
            Session.open(str(project), warm=False) as cold:

        def bare() -> None:
            subprocess.run([TRUE], check=False)

        def interpreter() -> None:
            subprocess.run([python, "-I", "-S", "-c", "pass"], check=False)

        def landlock_true() -> None:
            r = boxed.run([TRUE])
            assert r.ok, r

        def cold_true() -> None:
            r = cold.run([TRUE])
            assert r.ok, r

        return interleave({"l_bare_spawn": bare, "l_interpreter_start": interpreter,
                           "l_landlock_session_run_true": landlock_true,
                           "l_namespace_box_per_run_true": cold_true}, rounds)


# -- real package work, boxed against bare (issue: real work runs in the box as it runs bare)

# The registries, marked private: on a machine whose resolver answers a reserved address
# for them (a mirror), an unmarked name would reach nothing (sandbox/network/allow.py).
REGISTRIES = ("registry.npmjs.org (private)", "pypi.org (private)",
              "files.pythonhosted.org (private)")
NPM_PROJECT = {"name": "bench-packages", "version": "1.0.0", "private": True,
               "dependencies": {"is-number": "7.0.0", "left-pad": "1.3.0", "ms": "2.1.3"}}
PIP_REQUIREMENTS = "six==1.16.0\nidna==3.7\npackaging==24.1\n"
PIP = (".venv/bin/pip", "install", "-q", "-r", "req.txt")
# The second pip install: all three again from the session's warm cache, over the ones
# installed (pinned, without dependencies of their own: --no-deps leaves nothing out).
PIP_AGAIN = (*PIP, "--force-reinstall", "--no-deps")
NPM_CI = ("npm", "ci", "--loglevel=error")


def package_env(home: Path) -> dict[str, str]:
    """The one environment of both sides: a home of their own (so npm's and pip's caches
    start empty), the host's certificates, and no pip config (this machine's names a
    folder of wheels, which would stand in for the registry)."""
    keep = ("PATH", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
            "PIP_CERT", "REQUESTS_CA_BUNDLE")
    home.mkdir()
    return {**{k: os.environ[k] for k in keep if k in os.environ}, "HOME": str(home),
            "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1", "npm_config_audit": "false", "npm_config_fund": "false",
            "npm_config_update_notifier": "false"}


def package_projects(base: Path) -> tuple[Path, ...]:
    """Three copies of one project (a package.json, its lock, made bare once with a cache
    of its own, and a requirements file), each with its venv: one run bare, one boxed, one
    boxed with the bare side's home (its caches warm)."""
    template = base / "pkg-template"
    template.mkdir()
    (template / "package.json").write_text(json.dumps(NPM_PROJECT, indent=2) + "\n")
    (template / "req.txt").write_text(PIP_REQUIREMENTS)
    env = {**package_env(base / "lock-home"), "npm_config_cache": str(base / "lock-cache")}
    subprocess.run(["npm", "install", "--package-lock-only", "--silent"], cwd=template,
                   env=env, check=True, capture_output=True, timeout=300)
    copies = base / "pkg-bare", base / "pkg-boxed", base / "pkg-warm"
    for copy in copies:
        shutil.copytree(template, copy)
        subprocess.run(["/usr/bin/python3", "-m", "venv", ".venv"], cwd=copy, check=True,
                       capture_output=True, timeout=300)
    return copies


def _bare(argv: tuple[str, ...], cwd: Path, env: dict[str, str]) -> Sample:
    def sample() -> None:
        r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=600)
        if r.returncode:
            err = r.stderr.decode(errors="replace")[-400:]
            raise RuntimeError(f"bare {' '.join(argv)}: exit {r.returncode}: {err}")
    return sample


def _boxed(session: Session, argv: tuple[str, ...]) -> Sample:
    def sample() -> None:
        r = session.run(list(argv), timeout=600)
        if not r.ok:
            err = r.stderr.decode(errors="replace")[-400:]
            raise RuntimeError(f"boxed {' '.join(argv)}: exit {r.exit}: {err}")
    return sample


def tool_cases(key: str, first: tuple[Sample, Sample], again: tuple[Sample, Sample],
               rounds: int) -> Results:
    """One tool: its first run bare then boxed (each cache cold), once; then its second
    run, bare and boxed interleaved (each cache warm from the first)."""
    results: Results = {f"{key}_first_bare": summary([timed(first[0])]),
                        f"{key}_first_boxed": summary([timed(first[1])])}
    results.update(interleave({f"{key}_second_bare": again[0],
                               f"{key}_second_boxed": again[1]}, rounds, warmup=0))
    return results


def package_cases(base: Path, rounds: int) -> Results:
    """(p) Real package work, boxed against bare: a second ``npm ci`` (it removes
    node_modules itself) and a second ``pip install`` (``--force-reinstall --no-deps`` of
    the pinned requirements: each package taken out and put back from the warm cache, as
    ``npm ci`` does) in one session, from the registries (allowed by name, private), each
    side with a cache of its own that its first run warms (pip keeps a wheel only where
    the server's headers let it: else each run downloads again, boxed through the
    session's proxy). A tool that fails says so."""
    from sandbox.settings import SandboxSettings

    if shutil.which("npm") is None or not os.path.exists("/usr/bin/python3"):
        return {"p_packages": {"error": "npm or /usr/bin/python3 is not installed"}}
    try:
        bare_dir, boxed_dir, warm_dir = package_projects(base)
    except (OSError, subprocess.SubprocessError) as e:
        err = getattr(e, "stderr", b"") or b""
        return {"p_packages": {"error": f"{e}: {err.decode(errors='replace')[-300:]}"}}
    env = package_env(base / "bare-home")
    results: Results = {}
    try:
        with Session.open(str(boxed_dir), SandboxSettings(network=REGISTRIES),
                          env=package_env(base / "boxed-home")) as session:
            for key, first, again in (("p_npm_ci", NPM_CI, NPM_CI),
                                      ("p_pip_install", PIP, PIP_AGAIN)):
                try:
                    results.update(tool_cases(
                        key, (_bare(first, bare_dir, env), _boxed(session, first)),
                        (_bare(again, bare_dir, env), _boxed(session, again)), rounds))
                except Exception as e:  # the other tool is still measured
                    results[key] = {"error": str(e)}
        # A new project's first npm ci, boxed, where the host's cache is warm (the bare
        # side's home): laid under the box's (sandbox/policy/layers.py).
        with Session.open(str(warm_dir), SandboxSettings(network=REGISTRIES),
                          env=env) as session:
            results["p_npm_ci_first_boxed_host_warm"] = summary(
                [timed(_boxed(session, NPM_CI))])
    except Exception as e:  # the session could not open: the section says so, never raises
        results["p_packages"] = {"error": f"{type(e).__name__}: {e}"}
    return results


SECTIONS = ("library", "warm", "git", "cli", "audit", "import", "network", "scale", "serve",
            "stage", "memory", "landlock", "packages")


def measure(quick: bool, only: frozenset[str] = frozenset(SECTIONS)) -> Results:
    rounds = 15 if quick else 60
    cli_rounds = 8 if quick else 30
    base = Path(tempfile.mkdtemp(prefix="hs-bench-", dir="/var/tmp"))
    project = base / "project"
    project.mkdir()
    home = base / "home"
    home.mkdir()
    env = dict(os.environ)
    results: Results = {}
    try:
        hook_dir = make_hooks(base)
        sections: dict[str, Callable[[], Results]] = {
            "library": lambda: library_cases(project, hook_dir, rounds),
            "warm": lambda: warm_cases(project, hook_dir, rounds),
            "git": lambda: git_cases(base, rounds),
            "cli": lambda: cli_cases(project, hook_dir, env, cli_rounds),
            "audit": lambda: audit_cases(project, home, hook_dir, env, cli_rounds),
            "import": lambda: import_cases(cli_rounds),
            "network": lambda: network_cases(base, cli_rounds),
            "scale": lambda: scale_cases(base, cli_rounds),
            "serve": lambda: serve_cases(rounds),
            "stage": lambda: stage_cases(base, rounds),
            "memory": lambda: memory_cases(project, home, env),
            "landlock": lambda: landlock_cases(project, rounds),
            "packages": lambda: package_cases(base, 3 if quick else 5),
        }
        for name, section in sections.items():
            if name in only:
                results.update(section())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def stage_cases(base: Path, rounds: int) -> Results:
    """(t) What the session's stage costs (sandbox/linux/stage.py): making it with no
    bind (root's stand-in as root: its user namespace, the idmapped folders), and the
    ``nsenter`` that starts each of its boxes, beside a bare spawn (paired)."""
    from sandbox.linux import stage, standin

    folder = base / "stage-tmp"
    folder.mkdir()
    root = standin.needed()
    nsenter = standin.nsenter()

    def made() -> None:
        stage.Stage.open((str(folder),), (), stand_in=root).close()

    def spawn(*argv: str) -> Sample:
        def sample() -> None:
            subprocess.run(argv, check=True)
        return sample

    return interleave({
        "t_stage_open_close": made,
        "t_nsenter_true": spawn(nsenter, "--", TRUE),
        "t_bare_true": spawn(TRUE),
    }, rounds)


def memory_cases(project: Path, home: Path, env: dict[str, str]) -> Results:
    """Peak memory of ``run -- true`` and of an audit of 1,000 hooks."""
    config = home / "config-1000.toml"
    if not config.exists():
        write_config(home, make_hooks(home), 1000)
    return {
        "cli_peak_rss_kib_run_true": peak_kib(env, CLI, "run", "--project", str(project),
                                              "--", TRUE),
        "cli_peak_rss_kib_audit_1000": peak_kib(env, CLI, "audit", "--json", "--config",
                                                str(config), "--project", str(project)),
    }


def _diff(a: str, b: str) -> tuple[tuple[str, ...], Callable[[Callable[[str], float]], float]]:
    return (a, b), lambda med: round(med(a) - med(b), 3)


def _ratio(a: str, b: str) -> tuple[tuple[str, ...], Callable[[Callable[[str], float]], float]]:
    return (a, b), lambda med: round(med(a) / med(b), 2)


# Each derived figure: the cases it needs, and how it is made from their medians.
DERIVED = {
    "c_minus_b_ms": _diff("c_library_boxed", "b_bwrap_direct"),
    "e_minus_a_ms": _diff("e_host_runner", "a_bare_spawn"),
    "s_boxed_200_modules_over_plain": _ratio("s_boxed_true_200_modules",
                                             "s_boxed_true_plain_folder"),
    "s_boxed_200_modules_over_plain_paced": _ratio("s_boxed_true_200_modules_paced",
                                                   "s_boxed_true_plain_folder_paced"),
    "n_allow_list_open_minus_plain_ms": _diff("n_session_open_allow_list",
                                              "n_session_open_no_network"),
    "n_proxy_over_host_download": _ratio("n_100mb_through_proxy", "n_100mb_on_host"),
    "hardened_box_minus_old_ms": _diff("c_library_boxed", "c_old_library_boxed"),
    "host_cgroup_minus_old_ms": _diff("e_session_host_run", "e_old_session_host_run"),
    "w_warm_over_bare": _ratio("w_warm_session_run_true", "w_bare_spawn"),
    "l_landlock_over_bare": _ratio("l_landlock_session_run_true", "l_bare_spawn"),
    "l_landlock_over_interpreter": _ratio("l_landlock_session_run_true",
                                          "l_interpreter_start"),
    "l_landlock_over_namespace_box": _ratio("l_landlock_session_run_true",
                                            "l_namespace_box_per_run_true"),
    "p_npm_ci_boxed_over_bare": _ratio("p_npm_ci_second_boxed", "p_npm_ci_second_bare"),
    "p_npm_ci_first_host_warm_over_bare_second": _ratio("p_npm_ci_first_boxed_host_warm",
                                                        "p_npm_ci_second_bare"),
    "p_pip_install_boxed_over_bare": _ratio("p_pip_install_second_boxed",
                                            "p_pip_install_second_bare"),
    "w_cold_over_bare": _ratio("w_cold_session_run_true", "w_bare_spawn"),
    "w_cold_over_warm": _ratio("w_cold_session_run_true", "w_warm_session_run_true"),
    "w_warm_hook_over_bare": _ratio("w_warm_pretooluse_boxed_hook", "w_bare_spawn"),
    "w_warm_one_program_hook_over_bare": _ratio("w_warm_pretooluse_one_program_hook",
                                                "w_bare_spawn"),
    "w_warm_hook_over_its_script": _ratio("w_warm_pretooluse_boxed_hook",
                                          "w_bare_hook_script"),
    "f_run_over_raw_bwrap": _ratio("f_cli_run_true", "f_raw_bwrap_true"),
    "f_run_over_interpreter": _ratio("f_cli_run_true", "f_interpreter_alone"),
    "f_hook_minus_run_ms": _diff("f_cli_hook_pretooluse", "f_cli_run_true"),
    "srt_over_f": _ratio("srt_true", "f_cli_run_true"),
    "codex_over_f": _ratio("codex_sandbox_true", "f_cli_run_true"),
}

# Each target: the cases or derived figures it reads, and whether it is met.
TARGETS: dict[str, tuple[tuple[str, ...], Callable[[Callable[[str], float]], bool]]] = {
    "c_minus_b_ms < 2": (("c_minus_b_ms",), lambda v: v("c_minus_b_ms") < 2),
    "d < 15 ms": (("d_pretooluse_boxed_hook",), lambda v: v("d_pretooluse_boxed_hook") < 15),
    "e_minus_a_ms < 1.5": (("e_minus_a_ms",), lambda v: v("e_minus_a_ms") < 1.5),
    "filter and bounds add < 1 ms per boxed run (paired)": (
        ("c_hardened_minus_old_paired",), lambda v: v("c_hardened_minus_old_paired") < 1),
    "identity re-check < 0.2 ms": (("j_identity_recheck_3_paths",),
                                   lambda v: v("j_identity_recheck_3_paths") < 0.2),
    "audit of 1,000 hooks < 500 ms": (("g_audit_1000_hooks",),
                                      lambda v: v("g_audit_1000_hooks") < 500),
    "session open in a git repository < 30 ms": (("i_session_open_git",),
                                                 lambda v: v("i_session_open_git") < 30),
    "warm boxed /bin/true < 2x a bare spawn": (("w_warm_over_bare",),
                                               lambda v: v("w_warm_over_bare") < 2),
    "warm boxed hook < 3x a bare spawn": (("w_warm_hook_over_bare",),
                                          lambda v: v("w_warm_hook_over_bare") < 3),
    "warm boxed hook of one program < 3x a bare spawn": (
        ("w_warm_one_program_hook_over_bare",),
        lambda v: v("w_warm_one_program_hook_over_bare") < 3),
    "session open with 200 git modules < 150 ms": (
        ("s_session_open_200_modules",), lambda v: v("s_session_open_200_modules") < 150),
    "boxed run with 200 git modules <= 2x a plain folder, paced": (
        ("s_boxed_200_modules_over_plain_paced",),
        lambda v: v("s_boxed_200_modules_over_plain_paced") <= 2),
    "CLI run <= 4x a raw bwrap (paired)": (
        ("f_run_over_raw_bwrap_paired",), lambda v: v("f_run_over_raw_bwrap_paired") <= 4),
    "CLI hook <= CLI run + 5 ms (paired)": (
        ("f_hook_minus_run_paired",), lambda v: v("f_hook_minus_run_paired") <= 5),
}


def derive(results: Results) -> tuple[dict[str, float], dict[str, bool]]:
    """The differences and ratios the docs quote, and whether each target is met, for
    the cases measured (``--only`` measures some)."""
    def med(k: str) -> float:
        v = results[k]
        return float(v if isinstance(v, float | int) else v["median_ms"])

    def measured(k: str) -> bool:
        v = results.get(k)
        return isinstance(v, float | int) or (isinstance(v, dict) and "median_ms" in v)

    derived = {name: make(med) for name, (needs, make) in DERIVED.items()
               if all(map(measured, needs))}

    def value(k: str) -> float:
        return derived[k] if k in derived else med(k)

    targets = {name: met(value) for name, (needs, met) in TARGETS.items()
               if all(k in derived or measured(k) for k in needs)}
    return derived, targets


def print_table(results: Results, derived: dict[str, float],
                targets: dict[str, bool]) -> None:
    print(f"{'case':32} {'median ms':>10} {'p95 ms':>10} {'n':>5}")
    for k, v in results.items():
        if isinstance(v, dict) and "median_ms" in v:
            p95 = "-" if v["p95_ms"] is None else f"{v['p95_ms']:.2f}"
            print(f"{k:32} {v['median_ms']:>10.3f} {p95:>10} {v['n']:>5}")
        elif isinstance(v, dict):
            print(f"{k:32} could not run: {v['error'].strip().splitlines()[-1:]}")
    for k, v in results.items():
        if not isinstance(v, dict):
            print(f"{k:32} {v:>10}")
    for k, d in derived.items():
        print(f"{k:32} {d:>10}")
    for k, met in targets.items():
        print(f"target {k}: {'met' if met else 'NOT met'}")
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a sanity run in under 30 s")
    ap.add_argument("--out", default=str(ROOT / "bench-results.json"))
    ap.add_argument("--only", metavar="SECTION[,SECTION]",
                    help=f"measure only these sections: {', '.join(SECTIONS)}")
    opts = ap.parse_args()
    only = frozenset(SECTIONS if opts.only is None else opts.only.split(","))
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section {', '.join(sorted(unknown))}; the sections are "
                 f"{', '.join(SECTIONS)}")
    results = measure(opts.quick, only)
    derived, targets = derive(results)
    doc = {
        "version": 1,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "quick": opts.quick,
        "sections": sorted(only),
        "load_average": os.getloadavg(),
        "results": results,
        "derived": derived,
        "targets_met": targets,
    }
    Path(opts.out).write_text(json.dumps(doc, indent=2) + "\n")
    print_table(results, derived, targets)
    print(f"written: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
