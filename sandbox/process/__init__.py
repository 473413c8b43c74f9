"""Process lifetime: the supervisor that runs any plan, and what ends what it started.

Imports nothing at package level: the watchdog program imports its modules with only
the standard library on its path.
"""
