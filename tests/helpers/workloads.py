"""Real work, bare and boxed (issue 41): a workload is a bash snippet of everyday
developer work; :func:`check` runs it bare (``bash -c`` with the project as its working
directory) and boxed through one entry point (the CLI's ``run``, ``serve``, the library's
:class:`~sandbox.session.Session`), each in a fresh copy of the same fixture project at
the same path, and compares the exit status, stdout and the tree left behind.

A workload the box stops on purpose names that boundary (``boundary``) and what the box
says when it is hit (``said``, found in the run's hint or the session's warnings: the
result's ``hint`` and ``close``'s ``warnings`` in ``serve``, ``RunResult.hint`` and
``Session.warnings`` in the library, the CLI's own lines on its stderr, ``hint:`` and
the warnings). A workload that does
not match today and is no boundary carries its cause in ``mismatch``, per user (the
tests as root, or as a plain user) and entry point; :func:`cases` makes those strict
xfails, so that a fix is noticed.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from helpers.serve_client import Serve
from sandbox.process.pty import TtySize
from sandbox.session import Session

ENTRIES = ("cli", "serve", "library")
USER = "root" if os.geteuid() == 0 else "user"
CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
COLS, ROWS = 80, 24
TIMEOUT = 120.0
# Files whose bytes hold the moment or the inode they were made at, not the work's
# result: only that they exist (and their mode) is compared.
VOLATILE = ("*.pyc", ".git/index", ".git/worktrees/*/index", "*.o.d")


class Workload(NamedTuple):
    """One piece of work: ``script`` for ``bash -c`` in a copy of ``project`` (the
    template's name: ``plain`` or ``repo``), ``stdin`` on its standard input, on a
    terminal of its own when ``tty``. ``needs``: programs it cannot do without (the case
    is skipped, naming them, where one is missing). ``boundary``: the box stops it on
    purpose, and why; ``said``: what the box says then (None: it says nothing
    today, a strict xfail). ``mismatch``: {"root" | "user" | "*": {entry | "*":
    cause}} for what differs today and is no boundary. ``volatile``: patterns of files
    whose bytes hold the moment they were built (an archive's dates), compared as
    :data:`VOLATILE` is. ``ignore``: paths left out of the tree's comparison, where
    another workload compares them. ``before``: a script run bare in the fresh copy and
    home first, for bare and boxed runs alike (the host's state the work starts from:
    a warm cache)."""

    name: str
    script: str
    project: str = "plain"
    stdin: bytes = b""
    tty: bool = False
    needs: tuple[str, ...] = ()
    boundary: str = ""
    said: str | None = None
    mismatch: Mapping[str, Mapping[str, str]] = {}
    volatile: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    before: str = ""


class Unsaid(AssertionError):
    """A boundary was hit and the box said nothing of it."""


class Outcome(NamedTuple):
    """What a run gave: its exit status, stdout, stderr, and what the box said of it:
    the run's hint and the session's warnings (the CLI's own lines on stderr)."""

    code: int
    stdout: bytes
    stderr: bytes
    said: str = ""


class Ran(NamedTuple):
    """A run and the tree it left in its project."""

    outcome: Outcome
    tree: dict[str, tuple[Any, ...]]


def _mismatch(work: Workload, entry: str) -> str:
    for user in (USER, "*"):
        causes = work.mismatch.get(user, {})
        for key in (entry, "*"):
            if key in causes:
                return causes[key]
    return ""


def cases(works: Sequence[Workload]) -> pytest.MarkDecorator:
    """``work`` and ``entry`` for a test: each workload through each entry point, a
    known mismatch a strict xfail, a boundary the box does not explain one too."""
    params = []
    for work in works:
        for entry in ENTRIES:
            marks: list[pytest.MarkDecorator] = []
            cause = _mismatch(work, entry)
            if cause:
                marks.append(pytest.mark.xfail(strict=True, reason=cause))
            elif work.boundary and work.said is None:
                marks.append(pytest.mark.xfail(
                    strict=True, raises=Unsaid,
                    reason=f"boundary hit and not said: {work.boundary}"))
            missing = [n for n in work.needs if shutil.which(n) is None]
            if missing:
                marks.append(pytest.mark.skip(
                    reason=f"{', '.join(missing)} not installed here"))
            params.append(pytest.param(work, entry, marks=marks,
                                       id=f"{entry}-{work.name}"))
    return pytest.mark.parametrize(("work", "entry"), params)


def base_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of every run, bare and boxed: a home of the case's own, a fixed
    PATH, a git identity and clock (so that commits are the same bytes), and ``extra``."""
    env = {
        "HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
        "TERM": "xterm-256color", "TMPDIR": "/tmp", "USER": os.environ.get("USER", ""),
        "HARNESS_HOME": str(home.parent / "harness-home"),
        "GIT_AUTHOR_NAME": "Work Load", "GIT_AUTHOR_EMAIL": "work@example.invalid",
        "GIT_COMMITTER_NAME": "Work Load", "GIT_COMMITTER_EMAIL": "work@example.invalid",
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1",
        "npm_config_update_notifier": "false", "npm_config_fund": "false",
        "npm_config_audit": "false",
    }
    env.update(extra)
    return env


def fresh(place: Path, template: Path) -> tuple[Path, Path]:
    """A fresh copy of ``template`` at ``place/proj`` and a fresh home beside it, with
    a key in ``~/.ssh`` (hidden from the box)."""
    for name in ("proj", "home", "harness-home"):
        if (place / name).exists():
            subprocess.run(["chmod", "-R", "u+rwx", str(place / name)], check=False)
            shutil.rmtree(place / name)
    shutil.copytree(template, place / "proj", symlinks=True)
    (place / "home" / ".ssh").mkdir(parents=True)
    (place / "home" / ".ssh" / "id_test").write_text("not-a-real-key\n")
    (place / "harness-home").mkdir()
    return place / "proj", place / "home"


def _volatile(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p)
               for p in patterns)


def tree(root: Path, volatile: Sequence[str] = ()) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: its kind, permission bits, owner and content (a
    file's digest, a link's target; not of the files :data:`VOLATILE` and
    ``volatile`` name), by path relative to ``root``."""
    out: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            mode = st.st_mode & 0o7777
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path), st.st_uid)
            elif os.path.isdir(path):
                out[rel] = ("dir", oct(mode), st.st_uid)
            elif os.path.isfile(path):
                digest = "" if _volatile(rel, (*VOLATILE, *volatile)) else _digest(path)
                out[rel] = ("file", oct(mode), st.st_uid, digest)
            else:
                out[rel] = ("other", oct(mode), st.st_uid)
    return out


def _digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except PermissionError:
        return "unreadable"


def _tty_bare(argv: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
    """``argv`` on a pty of COLS x ROWS, its controlling terminal: the bare run of a
    ``tty`` workload, as a terminal emulator starts a shell."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))

    def controlling() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True,
                            preexec_fn=controlling)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's far end has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return Outcome(proc.wait(TIMEOUT), b"".join(chunks), b"")


def bare(work: Workload, project: Path, env: dict[str, str]) -> Outcome:
    argv = ["bash", "-c", work.script]
    if work.tty:
        return _tty_bare(argv, project, env)
    r = subprocess.run(argv, cwd=project, env=env, input=work.stdin, capture_output=True,
                       timeout=TIMEOUT, check=False)
    return Outcome(r.returncode, r.stdout, r.stderr)


def by_cli(work: Workload, project: Path, env: dict[str, str]) -> Outcome:
    tty = ["--tty", "--tty-size", f"{COLS}x{ROWS}"] if work.tty else []
    r = subprocess.run([CLI, "run", "--project", str(project), *tty, "--",
                        "bash", "-c", work.script], cwd=project, env=env,
                       input=work.stdin, capture_output=True, timeout=TIMEOUT,
                       check=False)
    said = [line for line in r.stderr.decode(errors="replace").splitlines()
            if line.startswith("harness-sandbox: ")]
    return Outcome(r.returncode, r.stdout, r.stderr, "\n".join(said))


def by_serve(work: Workload, project: Path, env: dict[str, str]) -> Outcome:
    s = Serve("--project", str(project), "--no-hooks", env=env, cwd=project)
    try:
        s.result("open")
        params: dict[str, Any] = {"argv": ["bash", "-c", work.script],
                                  "timeout": TIMEOUT}
        if work.stdin:
            params["stdin"] = work.stdin.decode()
        if work.tty:
            params.update(tty=True, cols=COLS, rows=ROWS)
        got = s.result("run", params)
        warnings = s.result("close")["warnings"]
    finally:
        assert s.close() == 0
    return Outcome(got["exit"], got["stdout"].encode("utf-8", "surrogateescape"),
                   got["stderr"].encode("utf-8", "surrogateescape"),
                   "\n".join([got["hint"], *warnings]).strip())


def by_library(work: Workload, project: Path, env: dict[str, str]) -> Outcome:
    with Session.open(str(project), env=env) as s:
        r = s.run(["bash", "-c", work.script], stdin=work.stdin, timeout=TIMEOUT,
                  tty=TtySize(COLS, ROWS) if work.tty else False)
    code = r.returncode if r.returncode is not None else 128 + (r.signal or 0)
    return Outcome(code, r.stdout, r.stderr, "\n".join([r.hint, *s.warnings]).strip())


RUNNERS = {"bare": bare, "cli": by_cli, "serve": by_serve, "library": by_library}


def run_in(place: Path, template: Path, work: Workload, how: str,
           extra: Mapping[str, str]) -> Ran:
    """``work`` run ``how`` in a fresh copy of ``template`` at ``place/proj``, and the
    tree it left."""
    project, home = fresh(place, template)
    env = base_env(home, extra)
    if work.before:
        done = subprocess.run(["bash", "-c", work.before], cwd=project, env=env,
                              capture_output=True, timeout=TIMEOUT, check=False)
        assert done.returncode == 0, f"before {work.name}: {done.stderr!r}"
    outcome = RUNNERS[how](work, project, env)
    return Ran(outcome, tree(project, work.volatile))


def differences(bare_ran: Ran, boxed: Ran, ignore: Sequence[str] = ()) -> list[str]:
    """What differs between the bare run and the boxed one, each said in a line."""
    said = []
    b, x = bare_ran.outcome, boxed.outcome
    if b.code != x.code:
        said.append(f"exit: bare {b.code}, boxed {x.code}")
    if b.stdout != x.stdout:
        said.append(f"stdout: bare {b.stdout[-2000:]!r}\n      boxed {x.stdout[-2000:]!r}")
    for rel in sorted(set(bare_ran.tree) | set(boxed.tree)):
        if rel in ignore:
            continue
        was, now = bare_ran.tree.get(rel), boxed.tree.get(rel)
        if was != now:
            said.append(f"tree {rel}: bare {was}, boxed {now}")
    return said[:40]


def check(work: Workload, entry: str, bare_ran: Ran, boxed: Ran) -> None:
    """The boxed run matches the bare one; or, at a boundary, it does not and the box
    said why."""
    diff = differences(bare_ran, boxed, work.ignore)
    story = "\n".join([f"{work.name} through {entry} as {USER}:", *diff,
                       f"bare stderr: {bare_ran.outcome.stderr[-1500:]!r}",
                       f"boxed stderr: {boxed.outcome.stderr[-1500:]!r}",
                       f"the box said: {boxed.outcome.said!r}"])
    if not work.boundary:
        assert diff == [], story
        return
    assert diff != [], f"the boundary ({work.boundary}) was not hit:\n{story}"
    if work.said is None and not boxed.outcome.said:
        raise Unsaid(story)
    assert work.said is not None and work.said in boxed.outcome.said, story
