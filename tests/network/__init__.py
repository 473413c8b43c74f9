"""The network by allow-list, and the Unix sockets the box may reach."""
