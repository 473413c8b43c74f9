"""The box and the host runner (the ``sandbox`` package): plans, the real box, its
bounds, the supervisor, the warm box."""
