"""Putting back a link the box replaced: one step shared by the session's end for git's
links (:mod:`sandbox.git.report`) and for other tools' (:mod:`sandbox.session.watched`). A
leaf: the standard library only."""

from __future__ import annotations

import os
import time


def restore_link(path: str, text: str) -> str | None:
    """Put the link ``path`` back as it was (``text``, what it read at the start): what
    the box left in its place is renamed aside beside it. Returns where that went ("" if
    nothing was there), or None when it could not be done. Every folder above the link
    was fixed in place in the box, so the folder is the one checked at the start; it is
    opened without following a link all the same."""
    folder, name = os.path.split(path)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        aside = ""
        if os.path.lexists(path):
            aside = f"{name}.from-the-box-{int(time.time())}"
            os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
            aside = os.path.join(folder, aside)
        os.symlink(text, name, dir_fd=fd)
        return aside
    except OSError:
        return None
    finally:
        os.close(fd)
