"""The hook protocols (harness ``[[hooks]]``, openHarness ``hooks:``), records, and the CLI."""
