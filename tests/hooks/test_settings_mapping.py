"""The ``[sandbox]`` table is written once, as ``SandboxSettings``: what else names its
keys or defaults follows it."""

from __future__ import annotations

import inspect

from launchers.sandbox_table import sandbox_table
from sandbox.policy import Policy, PolicyOptions
from sandbox.settings import SandboxSettings


def test_an_empty_table_gives_the_settings_defaults() -> None:
    assert sandbox_table("config.toml", {}) == SandboxSettings()


def test_policy_create_names_only_table_keys_and_options_of_from_settings() -> None:
    own = set(inspect.signature(Policy.from_settings).parameters) - {"project", "settings"}
    strays = [k for k in PolicyOptions.__annotations__
              if k not in SandboxSettings._fields and k not in own]
    assert strays == []
