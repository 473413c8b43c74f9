"""Text that reaches a terminal. A leaf: imports nothing of ours.

A name a boxed command chose (a file, a folder, a git key's value) may hold control
characters; printed raw, ``ESC [ ...`` would drive the user's terminal. Every message
that quotes a path passes it through :func:`escape` first.
"""

from __future__ import annotations

_TABLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_TABLE[ord("\\")] = "\\\\"


def escape(text: str) -> str:
    """``text`` with C0, DEL and C1 control characters written as ``\\xNN`` (four
    printable characters) and a backslash doubled, so an escaped name cannot pass for
    another; undecodable bytes (surrogate escapes) as ``\\xNN`` of the byte."""
    if text.isprintable() and "\\" not in text:
        return text
    out: list[str] = []
    for ch in text:
        o = ord(ch)
        if o in _TABLE:
            out.append(_TABLE[o])
        elif 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    return "".join(out)
