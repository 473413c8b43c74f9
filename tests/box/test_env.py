"""Environment rules: provider keys never pass; desktop variables do; TMPDIR in the box."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers.paths import REPO

from sandbox.policy import Policy
from sandbox.policy import env as sandbox_env
from sandbox.policy.env import DESKTOP_VARS, PROVIDER_KEYS, is_provider_key, scrub
from sandbox.policy.startenv import box_env, host_env

DOCS = REPO / "docs" / "host-hooks.md"


def _documented_keys() -> list[str]:
    """The provider keys as the user reads them (docs/host-hooks.md): the expectation
    comes from what the user is promised, not from a copy of the code's table."""
    text = DOCS.read_text()
    start = text.index("never receive a provider key:")
    end = text.index("and any name ending in", start)
    return re.findall(r"`([A-Z][A-Z0-9_]*)`", text[start:end])


DESIGN_PROVIDER_KEYS = _documented_keys()

KEPT = {"HOME": "/home/dana", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "API_KEYRING": "x"}


def test_the_provider_keys_are_exactly_the_documented_list() -> None:
    assert len(DESIGN_PROVIDER_KEYS) > 20
    assert list(PROVIDER_KEYS) == DESIGN_PROVIDER_KEYS


def test_no_documented_key_reaches_a_host_run_or_the_box(tmp_path: Path) -> None:
    """The behaviour, for real: every documented key (and one by the _API_KEY rule) set
    in the harness's environment, and neither a host run nor a boxed run sees one."""
    from sandbox.session import Session

    project = tmp_path / "p"
    project.mkdir()
    keys = [*DESIGN_PROVIDER_KEYS, "SOME_VENDOR_API_KEY"]
    harness = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **{k: "secret" for k in keys}}
    with Session.open(str(project), env=harness) as s:
        seen = [s.run(["/usr/bin/env"], boxed=boxed).stdout.decode() for boxed in (False, True)]
    for out in seen:
        names = {line.split("=", 1)[0] for line in out.splitlines()}
        assert not names & set(keys), names & set(keys)
        assert "secret" not in out
    assert subprocess.run(["/usr/bin/env"], env=harness, capture_output=True,
                          text=True).stdout.count("secret") == len(keys)  # they were there


def test_the_provider_key_list_lives_in_one_place() -> None:
    # Other modules import it; nobody keeps a copy.
    assert isinstance(sandbox_env.PROVIDER_KEYS, tuple)
    assert len(set(PROVIDER_KEYS)) == len(PROVIDER_KEYS)


@pytest.mark.parametrize("key", [*DESIGN_PROVIDER_KEYS, "FOO_API_KEY", "X_API_KEY"])
def test_scrub_removes_each_provider_key(key: str) -> None:
    assert is_provider_key(key)
    assert scrub({**KEPT, key: "secret"}) == KEPT


def test_scrub_keeps_everything_else() -> None:
    env = {**KEPT, "OPENAI_API_KEY_FILE": "/x", "MY_TOKEN": "t", "API_KEY": "plain"}
    assert scrub(env) == env


def test_scrub_returns_a_new_dict() -> None:
    env = dict(KEPT)
    out = scrub(env)
    out["NEW"] = "1"
    assert "NEW" not in env


def test_desktop_variables_are_the_four_named() -> None:
    assert DESKTOP_VARS == (
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
    )


def _policy(tmp_path: Path, env: dict[str, str], *, boxed: bool = True) -> Policy:
    (tmp_path / "proj").mkdir(exist_ok=True)
    (tmp_path / "ptmp").mkdir(exist_ok=True)
    return Policy.create(
        str(tmp_path / "proj"), private_tmp=str(tmp_path / "ptmp"), env=env, boxed=boxed
    )


@pytest.mark.parametrize("boxed", [True, False])
def test_desktop_variables_pass_through_to_host_hooks(tmp_path: Path, boxed: bool) -> None:
    desktop = {name: f"value of {name}" for name in DESKTOP_VARS}
    env = host_env(_policy(tmp_path, {**desktop, "ANTHROPIC_API_KEY": "k"}, boxed=boxed))
    assert {k: env[k] for k in DESKTOP_VARS} == desktop
    assert "ANTHROPIC_API_KEY" not in env


def test_with_no_sandbox_path_is_unchanged(tmp_path: Path) -> None:
    path = f".::relative:{tmp_path / 'proj'}:/usr/bin"
    env = host_env(_policy(tmp_path, {"PATH": path}, boxed=False))
    assert env["PATH"] == path


def test_the_box_environment_is_scrubbed_and_uses_the_box_tmp(tmp_path: Path) -> None:
    env = box_env(_policy(tmp_path, {**KEPT, "TMPDIR": "/var/tmp/me", "GROQ_API_KEY": "k"}))
    assert env == {**KEPT, "TMPDIR": "/tmp"}
