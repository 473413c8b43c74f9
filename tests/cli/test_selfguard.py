"""The toolkit guards itself: it will not run from a folder the box can write, and its
console entry imports nothing from the working directory.

Real copies and real CLI runs: a copy of the package inside the project, a virtual
environment inside the project, and a ``json.py`` the agent left in the project with
``PYTHONPATH=.``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

from launchers.cli.syspath import safe_path

CLI = os.path.join(os.path.dirname(sys.executable), "harness-sandbox")
FIX_INSTALL = ("Install harness-sandbox outside the project and every writable folder "
               "(for example from a checkout kept outside them: the .venv its set-up makes, or "
               "pipx install PATH-TO-CHECKOUT) and run that one.")
FIX_PATH = "Remove it from PYTHONPATH, or install harness-sandbox outside the project."
SITE = next(p for p in sys.path if p.endswith("site-packages"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = Path(os.path.realpath(tmp_path)) / "proj"
    p.mkdir()
    return p


def cli(args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
        program: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    home = cwd.parent / "harness-home"
    home.mkdir(exist_ok=True)
    full = {"HARNESS_HOME": str(home), "HOME": str(home), "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    return subprocess.run([*(program or [CLI]), *args], cwd=cwd, env=full, text=True,
                          capture_output=True, timeout=60)


def refusal(what: str, path: Path | str, fix: str = FIX_INSTALL) -> str:
    return (f"{what}, {path}, is in the project, so the agent could change the code that "
            f"guards it; harness-sandbox will not start. {fix}")


@pytest.mark.parametrize(("command", "code", "prefix"), [
    (["run", "--", "/bin/sh", "-c", "touch {marker}"], 125, "harness-sandbox: "),
    (["audit"], 2, ""),
    (["hook", "PreToolUse", "--tool", "bash", "--input", "{{}}"], 2, ""),
])
def test_a_copy_of_the_package_in_the_project_will_not_start(
        project: Path, command: list[str], code: int, prefix: str) -> None:
    vendor = project / "vendor"
    for name in ("sandbox", "pathguard", "launchers"):
        shutil.copytree(REPO / name, vendor / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    marker = project.parent / "PWNED"
    args = [a.format(marker=marker) for a in command]
    done = cli([*args[:1], "--project", str(project), *args[1:]], cwd=project.parent,
               env={"PYTHONPATH": f"{vendor}:{SITE}"},
               program=[sys.executable, "-m", "launchers.cli"])
    assert done.returncode == code, done.stderr
    assert done.stderr == prefix + refusal("harness-sandbox's own code",
                                           vendor / "sandbox") + "\n"
    assert not marker.exists()


def test_a_virtual_environment_in_the_project_will_not_start(project: Path) -> None:
    base = getattr(sys, "_base_executable", None) or "/usr/bin/python3"
    subprocess.run([base, "-m", "venv", "--without-pip", str(project / ".venv")],
                   check=True, timeout=60)
    python = project / ".venv" / "bin" / "python"
    done = cli(["audit", "--project", str(project)], cwd=project.parent,
               env={"PYTHONPATH": f"{REPO}:{SITE}"},
               program=[str(python), "-m", "launchers.cli"])
    assert done.returncode == 2
    assert done.stderr == refusal("harness-sandbox's interpreter", python) + "\n"


def test_an_absolute_pythonpath_into_the_project_is_refused_under_python_m(
        project: Path) -> None:
    # The installed command ignores PYTHONPATH (-I: tests/test_isolated_start.py); a
    # plain ``python -m launchers.cli`` reads it, and the self-guard refuses.
    done = cli(["audit", "--project", str(project)], cwd=project.parent,
               env={"PYTHONPATH": f"{project!s}:{REPO}:{SITE}"},
               program=[sys.executable, "-m", "launchers.cli"])
    assert done.returncode == 2
    assert done.stderr == refusal(
        "a folder on harness-sandbox's import path (sys.path)", project, FIX_PATH) + "\n"


@pytest.mark.parametrize("how", ["console script, PYTHONPATH=.", "python -m",
                                 "console script, PYTHONPATH=:lib"])
def test_the_agents_json_py_in_the_working_directory_is_not_imported(
        project: Path, how: str) -> None:
    marker = project.parent / "PWNED"
    # What a boxed command can leave in the project: a module named like the stdlib's.
    (project / "json.py").write_text(f"open({str(marker)!r}, 'w')\n")
    (project / "lib").mkdir()
    (project / "lib" / "json.py").write_text(f"open({str(marker)!r}, 'w')\n")
    if how == "python -m":
        done = cli(["audit", "--project", ".", "--json"], cwd=project,
                   program=[sys.executable, "-m", "launchers.cli"])
    else:
        pythonpath = "." if how.endswith("=.") else ":lib"
        done = cli(["audit", "--project", ".", "--json"], cwd=project,
                   env={"PYTHONPATH": pythonpath})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('{"version": 1')
    assert not marker.exists()


def test_safe_path_drops_what_names_the_working_directory() -> None:
    stdlib = {"/usr/lib/python311.zip", "/usr/lib/python3.11"}
    path = ["/w", "", "rel", "/w/lib", "/opt/x", "/usr/lib/python3.11", "/site", "/w"]
    # -m put /w first; PYTHONPATH "lib" became /w/lib; /w again after the stdlib came
    # from a .pth file (an editable install run from its checkout) and stays.
    assert safe_path(path, "lib:/opt/x", "/w", stdlib) == \
        ["/opt/x", "/usr/lib/python3.11", "/site", "/w"]
    # The folder this package came from is kept, last, when only the working
    # directory's entry named it.
    assert safe_path(["/w", "/usr/lib/python3.11"], None, "/w", stdlib, "/w") == \
        ["/usr/lib/python3.11", "/w"]
    # A PYTHONPATH folder that merely lies under the Python's lib folder is not the
    # standard library: what comes after it is still dropped.
    assert safe_path(["/w", "/usr/lib/x", "/w", "/usr/lib/python3.11"], "/usr/lib/x:.",
                     "/w", stdlib) == ["/usr/lib/x", "/usr/lib/python3.11"]


def test_a_linker_variable_naming_the_project_stops_the_toolkit(project: Path) -> None:
    done = cli(["audit", "--project", str(project)], cwd=project.parent,
               env={"LD_LIBRARY_PATH": f"/usr/lib:{project}/build"})
    assert done.returncode == 2
    assert done.stderr == (
        f"the environment variable LD_LIBRARY_PATH names {project}/build, which is in the "
        "project, so the agent could change the code that harness-sandbox loads; "
        "harness-sandbox will not start. Start harness-sandbox without it.\n")
