"""Standard streams, the environment and the terminal: bare and boxed alike."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from helpers.workloads import Workload, cases

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bwrap box"),
]

# The run's pty is made outside the box's own /dev/pts: fd 0 is /dev/pts/N, which
# the box's devpts does not hold, so ttyname() fails ("not a tty"); run --tty's
# command finds /dev/console instead.
WORKLOADS = [
    Workload("cat-dev-stdin", "cat /dev/stdin", stdin=b"hello through stdin\n"),
    Workload("write-dev-stdout-and-stderr",
             "echo out > /dev/stdout; echo err > /dev/stderr; echo done"),
    Workload("tee-dev-stderr", "echo teed | tee /dev/stderr"),
    Workload("cp-to-dev-stdout", "cp notes.txt /dev/stdout"),
    Workload("python-opens-dev-stdin",
             "python3 -c \"print(open('/dev/stdin').read().upper(), end='')\"",
             stdin=b"shout\n"),
    Workload("node-reads-dev-stdin",
             "node -e \"process.stdout.write(require('fs').readFileSync('/dev/stdin', "
             "'utf8').toUpperCase())\"", stdin=b"from node\n", needs=("node",)),
    Workload("here-doc-sort-uniq",
             "sort <<'EOF' | uniq -c\nb\na\nb\nEOF\nprintf '%s\\n' one two | wc -l"),
    Workload("binary-stdout",
             "python3 -c \"import sys; sys.stdout.buffer.write(bytes(range(128)))\""),
    Workload("exit-status-of-a-script",
             "false; echo $?; (exit 7); echo $?; sh -c 'exit 5'; echo $?; exit 3"),
    Workload("environment-basics",
             'echo "home=$HOME pwd=$PWD lang=$LANG term=$TERM"; '
             "test -n \"$PATH\" && echo path-set; env | grep -c '^GIT_AUTHOR_'; "
             "FOO=bar sh -c 'echo $FOO'; export X=1; bash -c 'echo X=$X'"),
    Workload("who-am-i", "id -u; id -g; id -un; whoami; umask"),
    Workload("date-and-locale",
             "date -u -d @0 +%F; TZ=UTC date -d '2020-02-29 12:00' +%j; "
             "printf '%s\\n' b a C | LC_ALL=C sort"),
    Workload("streams-are-not-terminals",
             "python3 -c \"import sys; print([s.isatty() for s in (sys.stdin, "
             "sys.stdout, sys.stderr)])\"; test -t 1 || echo no-tty"),
    Workload("isatty-on-a-terminal",
             "for fd in 0 1 2; do test -t $fd && echo tty-$fd; done; stty size; "
             "python3 -c \"import os; print(os.get_terminal_size())\"; "
             "tty >/dev/null && echo has-tty; echo $TERM", tty=True),
    Workload("git-colour-on-a-terminal",
             "git -c color.ui=auto log --oneline -1 | cat; git -c color.ui=auto status -s",
             project="repo", tty=True),
]


@cases(WORKLOADS)
def test_stream_and_environment_work_ends_boxed_as_it_ends_bare(
        work: Workload, entry: str, compare: Callable[[Workload, str], None]) -> None:
    compare(work, entry)
