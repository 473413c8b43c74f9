"""Decide, before a session, whether a hook's files live where the agent cannot change them.

pathguard never runs anything: it stats and reads links, as the kernel would walk them.
"""
