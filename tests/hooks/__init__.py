"""The hook protocols and what surrounds them: the user config, the harness hooks,
their answers, failures and records."""
