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


# For a whole message on a terminal: line breaks and tabs stay (a message may have
# several lines), every other control character and the bidirectional overrides (which
# reorder what is shown) are written out. Backslashes stay single: a seed's text that
# holds one is printed as the seed has it.
_TERMINAL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
             if c not in (0x09, 0x0A)}
_TERMINAL.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def for_terminal(text: str) -> str:
    """``text`` safe to write to a terminal: the agent's ``ESC ]52`` (a clipboard write)
    or ``ESC [2J`` quoted in a hook's reason arrives as four printable characters."""
    if text.isprintable():
        return text
    out = text.translate(_TERMINAL)
    if any(0xDC80 <= ord(ch) <= 0xDCFF for ch in out):
        out = "".join(f"\\x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else ch
                      for ch in out)
    return out
