"""The allow-list in a warm box: the forwarder starts once, as a run that lasts the
session, and every run reaches the proxy through it. Real servers on 127.0.0.1, the
real box; root and plain user alike."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from helpers.origin import serving

from sandbox.errors import SandboxUnavailable
from sandbox.session import Session
from sandbox.settings import SandboxSettings

pytestmark = [pytest.mark.isolation, pytest.mark.timeout(120)]

CURL = ["curl", "-sS", "--max-time", "20"]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[int]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the origin\n")
    with serving(root) as port:
        yield port


def listed(*entries: str) -> SandboxSettings:
    return SandboxSettings(network=tuple(entries), hide_defaults=False)


def test_an_allow_list_session_runs_warm_and_each_run_reaches_the_origin(
        project: Path, site: int) -> None:
    with Session.open(str(project), listed(f"127.0.0.1:{site}")) as s:
        assert s.warm is not None
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(
                lambda _: s.run([*CURL, f"http://127.0.0.1:{site}/hello.txt"]), range(16)))
        refused = s.run([*CURL, "-o", "/dev/null", "-w", "%{http_code}",
                         f"http://127.0.0.1:{site + 1}/"])
    assert all(r.stdout == b"hello from the origin\n" for r in results), results[0]
    assert refused.stdout == b"403"
    # Each run's result names what the proxy refused while it ran.
    assert [(h, p) for h, p, _ in refused.refused] == [("127.0.0.1", site + 1)]
    assert all(not r.refused for r in results)


def test_a_forwarder_that_ends_fails_the_later_runs(project: Path, site: int) -> None:
    with Session.open(str(project), listed(f"127.0.0.1:{site}")) as s:
        assert s.run(["true"]).ok
        assert s.warm is not None and s.warm.proc is not None
        # This session's forwarder: the run in its warm box that sleeps for ever.
        box = psutil.Process(s.warm.proc.pid)
        mine = []
        for p in box.children(recursive=True):
            try:
                cmd = p.cmdline()
            except psutil.NoSuchProcess:
                continue  # a run made ahead that ended since the listing
            if cmd[:1] == ["sleep"] and "2147483647" in cmd:
                mine.append(p)
        assert mine
        for p in mine:
            p.kill()
        deadline = time.monotonic() + 10
        with pytest.raises(SandboxUnavailable) as err:
            while time.monotonic() < deadline:
                s.run(["true"])
                time.sleep(0.05)
    assert "the network allow-list's forwarder ended" in str(err.value)
