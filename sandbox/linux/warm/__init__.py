"""The warm box: one bubblewrap box per session, each command started inside it.

:mod:`sandbox.linux.warm.helper` runs in the box and starts each command in a PID, mount and
IPC namespace of its own; :mod:`sandbox.linux.warm.client` is the host's side of it.
"""
