"""The Linux boxes: bwrap's, the container's /proc kind, the Landlock box; their
plans, stage, stand-in, causes, filter and C programs, in the real kernel and Docker."""
