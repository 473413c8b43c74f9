"""The real Docker engine, private to one test session.

:func:`start` runs a ``dockerd`` of its own (its own socket, data root and exec root in
a fresh folder; ``--iptables=false --bridge=none``, so it touches no network of the
host's), imports an image from a bare root tree that holds only mount points (no
registry is reachable), and :meth:`Engine.stop` stops it all and removes the folder,
leaving no process and no mount behind. Each container binds the host's ``/usr`` and
``/etc``, the checkout and the test's interpreter read-only, and has no network.

Only root can run ``dockerd``. The unprivileged pass of ``./scripts/test`` skips the
tests that need it (:func:`skip_unless_root`): the root pass runs their plain-user
cases in containers started with ``--user``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers.paths import REPO
from helpers.procs import Done

IMAGE = "hsbox-bare:test"
# A plain user of the container: no account of the host's, so nothing it owns there.
USER = "4321:4321"
# The folders of the bare root: the mount points of the binds and what a shell expects.
_TREE = ("usr", "etc", "proc", "sys", "dev", "tmp", "var/tmp", "root", "home", "run",
         "work", "srv")
_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
START_TIMEOUT = 60.0


def skip_unless_root() -> None:
    """The plain user's pass cannot run ``dockerd``: its cases run in the root pass."""
    if os.geteuid() != 0:
        pytest.skip("needs the real Docker engine, which only root can start: the root "
                    "pass of ./scripts/test runs these cases, the plain user's with "
                    "docker run --user")


def _program(name: str) -> str | None:
    for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if os.access(f"{d}/{name}", os.X_OK):
            return f"{d}/{name}"
    return shutil.which(name)


def _binds() -> tuple[str, ...]:
    """``/usr``, ``/etc``, the checkout and the interpreter's prefix, read-only."""
    paths = ["/usr", "/etc", str(REPO)]
    prefix = os.path.realpath(sys.prefix)
    if not prefix.startswith(str(REPO) + "/") and not prefix.startswith("/usr/"):
        paths.append(prefix)
    return tuple(f"{p}:{p}:ro" for p in paths)


class Engine(NamedTuple):
    """A running private engine: its client, socket, folder and daemon process."""

    docker: str
    host: str
    folder: Path
    daemon: subprocess.Popen[bytes]

    def docker_cmd(self, *args: str, timeout: float = 120, stdin: bytes = b"") -> Done:
        r = subprocess.run([self.docker, "-H", self.host, *args], input=stdin,
                           capture_output=True, timeout=timeout, check=False)
        return Done(r.returncode, r.stdout.decode("utf-8", "replace"),
                    r.stderr.decode("utf-8", "replace"))

    def run(self, script: str, *, user: bool = False, seccomp: str = "default",
            env: Sequence[str] = (), timeout: float = 180) -> Done:
        """``sh -c script`` in a fresh container of the bare image, removed after:
        ``--network none``, root or (``user``) :data:`USER`, under Docker's default
        seccomp profile or ``seccomp="unconfined"``. ``HOME`` is ``/tmp/home``."""
        args = ["run", "--rm", "-i", "--network", "none", "--workdir", "/tmp",
                "-e", "HOME=/tmp/home", "-e", "LANG=C.UTF-8",
                "-e", "PATH=/usr/local/bin:/usr/bin:/bin"]
        if user:
            args += ["--user", USER]
        if seccomp != "default":
            args += ["--security-opt", f"seccomp={seccomp}"]
        for bind in _binds():
            args += ["-v", bind]
        for e in env:
            args += ["-e", e]
        return self.docker_cmd(*args, IMAGE, "/bin/sh", "-c",
                               f"mkdir -p /tmp/home && {script}", timeout=timeout)

    def stop(self) -> None:
        """Every container, the image, the daemon (and its containerd), its mounts and
        its folder."""
        ids = self.docker_cmd("ps", "-aq", timeout=60).out.split()
        if ids:
            self.docker_cmd("rm", "-f", *ids, timeout=120)
        with contextlib.suppress(ProcessLookupError):
            self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        _unmount_below(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)


def _mounts_below(folder: Path) -> list[str]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == str(folder) or point.startswith(f"{folder}/"):
                out.append(point)
    return out


def _unmount_below(folder: Path) -> None:
    """What the daemon left mounted in its folder (the data root bound onto itself),
    deepest first."""
    for point in sorted(_mounts_below(folder), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _bare_root(folder: Path) -> Path:
    """A tar of a root tree holding only mount points and the usual links."""
    tree = folder / "root"
    for d in _TREE:
        (tree / d).mkdir(parents=True, exist_ok=True)
    for d in ("tmp", "var/tmp", "srv"):  # /srv: a plain user's work outside /tmp
        (tree / d).chmod(0o1777)
    for name, target in _LINKS.items():
        (tree / name).symlink_to(target)
    made = folder / "root.tar"
    with tarfile.open(made, "w") as tar:
        tar.add(tree, arcname=".")
    return made


def start() -> Engine:
    """A private engine with the bare image imported. Fails (it does not skip) when
    the engine is missing or cannot start, with its log."""
    dockerd, docker = _program("dockerd"), _program("docker")
    if dockerd is None or docker is None:
        pytest.fail("the Docker engine is not installed (dockerd and docker: Debian's "
                    "docker.io, which ./scripts/test installs as root)")
    # Short: the socket's path must fit a sockaddr_un. Not in /tmp: the containers'
    # files would then lie in the system temp folder, where pathguard refuses hooks.
    folder = Path(tempfile.mkdtemp(prefix="hs-dk-", dir="/var/lib"))
    for d in ("data", "exec", "run"):
        (folder / d).mkdir()
    host = f"unix://{folder}/run/docker.sock"
    log = open(folder / "dockerd.log", "wb")  # noqa: SIM115 (kept by the daemon)
    daemon = subprocess.Popen(
        [dockerd, "--host", host, "--data-root", str(folder / "data"),
         "--exec-root", str(folder / "exec"), "--pidfile", str(folder / "run/dockerd.pid"),
         "--iptables=false", "--ip6tables=false", "--bridge=none",
         "--storage-driver=overlay2"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    engine = Engine(docker, host, folder, daemon)
    try:
        _wait_ready(engine)
        made = engine.docker_cmd("import", str(_bare_root(folder)), IMAGE)
        if made.code != 0:
            raise RuntimeError(f"docker import failed: {made.err}")
    except BaseException as err:
        text = (folder / "dockerd.log").read_text(errors="replace")[-3000:]
        engine.stop()
        pytest.fail(f"the private Docker engine could not start: {err}\n{text}")
    return engine


def _wait_ready(engine: Engine) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if engine.daemon.poll() is not None:
            raise RuntimeError(f"dockerd exited with status {engine.daemon.returncode}")
        if engine.docker_cmd("version", timeout=30).code == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"dockerd did not answer within {START_TIMEOUT:.0f} s")
