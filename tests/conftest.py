"""Shared fixtures. ``tests/`` is on ``sys.path`` (pytest puts a conftest's folder
there), so the helpers import as ``helpers.*``."""
