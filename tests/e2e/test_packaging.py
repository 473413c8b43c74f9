"""The package as a user gets it: the wheel and the sdist of this checkout, the wheel
installed into a fresh virtual environment outside the checkout, and the installed
command run from there with no checkout around it.

The new environment is made by the system Python the set-up uses (``venv`` without
pip); its dependencies are copied from the checkout's environment (the same Python, so
the same compiled files), and the wheel goes in with the checkout's pip (``--python``),
so nothing is fetched and the test stays fast. ``pip check`` then holds the wheel's
declared requirements to what is there.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers.paths import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="the installed command's box here is bubblewrap")

PACKAGES = ("sandbox", "pathguard", "launchers")
NAME = "harness_sandbox"
# The system Python the set-up made the checkout's environment from (/usr/bin/python3).
SYSTEM_PYTHON = Path(sys.base_prefix) / "bin" / "python3"
PLANT = "open({marker!r}, 'a').write('sitecustomize ran\\n')\n"
BUILD_JUNK = (".venv", ".git", "__pycache__", "build", "dist", "*.egg-info", ".*_cache")


class Built(NamedTuple):
    wheel: Path
    sdist: Path
    messages: str  # what the build backend said


class Installed(NamedTuple):
    base: Path  # outside the checkout and /tmp: the working folder and HOME
    venv: Path
    command: Path
    project: Path


def call(argv: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def host_env() -> dict[str, str]:
    """This process's environment without what would make Python read the checkout."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def package_files(root: Path) -> set[str]:
    """Every file of the three packages under ``root`` (code and data), relative."""
    return {p.relative_to(root).as_posix() for name in PACKAGES
            for p in (root / name).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The wheel (pip, as pipx does) and the sdist (the build backend's own hook) of a
    copy of the checkout, so the build leaves nothing in the checkout."""
    src = tmp_path_factory.mktemp("src") / "harness-sandbox"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*BUILD_JUNK))
    dist = tmp_path_factory.mktemp("dist")
    r = call([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
              "--no-index", "--disable-pip-version-check", "-v", "-w", dist, src],
             cwd=src, env=host_env())
    assert r.returncode == 0, r.stdout + r.stderr
    messages = r.stdout + r.stderr
    r = call([sys.executable, "-c",
              "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
              dist], cwd=src, env=host_env())
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return Built(wheel, sdist, messages + r.stdout + r.stderr)


def wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(z.read(name).decode())
    return [Requirement(text) for text in meta.get_all("Requires-Dist") or []]


def dependencies(wheel: Path) -> list[metadata.Distribution]:
    """The distributions the wheel needs (and they need), as the checkout has them."""
    found: dict[str, metadata.Distribution] = {}
    todo = wheel_requirements(wheel)
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(req.name)
        if key in found:
            continue
        found[key] = dist = metadata.distribution(req.name)
        todo += [Requirement(text) for text in dist.requires or []]
    return list(found.values())


def copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    """A distribution's files inside its site folder (its code and its .dist-info),
    copied to ``site``; the scripts it put beside the interpreter are left out."""
    root = Path(str(dist.locate_file(""))).resolve()
    for entry in dist.files or []:
        source = Path(str(dist.locate_file(entry))).resolve()
        if source.is_relative_to(root) and source.is_file():
            target = site / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def installed(built: Built) -> Iterator[Installed]:
    """The wheel in a fresh virtual environment under /var/tmp. (Not under /tmp: a box
    has its own /tmp, and ``doctor`` runs the toolkit's interpreter in one.)"""
    base = Path(tempfile.mkdtemp(prefix="hs-wheel-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    try:
        venv = base / "venv"
        r = call([SYSTEM_PYTHON, "-m", "venv", "--without-pip", venv], cwd=base)
        assert r.returncode == 0, r.stderr
        python = venv / "bin" / "python"
        (site,) = (venv / "lib").glob("python3*/site-packages")
        for dist in dependencies(built.wheel):
            copy_distribution(dist, site)
        pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", python,
                                 "--disable-pip-version-check"]
        r = call([*pip, "install", "--no-deps", "--no-index", built.wheel], cwd=base,
                 env=host_env())
        assert r.returncode == 0, r.stdout + r.stderr
        r = call([*pip, "check"], cwd=base, env=host_env())
        assert r.returncode == 0, r.stdout + r.stderr
        project = base / "proj"
        project.mkdir()
        yield Installed(base, venv, venv / "bin" / "harness-sandbox", project)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def clean_env(inst: Installed, **extra: str) -> dict[str, str]:
    """What a harness might start the command with: no checkout, no PYTHON* of ours."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(inst.base), "LANG": "C.UTF-8", **extra}


def hs(inst: Installed, *argv: str | Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return call([inst.command, *argv], cwd=inst.base, env=clean_env(inst, **extra))


# -- what the archives hold ----------------------------------------------------------


def test_the_wheel_holds_every_package_file_and_the_launcher(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as z:
        names = set(z.namelist())
        launcher = z.read(f"{NAME}-0.1.0.data/scripts/harness-sandbox")
    missing = package_files(REPO) - names
    assert not missing, f"not in the wheel (pyproject's packages or package-data): {missing}"
    assert launcher == (REPO / "bin" / "harness-sandbox").read_bytes()
    assert f"{NAME}-0.1.0.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if n.split("/")[0] in ("tests", "scripts", "examples")]


def test_the_sdist_holds_the_launcher_the_license_and_the_package_data(built: Built) -> None:
    with tarfile.open(built.sdist) as t:
        members = {m.name.split("/", 1)[1]: m for m in t.getmembers() if "/" in m.name}
    wanted = package_files(REPO) | {"bin/harness-sandbox", "LICENSE", "README.md",
                                        "pyproject.toml"}
    missing = wanted - set(members)
    assert not missing, f"not in the sdist: {missing}"
    assert members["bin/harness-sandbox"].mode & 0o111, "the launcher lost its x bit"


def test_the_build_uses_nothing_the_backend_calls_deprecated(built: Built) -> None:
    said = [line for line in built.messages.splitlines() if "deprecat" in line.lower()]
    assert not said, "\n".join(said)


# -- the installed command -------------------------------------------------------------


def test_the_installed_command_imports_the_installed_package(installed: Installed) -> None:
    ask = "import launchers, pathguard, sandbox; print(launchers.__file__); " \
          "print(pathguard.__file__); print(sandbox.__file__)"
    r = call([installed.venv / "bin" / "python", "-I", "-c", ask], cwd=installed.base,
             env=clean_env(installed))
    assert r.returncode == 0, r.stderr
    (site,) = (installed.venv / "lib").glob("python3*/site-packages")
    for line in r.stdout.split():
        assert Path(line).is_relative_to(site), line


def test_version_doctor_and_a_boxed_run_from_the_installed_command(
        installed: Installed) -> None:
    r = hs(installed, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "harness-sandbox 0.1.0\n"
    r = hs(installed, "doctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["ok"], report
    r = hs(installed, "run", "--project", installed.project, "--", "/bin/echo", "hi")
    assert (r.returncode, r.stdout) == (0, "hi\n"), r.stderr


def test_the_installed_doctor_finds_what_the_checkouts_finds(installed: Installed) -> None:
    """Its dependencies work from the new place: the filter (pyseccomp), the bounds."""
    def in_force(command: Path) -> dict[str, bool]:
        r = call([command, "doctor", "--json"], cwd=installed.base, env=clean_env(installed))
        assert r.returncode == 0, r.stdout + r.stderr
        return {b["name"]: b["in_force"] for b in json.loads(r.stdout)["hardening"]}

    checkout = Path(sys.executable).parent / "harness-sandbox"
    assert in_force(installed.command) == in_force(checkout)


def test_the_installed_package_reads_its_data(installed: Installed) -> None:
    ask = ("from sandbox.macos import seatbelt; import json; from importlib import "
           "resources; print(len(seatbelt.base_profile()), len(seatbelt.network_profile()), "
           "len(json.loads(resources.files('launchers.serve').joinpath('schema.json')"
           ".read_text())))")
    r = call([installed.venv / "bin" / "python", "-I", "-c", ask], cwd=installed.base,
             env=clean_env(installed))
    assert r.returncode == 0, r.stderr
    assert all(int(n) > 0 for n in r.stdout.split()), r.stdout


def test_the_installed_command_starts_isolated(installed: Installed) -> None:
    """PYTHONPATH naming the agent's folder with a sitecustomize.py runs nothing of it."""
    lib = installed.project / "lib"
    lib.mkdir(exist_ok=True)
    marker = installed.project / "ran"
    (lib / "sitecustomize.py").write_text(PLANT.format(marker=str(marker)))
    for argv in (["--version"], ["doctor", "--json"],
                 ["run", "--project", str(installed.project), "--", "/bin/true"]):
        r = hs(installed, *argv, PYTHONPATH=str(lib))
        assert r.returncode == 0, (argv, r.stderr)
        assert not marker.exists(), (argv, marker.read_text())
    # The attack is real: the same venv's Python without -I runs it.
    call([installed.venv / "bin" / "python", "-c", "pass"], cwd=installed.base,
         env=clean_env(installed, PYTHONPATH=str(lib)))
    assert marker.exists()
    marker.unlink()


def test_the_self_guard_holds_for_the_installed_venv(installed: Installed) -> None:
    """A project that holds the environment is refused: the box could rewrite it."""
    r = hs(installed, "run", "--project", installed.base, "--", "/bin/echo", "hi")
    assert r.returncode == 125, r.stdout + r.stderr
    assert "hi" not in r.stdout
    assert f"harness-sandbox's own code, {installed.venv}/lib/" in r.stderr
    assert "harness-sandbox will not start" in r.stderr


def test_the_command_on_path_through_a_link_and_as_a_module(installed: Installed) -> None:
    """As pipx puts it on PATH (a link to the venv's launcher), and ``python -I -m``."""
    on_path = installed.base / "bin"
    on_path.mkdir(exist_ok=True)
    link = on_path / "harness-sandbox"
    if not link.is_symlink():
        link.symlink_to(installed.command)
    r = call(["harness-sandbox", "--version"], cwd=installed.base,
             env=clean_env(installed, PATH=f"{on_path}:/usr/bin:/bin"))
    assert (r.returncode, r.stdout) == (0, "harness-sandbox 0.1.0\n"), r.stderr
    r = call([installed.venv / "bin" / "python", "-I", "-m", "launchers", "--version"],
             cwd=installed.base, env=clean_env(installed))
    assert (r.returncode, r.stdout) == (0, "harness-sandbox 0.1.0\n"), r.stderr
