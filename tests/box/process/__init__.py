"""Processes (sandbox/process/): the supervisor, control groups, host seats, terminals
and what a session made."""
