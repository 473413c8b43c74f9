"""Each warm run of a box without network has a network namespace of its own: a
listener one run makes on its loopback or as an abstract Unix socket is not reachable
from another run of the same session while it lives, and each run's own loopback works.
Real warm boxes; root and plain user alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.launchers import STARTERS, launcher

from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation]

LISTEN = r'''
import socket, sys, time
a = socket.socket(socket.AF_UNIX); a.bind("\0hs-run-listener"); a.listen()
t = socket.socket(); t.bind(("127.0.0.1", int(sys.argv[1]))); t.listen()
print("up", flush=True)
time.sleep(3)
'''

REACH = r'''
import socket, sys
for fam, addr in ((socket.AF_UNIX, "\0hs-run-listener"),
                  (socket.AF_INET, ("127.0.0.1", int(sys.argv[1])))):
    c = socket.socket(fam)
    try:
        c.connect(addr)
        print("reached")
    except OSError as e:
        print("refused", e.errno)
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen()
c = socket.socket(); c.connect(t.getsockname()); print("own loopback")
'''


@pytest.fixture(params=STARTERS, autouse=True)
def starter(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test with each of the warm box's starters (the compiled one, the Python one)."""
    with launcher(request.param):
        yield request.param


def test_a_runs_listeners_are_its_own(project: Path) -> None:
    port = 45000 + int(time.monotonic_ns() % 5000)
    with Session.open(str(project), SandboxSettings(hide_defaults=False)) as s:
        assert s.warm is not None
        first = threading.Thread(target=s.run, args=(
            ["sh", "-c", f"python3 -c '{LISTEN}' {port} > /tmp/up.txt"],))
        first.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seen = s.run(["cat", "/tmp/up.txt"]).stdout
            if seen == b"up\n":
                break
            time.sleep(0.1)
        r = s.run(["python3", "-c", REACH, str(port)])
        first.join()
    assert seen == b"up\n"
    assert r.stdout.decode().splitlines() == ["refused 111", "refused 111", "own loopback"]
