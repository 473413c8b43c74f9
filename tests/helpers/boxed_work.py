"""Real work in the box, in a place given by the caller (a container, a masked
``/proc``): one shell script that runs the CLI there and prints what got through, and
:func:`check` that reads it. Each line it prints is a finding; the ones named in
:data:`BREACHES` must never appear."""

from __future__ import annotations

import sys

from helpers.paths import REPO
from helpers.procs import Done

KEY = "sk-provider-secret-4711"
# What the box must never do: write outside the project, read ~/.ssh, see the
# provider key in any process's environment through /proc (the harness's, or another
# process's of the place that holds it), write another process's /proc entries, reach
# the network, leave a process behind after a timeout.
BREACHES = ("WROTE-OUTSIDE", "WROTE-HOME", "READ-SSH", "KEY-IN", "WROTE-PROC", "NET",
            "LEFT")

_IN_BOX = (
    'echo in-project > made.txt; '
    'echo x > "$OUT/outside" 2>/dev/null && echo WROTE-OUTSIDE; '
    'echo x > "$HOME/written" 2>/dev/null && echo WROTE-HOME; '
    'cat "$HOME/.ssh/id_test" 2>/dev/null && echo READ-SSH; '
    f'for f in /proc/[0-9]*/environ; do grep -a -q {KEY} "$f" 2>/dev/null && '
    'echo "KEY-IN $f"; done; '
    'python3 -c "import socket; s = socket.socket(); s.settimeout(3); '
    's.connect((\'1.1.1.1\', 53))" 2>/dev/null && echo NET; '
    'for f in /proc/[0-9]*/oom_score_adj; do echo 1000 2>/dev/null > "$f" && '
    'echo "WROTE-PROC $f"; done; '
    'echo BOX-RAN'
)


def script(base: str, table: str = "") -> str:
    """The work, in ``base`` (a folder the caller may write: the project, the home and a
    folder outside both are made in it); ``table`` is the config's ``[sandbox]`` table,
    when it has one (``box = "landlock"``)."""
    cli = f"{sys.executable} -m launchers"
    hook = REPO / "scripts" / "hooks" / "no-force-push.sh"
    push = '{"command": "git push --force origin main"}'
    status = '{"command": "git status"}'
    return f"""
set -u
B={base}; P=$B/proj; export HOME=$B/home OUT=$B/out
mkdir -p "$P" "$HOME/.ssh" "$HOME/.config/harness" "$OUT"
echo secret > "$HOME/.ssh/id_test"
cat > "$HOME/.config/harness/config.toml" <<'TOML'
[[hooks]]
name = "no-force-push"
event = "PreToolUse"
tools = ["bash"]
command = ["{hook}"]
{table}
TOML
cd {REPO}
# Another process of this place with the key in its environment, as a harness is.
OPENAI_API_KEY={KEY} sleep 600 & holder=$!
OPENAI_API_KEY={KEY} {cli} run --project "$P" -- sh -c '{_IN_BOX}'; echo "run=$?"
kill $holder
cat "$P/made.txt"
{cli} run --project "$P" --timeout 2 -- sh -c 'sleep 3171 & sleep 3171'; echo "timeout=$?"
sleep 1; for p in /proc/[0-9]*; do
  [ "$(tr '\\0' ' ' < "$p/cmdline" 2>/dev/null)" = "sleep 3171 " ] && echo LEFT
done
{cli} hook PreToolUse --project "$P" --tool bash --input '{push}'; echo "blocked=$?"
{cli} hook PreToolUse --project "$P" --tool bash --input '{status}'; echo "allowed=$?"
{sys.executable} {REPO}/tests/helpers/serve_work.py "$P"
cat "$P/served.txt"
"""


def check(r: Done) -> None:
    """The work ran, and nothing got through."""
    lines = r.out.splitlines()
    assert "BOX-RAN" in lines and "run=0" in lines and "in-project" in lines, r
    assert [x for x in lines if x.split(" ")[0] in BREACHES] == [], r
    assert "timeout=124" in lines, r
    assert "blocked=1" in lines and "allowed=0" in lines, r
    assert "serve-blocked=blocked" in lines and "serve-allowed=allowed" in lines, r
    assert "serve-run=0" in lines and "served" in lines, r
