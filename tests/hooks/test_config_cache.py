"""The user config's parse, kept between commands in the private temp root
(launchers/configcache.py): used only when sound, never in place of a changed file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launchers import bounded, configcache
from launchers.config import load

CONFIG = '[[hooks]]\nname = "h"\nevent = "PreToolUse"\ncommand = ["/bin/true"]\n' \
         '[sandbox]\nprocesses = 64\n'


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temp root of the test's own."""
    folder = tmp_path / "root"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    monkeypatch.setattr("sandbox.policy.private_tmp_root", lambda: str(folder))
    return folder


def kept(root: Path) -> list[Path]:
    return sorted(root.glob("config*.json"))


def no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(data: bytes, **_: object) -> None:
        raise AssertionError("parsed again")
    monkeypatch.setattr(bounded, "loads_toml", refuse)


def test_a_config_parsed_once_is_read_from_its_kept_parse(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    first = load(str(config), project=str(tmp_path / "project"))
    (made,) = kept(root)
    assert os.stat(made).st_mode & 0o777 == 0o600
    no_parser(monkeypatch)
    assert load(str(config), project=str(tmp_path / "project")) == first
    assert first.sandbox.processes == 64 and first.hooks[0].name == "h"


def test_a_changed_config_is_parsed_again(root: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    load(str(config), project=str(tmp_path / "project"))
    config.write_text(CONFIG.replace("64", "65"))
    assert load(str(config), project=str(tmp_path / "project")).sandbox.processes == 65
    assert len(kept(root)) == 1  # the last parse only
    config.write_text(CONFIG)
    assert load(str(config), project=str(tmp_path / "project")).sandbox.processes == 64


@pytest.mark.parametrize("spoil", ["mode", "link", "not-json", "not-an-object", "digest"])
def test_a_kept_parse_that_is_not_sound_is_ignored(
        root: Path, tmp_path: Path, spoil: str) -> None:
    data = CONFIG.encode()
    configcache.loads(data)
    (made,) = kept(root)
    forged = made.read_text().replace('"processes": 64', '"processes": 1')
    if spoil == "mode":
        made.write_text(forged)
        made.chmod(0o644)
    elif spoil == "link":
        other = tmp_path / "other.json"
        other.write_text(forged)
        other.chmod(0o600)
        made.unlink()
        made.symlink_to(other)
    elif spoil == "digest":
        made.write_text(forged.replace('"sha256": "', '"sha256": "0'))
    else:
        made.write_text("[]" if spoil == "not-an-object" else "{")
        made.chmod(0o600)
    assert configcache.loads(data)["sandbox"]["processes"] == 64


def test_nothing_is_kept_without_a_private_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setattr("sandbox.policy.private_tmp_root", lambda: str(shared))
    assert configcache.loads(CONFIG.encode())["sandbox"]["processes"] == 64
    assert not kept(shared)


def test_dates_are_parsed_every_time(root: Path) -> None:
    data = b"when = 1979-05-27T07:32:00Z\n" + CONFIG.encode()
    assert configcache.loads(data)["when"].year == 1979
    assert not kept(root)
