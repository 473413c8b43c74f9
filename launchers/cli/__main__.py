"""``python -m launchers.cli``: the ``harness-sandbox`` command."""


from launchers.cli.main import leave, main

leave(main())
