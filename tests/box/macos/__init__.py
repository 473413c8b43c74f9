"""The macOS box: its plans read on any machine, and the real ``sandbox-exec`` on a Mac."""
