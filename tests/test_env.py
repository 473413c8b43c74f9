"""Environment rules: provider keys never pass; desktop variables do; TMPDIR in the box."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import env as sandbox_env
from sandbox.env import DESKTOP_VARS, PROVIDER_KEYS, box_env, host_env, is_provider_key, scrub
from sandbox.policy import Policy

# The list as DESIGN.md names it, written out again so a change to either shows here.
DESIGN_PROVIDER_KEYS = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEX_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "PERPLEXITY_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
]

KEPT = {"HOME": "/home/dana", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "API_KEYRING": "x"}


def test_the_provider_keys_are_exactly_the_designed_list() -> None:
    assert list(PROVIDER_KEYS) == DESIGN_PROVIDER_KEYS


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
