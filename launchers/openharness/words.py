"""A shell command string as words: what the path guard checks of an openHarness command.

The run itself hands the string to ``/bin/sh -c``; these words are only for the guard.
"""

from __future__ import annotations

import re
import shlex

# Words sh runs without looking a file up on PATH: keywords and builtins that have no
# program of their own. A command starting with one is checked as arguments of /bin/sh.
SHELL_WORDS: frozenset[str] = frozenset((
    "!", "{", "}", "[[", "]]", "if", "then", "else", "elif", "fi", "case", "esac", "for",
    "select", "while", "until", "do", "done", "in", "function", "time", ".", ":", "break",
    "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
    "times", "trap", "unset", "cd", "alias", "unalias", "read", "wait", "umask", "ulimit",
    "jobs", "fg", "bg", "getopts", "hash", "type", "command", "local", "source",
))

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPERATOR_CHARS = frozenset("();<>|&")


def split_words(command: str) -> list[str]:
    """``command`` split as sh would split words, with ``; | & && || ( ) < > >>`` as
    words of their own. Raises ValueError (an unclosed quote)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def guard_words(command: str) -> tuple[str, ...]:
    """The words of a shell command the path guard checks, first the program.

    Best effort, like every check of a shell string: operators and a redirection's file
    descriptor number are left out (``2>/dev/null`` leaves ``/dev/null``); a leading
    ``NAME=value`` is checked as an argument; a command that starts with a shell word
    (``exit``, ``cd``, ``if`` ...) is checked as arguments of ``/bin/sh``. Only the first
    program is looked up on PATH; later words are checked as arguments are (a word
    naming an existing file, or shaped like a path).
    """
    raw = split_words(command)
    words: list[str] = []
    for i, word in enumerate(raw):
        if word and set(word) <= _OPERATOR_CHARS:
            continue
        following = raw[i + 1] if i + 1 < len(raw) else ""
        before = raw[i - 1] if i > 0 else ""
        if word.isdigit() and following[:1] in ("<", ">"):
            continue  # the 2 of 2>file
        if (word.isdigit() or word == "-") and before[-2:] in (">&", "<&"):
            continue  # the 2 of >&2
        words.append(word)
    assignments: list[str] = []
    while words and _ASSIGNMENT.match(words[0]):
        assignments.append(words.pop(0))
    if not words or words[0] in SHELL_WORDS:
        return ("/bin/sh", *words, *assignments)
    return (words[0], *words[1:], *assignments)
