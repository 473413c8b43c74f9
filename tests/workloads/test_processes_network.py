"""Processes (background jobs, signals, traps, waits) and the network (a server of
the run's own on loopback, Unix sockets; the host's loopback out of reach): bare and
boxed alike, but for the boundary."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from helpers.workloads import Workload, cases

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bwrap box"),
]

WORKLOADS = [
    Workload("background-job-and-wait",
             "sleep 0.2 & p=$!; echo started; wait $p; echo waited=$?; "
             "(sleep 0.1; exit 4) & wait $!; echo second=$?"),
    Workload("kill-and-trap",
             "bash -c 'trap \"echo got TERM; kill \\$!; exit 3\" TERM; "
             "sleep 5 >/dev/null 2>&1 & touch ready; wait' & p=$!; "
             "until test -f ready; do sleep 0.02; done; kill $p; wait $p; "
             "echo status=$?; rm ready"),
    Workload("trap-on-exit", "trap 'echo cleaned; rm -f tmp.lock' EXIT; touch tmp.lock; "
             "echo working; exit 2"),
    Workload("timeout-and-signals",
             "timeout 0.2 sleep 5; echo timeout=$?; sh -c 'kill -INT $$'; echo int=$?; "
             "sh -c 'kill -KILL $$'; echo kill=$?"),
    Workload("nohup-and-setsid",
             "nohup sh -c 'echo done > nohup.txt' >/dev/null 2>&1 & wait; cat nohup.txt; "
             "setsid sh -c 'echo sid > sid.txt'; cat sid.txt"),
    Workload("jobs-in-parallel",
             "for i in 1 2 3 4; do (sleep 0.1; echo $i > job-$i.txt) & done; wait; "
             "cat job-*.txt | sort | tr '\\n' ' '"),
    Workload("process-listing",
             "sleep 2 & p=$!; sleep 0.3; ps -o comm= -p $p; kill $p; wait $p; echo rc=$?; "
             "python3 -c 'import os; print(os.getppid() > 0)'"),
    Workload("pipes-and-process-substitution",
             "diff <(sort notes.txt) <(sort notes.txt) && echo same; "
             "yes | head -3; cat notes.txt | grep -v beta | wc -l"),
    Workload("loopback-server-in-the-run",
             "python3 server.py & p=$!; for i in $(seq 100); do test -f port.txt && break; "
             "sleep 0.05; done; curl -s \"http://127.0.0.1:$(cat port.txt)/notes.txt\" | "
             "head -2; kill $p; wait $p 2>/dev/null; rm port.txt", needs=("curl",)),
    Workload("unix-socket-in-the-project",
             "python3 -c \"import socket, os\n"
             "s = socket.socket(socket.AF_UNIX); s.bind('sock'); s.listen(1)\n"
             "c = socket.socket(socket.AF_UNIX); c.connect('sock'); a, _ = s.accept()\n"
             "c.sendall(b'over a socket'); print(a.recv(100).decode()); os.unlink('sock')\""),
    Workload("abstract-unix-socket",
             "python3 -c \"import socket\n"
             "s = socket.socket(socket.AF_UNIX); s.bind('\\0wl-abstract'); s.listen(1)\n"
             "c = socket.socket(socket.AF_UNIX); c.connect('\\0wl-abstract')\n"
             "a, _ = s.accept(); c.sendall(b'abstract'); print(a.recv(100).decode())\""),
    Workload("reach-the-hosts-loopback",
             "python3 -c \"import os, socket\n"
             "s = socket.create_connection(('127.0.0.1', int(os.environ['HOST_PORT'])), 3)\n"
             "print(s.recv(10).decode(), end='')\"",
             boundary="the box has no network: its loopback is its own",
             said="the box has no network ([sandbox] network = false): its loopback is its "
                  "own"),
]


@cases(WORKLOADS)
def test_process_and_network_work_ends_boxed_as_it_ends_bare(
        work: Workload, entry: str, compare: Callable[[Workload, str], None]) -> None:
    compare(work, entry)
