"""SHA-256 from the interpreter's own module, for what is digested on a command's path.

``hashlib`` loads OpenSSL (``_hashlib``), about three milliseconds of every start of the
command that imports it; the interpreter's built-in ``_sha256`` (``_sha2`` from Python
3.12) gives the same digest at no cost. A leaf: imports nothing of ours.
"""

from __future__ import annotations


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data``, in hexadecimal."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # 3.12 and later
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())
