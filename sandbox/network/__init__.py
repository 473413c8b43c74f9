"""The network by allow-list (``[sandbox] network = ["pypi.org", ...]``).

With a list the box keeps its own network namespace, which holds only ``lo``. A proxy
owned by the session (:mod:`.proxy`, outside the box) listens on a Unix socket that is
bound into the box; a forwarder in the box (:mod:`.forwarder`, started before the
command) listens on ``127.0.0.1:PROXY_PORT`` and relays each connection to it; the box's
environment (:func:`.box.proxy_env`) points HTTP clients at the forwarder. The proxy
decides each request against the list (:mod:`.allow`): it resolves names itself, and
connects only to the address it checked.
"""
