"""Round four, family 2's last part: a ``[sandbox] writable`` folder that is a git
repository of its own has its git inputs held as the project's are -- its config, its
hooks -- so the box cannot plant what host git runs there next."""

from __future__ import annotations

import subprocess

import pytest
from helpers.gitworld import World, w  # noqa: F401  (the fixture)

from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.isolation

ATTACKS = {
    "fsmonitor": "git -C {lib} config core.fsmonitor 'touch {marker}'",
    "hooksPath": "git -C {lib} config core.hooksPath {lib}/myhooks",
    "a hook": "printf '#!/bin/sh\\ntouch {marker}\\n' > {lib}/.git/hooks/pre-commit && "
              "chmod +x {lib}/.git/hooks/pre-commit",
    "an include": "printf '[include]\\n\\tpath = {lib}/evil.cfg\\n' >> {lib}/.git/config",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_writable_repository_s_git_inputs_are_read_only(w: World, attack: str) -> None:  # noqa: F811
    lib = w.base / "lib"
    subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True, env=w.env)
    (lib / "myhooks").mkdir()
    (lib / "myhooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {w.marker}\n")
    (lib / "myhooks" / "pre-commit").chmod(0o755)
    (lib / "evil.cfg").write_text(f"[core]\n\tfsmonitor = touch {w.marker}\n")
    settings = SandboxSettings(writable=(str(lib),), hide_defaults=False)
    with w.session(settings=settings) as s:
        r = s.run(["sh", "-c", ATTACKS[attack].format(lib=lib, marker=w.marker)])
        # The rest of the repository stays the box's to write.
        made = s.run(["sh", "-c", f"echo x > {lib}/file && git -C {lib} add file"])
    assert r.returncode != 0, r
    assert made.returncode == 0, made
    # The host side for real: git status and a commit in that repository.
    assert w.git("status", cwd=lib).returncode == 0
    w.git("commit", "-qm", "work", cwd=lib)
    assert not w.marker.exists()
