"""Shared fixtures. ``tests/`` is on ``sys.path`` (pytest puts a conftest's folder
there), so the helpers import as ``helpers.*``."""

import os

from hypothesis import settings

# Property tests run with a fixed seed and their own bounded example counts, so a run in
# CI is repeatable and the suite's time stays known. HYPOTHESIS_PROFILE=explore looks
# further, with fresh random examples, when hunting for new cases by hand.
settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
