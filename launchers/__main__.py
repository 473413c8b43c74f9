"""``python -m launchers``: the ``harness-sandbox`` command."""

import sys

from launchers.cli.main import main

sys.exit(main())
