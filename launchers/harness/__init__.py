"""The harness protocol: the hook events and answers, the hook runner, and its records."""
