"""A macOS box at work: a project with a git folder, the folders around it, and the
policy over them, run with the real ``/usr/bin/sandbox-exec`` (macOS only)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Unpack

from sandbox.plan import RunResult
from sandbox.policy import Policy, PolicyOptions

TIMEOUT = 60.0
SH = "/bin/sh"


class Tree:
    """A project with a git folder, the folders around it, and the policy over them."""

    def __init__(self, root: Path, *, project_name: str = "proj",
                 **policy_kw: Unpack[PolicyOptions]) -> None:
        self.root = Path(os.path.realpath(root))
        self.project = self.root / project_name
        (self.project / ".git" / "hooks").mkdir(parents=True)
        (self.project / ".git" / "objects").mkdir()
        (self.project / ".git" / "config").write_text("[core]\n\tbare = false\n")
        (self.project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (self.project / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
        self.private_tmp = self.root / "ptmp"
        self.private_tmp.mkdir()
        self.outside = self.root / "outside"
        self.outside.mkdir()
        self.secret = self.root / "secret"
        self.secret.mkdir()
        (self.secret / "key").write_text("the-secret-key\n")
        env = {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": os.environ.get("HOME", "/"),
            # Not used by a sandboxed macOS session: the system says (sandbox/macos/darwin.py).
            "TMPDIR": str(self.root),
            "LANG": "C",
            "OPENAI_API_KEY": "sk-openai",
            "ANTHROPIC_API_KEY": "sk-anthropic",
            "SOMETHING_API_KEY": "sk-other",
            "HARMLESS": "kept",
        }
        args: PolicyOptions = {
            "private_tmp": str(self.private_tmp),
            "hidden": [str(self.secret)],
            "hide_defaults": False,
            "env": env,
            "home": str(self.root / "home"),
            "platform": "darwin",
        }
        args.update(policy_kw)
        self.policy = Policy.create(str(self.project), **args)

    def run(self, argv: Sequence[str], policy: Policy | None = None,
            env_extra: dict[str, str] | None = None) -> RunResult:
        from sandbox.macos import seatbelt
        from sandbox.process import supervisor

        plan = seatbelt.plan(policy or self.policy, argv, env_extra=env_extra)
        result = supervisor.run(plan, timeout=TIMEOUT)
        assert result.outcome == "exited", result
        return result

    def sh(self, script: str) -> RunResult:
        return self.run([SH, "-c", script])


def denied(result: RunResult) -> bool:
    return result.returncode != 0 and b"Operation not permitted" in result.stderr
