"""``python serve_work.py PROJECT``: one ``serve`` session in PROJECT (the real command,
through :class:`helpers.serve_client.Serve`), a hook blocked, one allowed and a run, each
said on one line (``serve-blocked=...``), for a shell script to check in a place of its
own (:mod:`helpers.boxed_work`)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from helpers.paths import REPO
from helpers.serve_client import Serve


def main(project: str) -> None:
    s = Serve("--project", project, cwd=REPO)
    try:
        s.result("open")
        for name, command in (("blocked", "git push --force origin main"),
                              ("allowed", "git status")):
            got = s.result("hook", {"event": "PreToolUse", "tool": "bash",
                                    "input": {"command": command}})
            print(f"serve-{name}={got['outcome']}")
        ran = s.result("run", {"argv": ["sh", "-c", "echo served > served.txt"]})
        print(f"serve-run={ran['exit']}")
    finally:
        s.close()


if __name__ == "__main__":
    main(sys.argv[1])
