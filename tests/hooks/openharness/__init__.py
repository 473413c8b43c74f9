"""openHarness hooks: ``.oh/config.yaml``, its modes and answers, and trust by content."""
