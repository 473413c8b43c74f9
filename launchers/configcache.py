"""The user config's TOML: its last parse, kept between commands with its digest.

``run`` and ``hook`` read the user config at every tool call, and importing ``tomllib``
(with ``datetime``, ``string`` and its patterns) costs each about 3 ms, where parsing a
config of a few hooks costs 0.1 ms. What the parse gives depends only on the file's
bytes, so the last one is kept as JSON, with the SHA-256 of those bytes, in the per-user
private temp root (``/tmp/harness-sandbox-<uid>``, mode 0700), beside the kept
system-call filter (:mod:`sandbox.linux.filtercache`) and with the same trust: a session
refuses a root that lies in a folder its box could write, and a box sees only its own
session's folder in it. A kept parse is used only when it is a regular file (not a
link) owned by this user, of mode 0600, with one link, in that root, holding a JSON
object for the same digest; anything else is ignored and the bytes are parsed as
before (and kept in its place). One parse is kept, the last: a machine's commands read
one user config, and a test suite's many make one file. The parse then
goes through the same checks as a fresh one (:mod:`launchers.config`).

A document whose values JSON cannot hold as they are (TOML's dates and times) is parsed
every time. Nothing is kept where the root does not exist yet (the first session
makes it).
"""

from __future__ import annotations

import json
import os
from typing import Any

from launchers import bounded
from sandbox.fs import kept
from sandbox.fs.digest import sha256_hex

# A kept parse is JSON of a config of at most CONFIG_BYTES: never more than a few times
# that (escapes).
_MAX = 8 * bounded.CONFIG_BYTES


def loads(data: bytes) -> dict[str, Any]:
    """:func:`launchers.bounded.loads_toml` of ``data``, from the kept parse of the same
    bytes when there is a sound one (and kept for the next command when not). Raises
    as that function does."""
    path = _kept_path(data)
    digest = sha256_hex(data)
    if path is not None:
        doc = _read_kept(path, digest)
        if doc is not None:
            return doc
    doc = bounded.loads_toml(data)
    if path is not None:
        _keep(path, digest, doc)
    return doc


def _kept_path(data: bytes) -> str | None:
    """Where the last parse is kept, or None when there is no private root."""
    if len(data) > bounded.CONFIG_BYTES:
        return None  # refused by the parse: nothing to keep
    from sandbox.policy import private_tmp_root

    root = private_tmp_root()
    return os.path.join(root, "config.json") if kept.private(root) else None


def _read_kept(path: str, digest: str) -> dict[str, Any] | None:
    """The parse kept at ``path`` of the bytes of ``digest``, if it is one this user can
    trust (see above)."""
    text = kept.read(path, mode=0o600, most=_MAX)
    if text is None:
        return None
    try:
        got = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(got, dict) or got.get("sha256") != digest:
        return None
    doc = got.get("toml")
    return doc if isinstance(doc, dict) else None


def _keep(path: str, digest: str, doc: dict[str, Any]) -> None:
    """Write the parse beside its final name, then move it there (a reader sees a whole
    file or none). A value JSON cannot hold as it is keeps nothing."""
    try:
        text = json.dumps({"sha256": digest, "toml": doc}, ensure_ascii=False)
    except (TypeError, ValueError):
        return  # dates and times
    if json.loads(text)["toml"] != doc:
        return  # a value JSON would give back changed (a float NaN is never equal)
    kept.write(path, text.encode("utf-8", "surrogatepass"), mode=0o600)
