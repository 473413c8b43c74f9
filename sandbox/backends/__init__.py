"""The backends: ``(Policy, argv) -> LaunchPlan``, pure. bwrap (Linux), seatbelt (macOS),
host (a hook on the machine)."""
