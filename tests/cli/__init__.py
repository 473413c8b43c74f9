"""The ``harness-sandbox`` command line, run as a user runs it, and how it starts."""
