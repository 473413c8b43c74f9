"""openHarness hooks: ``hooks:`` in ``.oh/config.yaml`` over the same backends."""
