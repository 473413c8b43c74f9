"""The installed command starts its Python isolated: nothing the harness's environment
names in the agent's folders runs before (or instead of) the toolkit's code.

With ``PYTHONPATH`` naming a project folder, a plain interpreter imports the agent's
``sitecustomize.py`` -- or its ``json.py`` in place of the standard library's -- before
any code of ours; ``PYTHONHOME`` there runs its ``encodings``. The command is a launcher
(``bin/harness-sandbox``) that starts the venv's Python with ``-I``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "harness-sandbox"
PLANT = "open({marker!r}, 'a').write('{name} ran\\n')\n"


@pytest.fixture
def agent_folder(project: Path) -> tuple[Path, Path]:
    """What the agent leaves in the project: modules that say when they run."""
    lib = project / "lib"
    lib.mkdir()
    marker = project / "ran"
    for name in ("sitecustomize", "usercustomize", "json", "shlex", "argparse"):
        (lib / f"{name}.py").write_text(PLANT.format(marker=str(marker), name=name))
    (lib / "encodings").mkdir()
    (lib / "encodings" / "__init__.py").write_text(
        PLANT.format(marker=str(marker), name="encodings"))
    return lib, marker


def cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *argv], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


@pytest.mark.parametrize("variable", ["PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONUSERBASE"])
def test_a_python_variable_naming_the_agents_folder_runs_nothing_of_it(
        project: Path, agent_folder: tuple[Path, Path], variable: str) -> None:
    lib, marker = agent_folder
    env = {**os.environ, variable: str(lib)}
    for argv in (["--version"], ["doctor", "--json"],
                 ["run", "--project", str(project), "--", "/bin/true"]):
        r = cli(*argv, env=env)
        assert r.returncode in (0, 1), (argv, r.stderr)
        assert not marker.exists(), (argv, marker.read_text())


def test_pythonhome_in_the_agents_folder_is_ignored_not_fatal(
        project: Path, agent_folder: tuple[Path, Path]) -> None:
    lib, marker = agent_folder
    for home in (str(lib), "/nonexistent"):
        r = cli("--version", env={**os.environ, "PYTHONHOME": home})
        assert r.returncode == 0, r.stderr
        assert "Fatal Python error" not in r.stderr
        assert r.stdout.startswith("harness-sandbox ")
    assert not marker.exists()


def test_a_plain_interpreter_would_have_run_the_agents_module(
        agent_folder: tuple[Path, Path]) -> None:
    """The attack is real: without -I the same environment runs the agent's code."""
    lib, marker = agent_folder
    # (Its encodings package would stop a plain interpreter before json: set aside.)
    (lib / "encodings").rename(lib.parent / "encodings-aside")
    subprocess.run([sys.executable, "-c", "import json"], env={**os.environ,
                   "PYTHONPATH": str(lib)}, capture_output=True, check=False)
    assert marker.exists()


def test_the_launcher_follows_its_own_links(tmp_path: Path) -> None:
    link = tmp_path / "harness-sandbox"
    link.symlink_to(CLI)
    r = subprocess.run([str(link), "--version"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
