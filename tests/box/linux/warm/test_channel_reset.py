"""A run's init that ended with the host's request unread (its setup failed before it
read it) leaves ECONNRESET on the host's end of the channel, which the kernel reports
before the message the init sent first: the host still reads that last word
(sandbox/linux/warm/channel.py:recv). Real sockets, as the warm box makes them."""

from __future__ import annotations

import socket

from sandbox.linux.warm.channel import recv
from sandbox.linux.warm.inbox import pack


def test_the_init_s_last_word_is_read_after_the_reset_its_end_left() -> None:
    host, init = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        init.send(pack([b"exit", b"setup", b"seccomp: Invalid argument"]))
        host.send(pack([b"run"]))  # the request, never read
        init.close()
        assert recv(host) == [b"exit", b"setup", b"seccomp: Invalid argument"]
        assert recv(host) is None
    finally:
        host.close()
