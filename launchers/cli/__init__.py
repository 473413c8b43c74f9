"""``harness-sandbox``: the command line. :func:`launchers.cli.main.main` is the entry."""
