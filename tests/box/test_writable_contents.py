"""What the host reads to decide what to run is read-only in the box wherever it lies:
a writable home keeps its toolkit config, git config and shell files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.config import SandboxSettings
from sandbox.errors import PolicyError
from sandbox.session import Session

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("bwrap") is None,
                       reason="needs bubblewrap on Linux"),
]


@pytest.fixture
def home(outside: Path) -> Path:
    h = outside / "home"
    (h / ".config" / "harness").mkdir(parents=True)
    (h / ".config" / "harness" / "config.toml").write_text("# reviewed\n")
    (h / ".gitconfig").write_text("[user]\n\tname = me\n")
    (h / ".bashrc").write_text("# reviewed\n")
    return h


def test_a_writable_home_keeps_what_the_host_runs_from(project: Path, home: Path,
                                                       outside: Path) -> None:
    marker = outside / "ran"
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("HARNESS_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    (home / "notes.txt").write_text("")  # there at the start: written again in the box
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c",
                   f"printf '[[hooks]]\\nname=\"x\"\\nevent=\"PreToolUse\"\\n"
                   f"command=[\"/bin/touch\", \"{marker}\"]\\nsandbox=false\\n' "
                   f">> {home}/.config/harness/config.toml; "
                   f"printf '[core]\\n\\tfsmonitor = \"touch {marker}\"\\n' >> {home}/.gitconfig;"
                   f" echo 'touch {marker}' >> {home}/.bashrc; "
                   f"echo work > {home}/notes.txt"])
        assert r.stderr.count(b"Read-only file system") == 3, r
    assert (home / ".config" / "harness" / "config.toml").read_text() == "# reviewed\n"
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = me\n"
    assert (home / ".bashrc").read_text() == "# reviewed\n"
    assert (home / "notes.txt").read_text() == "work\n"  # the folder stays writable
    # The host side for real: git in a repository there reads the global config.
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "status"], cwd=project, env=env, capture_output=True, check=False)
    assert not marker.exists()


@pytest.mark.parametrize("name", [".bash_profile", ".bash_login"])
def test_a_login_file_the_box_makes_is_said_at_the_end(project: Path, home: Path,
                                                      name: str) -> None:
    """~/.bash_profile and ~/.bash_login are not made for the session (a login bash
    would then skip ~/.profile), and a writable home's read-only top keeps the box from
    making them: nothing to say at the end."""
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"echo 'touch /tmp/x' > {home}/{name}"])
        assert r.returncode != 0 and b"Read-only file system" in r.stderr, r
    assert not (home / name).exists()
    assert [w for w in s.warnings if w.startswith("the box made")] == []


def test_git_s_global_config_named_by_its_variable_is_covered(project: Path,
                                                               outside: Path) -> None:
    """GIT_CONFIG_GLOBAL naming a missing file in a writable folder: made empty and
    read-only for the session, so the box cannot write the config host git reads, and
    removed at the end."""
    folder = outside / "cfg"
    folder.mkdir()
    config = folder / "gitconfig"
    env = {**os.environ, "HOME": str(outside / "nohome"), "GIT_CONFIG_GLOBAL": str(config)}
    settings = SandboxSettings(writable=(str(folder),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"printf '[core]\\n\\tfsmonitor = x\\n' > {config}"])
        assert r.returncode != 0 and b"Read-only file system" in r.stderr, r
    assert not config.exists()


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_missing_folder_the_host_reads_cannot_be_made(project: Path, outside: Path,
                                                        warm: bool) -> None:
    """git's ~/.config/git and the toolkit's data folder, missing (with ~/.local
    itself): made empty for the session and read-only in the box, the folders above
    them writable but fixed; what the session made goes at its end, what the box left
    beside stays."""
    home = outside / "bare-home"
    (home / ".config").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home)}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HARNESS_HOME"):
        env.pop(name, None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    script = (f"H={home}; mkdir -p $H/.config/git && echo '[core]' > $H/.config/git/config "
              "&& echo GIT; mkdir -p $H/.local/share/harness && echo '{{}}' > "
              "$H/.local/share/harness/trusted.json && echo DATA; "
              "mv $H/.local $H/.local-old && echo MOVED; "
              "echo '[core]' >> $H/.gitconfig && echo GITCONFIG; "
              "echo 'touch x' >> $H/.bashrc && echo BASHRC; "
              "mkdir -p $H/.config/fish && echo x > $H/.config/fish/config.fish && echo FISH; "
              "echo pip > $H/.local/share/left.txt; true")
    with Session.open(str(project), settings, env=env, warm=warm) as s:
        r = s.run(["sh", "-c", script])
        sizes = s.run(["sh", "-c", f"wc -c < {home}/.gitconfig; wc -c < {home}/.bashrc"])
    assert r.stdout == b"", r
    # Not made for the session either: the home's read-only top is cover enough.
    assert sizes.stdout.split() == [], sizes
    for gone in (".config/git", ".local", ".gitconfig", ".bashrc", ".config/fish"):
        assert not (home / gone).exists(), gone
    assert [w for w in s.warnings if w.startswith("the box made")] == []


@pytest.mark.parametrize("where", [".config/git/config", ".gitconfig"])
def test_without_the_covers_the_box_makes_git_s_global_config(
        project: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    from sandbox.policy import hostreads

    monkeypatch.setattr(hostreads, "covers", lambda *a, **k: hostreads.Covers())
    monkeypatch.setattr(hostreads, "homes_in", lambda *a, **k: ())
    home = outside / "bare-home"
    (home / ".config").mkdir(parents=True)
    marker = outside / "ran"
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"mkdir -p $(dirname {home}/{where}) && printf '[core]\\n\\t"
                               f"fsmonitor = \"touch {marker}\"\\n' > {home}/{where}"])
        assert r.returncode == 0, r
    # The host side for real: git in a repository reads the box's global config.
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "status"], cwd=project, env=env, capture_output=True, check=False)
    assert marker.exists()


# Renaming a folder above a protected path takes its bind along and frees the name.
MOVE_AND_MAKE = ("H={h}; mv $H/.local $H/.local-old && mkdir -p $H/.local/share/harness && "
                 "echo forged > $H/.local/share/harness/trusted.json && echo MOVED; "
                 "mv $H/.config/fish $H/.config/fish-old; "
                 "mv $H/.config $H/.config-old && mkdir -p $H/.config/fish && "
                 "echo forged > $H/.config/fish/config.fish && echo MOVED2; true")


@pytest.fixture
def deep_home(home: Path) -> Path:
    """The toolkit's data folder and fish's config, two folders below the home."""
    (home / ".local" / "share" / "harness").mkdir(parents=True)
    (home / ".local" / "share" / "harness" / "trusted.json").write_text("{}\n")
    (home / ".config" / "fish").mkdir(parents=True)
    (home / ".config" / "fish" / "config.fish").write_text("# reviewed\n")
    return home


def _moved(project: Path, home: Path) -> bytes:
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("XDG_DATA_HOME", None)
    env.pop("HARNESS_HOME", None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        return s.run(["sh", "-c", MOVE_AND_MAKE.format(h=home)]).stdout


def test_no_folder_above_what_the_host_reads_can_be_moved(project: Path,
                                                          deep_home: Path) -> None:
    assert _moved(project, deep_home) == b""
    assert (deep_home / ".local" / "share" / "harness" / "trusted.json").read_text() == "{}\n"
    assert (deep_home / ".config" / "fish" / "config.fish").read_text() == "# reviewed\n"
    assert not (deep_home / ".local-old").exists() and not (deep_home / ".config-old").exists()


def test_with_only_the_parent_held_a_move_forges_what_the_host_reads(
        project: Path, deep_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.linux import bwrap_args
    from sandbox.policy import hostreads

    monkeypatch.setattr(hostreads, "homes_in", lambda *a, **k: ())
    monkeypatch.setattr(bwrap_args, "_folders_between",
                        lambda path, *_: [os.path.dirname(path)])
    # (~/.config is held there too, as the parent of the toolkit's ~/.config/harness.)
    assert _moved(project, deep_home) == b"MOVED\n"
    assert (deep_home / ".local" / "share" / "harness" / "trusted.json").read_text() == \
        "forged\n"


def _replant(outside: Path, marker: Path) -> tuple[Path, bytes]:
    """A project inside a writable folder; the box moves the folder between them aside
    and makes the project anew, with a git config of its own. Then host git runs where
    the project was."""
    outer = outside / "outer"
    project = outer / "work" / "proj"
    project.mkdir(parents=True)
    settings = SandboxSettings(writable=(str(outer),), hide_defaults=False)
    script = (f"cd /; mv {outer}/work {outer}/work2 && git init -q {project} && "
              f"git -C {project} config core.fsmonitor 'touch {marker}' && echo MOVED; true")
    with Session.open(str(project), settings) as s:
        said = s.run(["sh", "-c", script]).stdout
    subprocess.run(["git", "status"], cwd=project, capture_output=True, check=False)
    return project, said


def test_no_folder_above_a_project_in_a_writable_folder_can_be_moved(outside: Path) -> None:
    marker = outside / "ran"
    project, said = _replant(outside, marker)
    assert said == b""
    assert not (project / ".git").exists() and not marker.exists()


def test_with_nothing_held_above_the_project_the_box_replants_it(
        outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.linux import bwrap_args

    monkeypatch.setattr(bwrap_args, "_folders_between", lambda *_: [])
    marker = outside / "ran"
    _, said = _replant(outside, marker)
    assert said == b"MOVED\n"
    assert marker.exists()  # host git ran the box's fsmonitor


def test_covers_are_named_by_real_paths_and_skip_what_hides_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home reached through a link: what is made is named by the real path (the
    session's roots are real), each missing folder above a cover first; no cover for
    ~/.bash_profile or ~/.bash_login, nor where the folder above is not the box's."""
    from sandbox.policy import hostreads

    # The covers of a home that is not a writable home's (whose top is read-only).
    monkeypatch.setattr(hostreads, "homes_in", lambda *a, **k: ())
    real = tmp_path / "real-home"
    real.mkdir()
    (real / ".bashrc").write_text("")
    link = tmp_path / "home"
    link.symlink_to(real)
    got = hostreads.covers([str(link)], {}, str(link))
    assert got.files == tuple(str(real / n) for n in (
        ".gitconfig", ".bash_aliases", ".profile", ".bash_logout", ".zshrc", ".zshenv",
        ".zprofile", ".zlogin", ".zlogout"))
    # fish's whole folder: it runs every file of its conf.d.
    assert got.folders == tuple(str(real / n) for n in (
        ".config", ".config/git", ".config/fish", ".config/harness", ".local",
        ".local/share", ".local/share/harness"))
    assert hostreads.covers([str(tmp_path / "elsewhere")], {}, str(link)) == \
        hostreads.Covers()


def _linked_config(outside: Path) -> tuple[Path, dict[str, str], SandboxSettings]:
    """A writable home whose ~/.config is a link to a folder in it (dotfiles)."""
    home = outside / "dot-home"
    (home / "dotfiles" / "config").mkdir(parents=True)
    (home / ".config").symlink_to(home / "dotfiles" / "config")
    env = {**os.environ, "HOME": str(home)}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HARNESS_HOME"):
        env.pop(name, None)
    return home, env, SandboxSettings(writable=(str(home),), hide_defaults=False)


def test_what_the_host_reads_through_a_link_in_a_writable_home_refuses_the_session(
        project: Path, outside: Path) -> None:
    """The box could point ~/.config elsewhere, and the host would read what it leads
    to: refused, naming the link and the fix."""
    home, env, settings = _linked_config(outside)
    (home / "dotfiles" / "config" / "harness").mkdir()
    with pytest.raises(PolicyError) as err, Session.open(str(project), settings, env=env):
        pass
    assert str(err.value) == (
        f"{home}/.config/harness, which the host reads to decide what to run, is reached "
        f"through {home}/.config, a link in a folder the box can write (it could point "
        f"it elsewhere): make {home}/.config the folder it leads to, or leave its folder "
        "out of [sandbox] writable")


def test_a_missing_name_through_a_link_is_not_made_but_said(project: Path,
                                                            outside: Path) -> None:
    """Missing behind the link: nothing is made there (the box could re-point the link
    past it), and what the box makes is said at the end."""
    home, env, settings = _linked_config(outside)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"mkdir -p {home}/.config/git && "
                               f"echo '[core]' > {home}/.config/git/config"])
    assert r.returncode == 0, r
    assert (f"the box made {home}/.config/git, which the host reads to decide what to run "
            "(git, a shell, or this toolkit); check it before you use them") in s.warnings


def test_a_home_reached_through_a_link_opens_with_its_files_read_only(
        project: Path, outside: Path) -> None:
    """HOME named through a link (as /home is on some systems): what the host reads is
    bound by where it is, and the session opens (it failed at its own plan)."""
    real = outside / "var-home"
    real.mkdir()
    (real / ".bashrc").write_text("# reviewed\n")
    linked = outside / "home-link"
    linked.symlink_to(real)
    env = {**os.environ, "HOME": str(linked)}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HARNESS_HOME"):
        env.pop(name, None)
    settings = SandboxSettings(writable=(str(linked),), hide_defaults=False)
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"echo x >> {linked}/.bashrc; echo x >> {real}/.bashrc"])
    assert r.stderr.count(b"Read-only file system") == 2, r
    assert (real / ".bashrc").read_text() == "# reviewed\n"


@pytest.mark.parametrize("target", ["dotfiles/bashrc", "dotfiles/missing"])
def test_a_file_the_host_reads_that_is_a_link_refuses_the_session(
        project: Path, outside: Path, target: str) -> None:
    """~/.bashrc a link into the writable home (a dotfiles layout): the box could write
    what it leads to, or point it elsewhere, and the host reads it. Refused, naming the
    link and the fix."""
    home = outside / "stow-home"
    (home / "dotfiles").mkdir(parents=True)
    (home / "dotfiles" / "bashrc").write_text("# reviewed\n")
    (home / ".bashrc").symlink_to(home / target)
    env = {**os.environ, "HOME": str(home)}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HARNESS_HOME"):
        env.pop(name, None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    with pytest.raises(PolicyError) as err, Session.open(str(project), settings, env=env):
        pass
    assert str(err.value) == (
        f"{home}/.bashrc, which the host reads to decide what to run, is a link in a "
        "folder the box can write (it could point it elsewhere, or write what it leads "
        f"to): make {home}/.bashrc what it leads to, or leave its folder out of "
        "[sandbox] writable")


def test_fish_s_folder_is_covered_whole(project: Path, outside: Path) -> None:
    """fish runs every file of ~/.config/fish/conf.d: made for the session as an empty
    read-only folder (a cover of config.fish alone made the folder the box then filled),
    and gone at the end."""
    home = outside / "fish-home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "HARNESS_HOME"):
        env.pop(name, None)
    settings = SandboxSettings(writable=(str(home),), hide_defaults=False)
    fish = home / ".config" / "fish"
    with Session.open(str(project), settings, env=env) as s:
        r = s.run(["sh", "-c", f"mkdir -p {fish}/conf.d || echo 'touch x' > {fish}/config.fish"])
        assert r.returncode != 0 and b"Read-only file system" in r.stderr, r
    assert not fish.exists()
