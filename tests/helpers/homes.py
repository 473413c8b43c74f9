"""A home of a test's own with the host's package caches in it, and the environment
that names it (tests/box/test_caches.py, tests/box/test_warm_caches.py)."""

from __future__ import annotations

import os
from pathlib import Path


def host_home(outside: Path, caches: tuple[str, ...]) -> Path:
    """A home under ``outside`` (not in /tmp, which is the box's own) with a file in
    each of the host's cache folders ``caches``."""
    h = outside / "home"
    for rel in caches:
        (h / rel).mkdir(parents=True)
        (h / rel / "entry").write_text(f"the host's own {rel}\n")
    for p in [h, *h.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return h


def home_env(home: Path) -> dict[str, str]:
    """This environment with ``home`` as HOME, and no variable of its own that moves a
    cache, the data folders or pip's config."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("XDG_DATA_HOME", "XDG_CACHE_HOME") and not k.startswith("npm_config")
         and not k.endswith("_CACHE_DIR")}
    e.update(HOME=str(home), PIP_CONFIG_FILE="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return e
