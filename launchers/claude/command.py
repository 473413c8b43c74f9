"""A Claude Code hook's command string, turned into a harness argv.

Claude Code runs a hook's ``command`` through a shell. Harness runs an argv with no
shell. A string with no shell syntax (no pipes, redirections, lists, substitutions,
globs, comments or variables other than the ones expanded here) becomes its words, as
the shell would split them; anything else becomes ``["/bin/sh", "-c", <string>]``.

Either way ``$CLAUDE_PROJECT_DIR`` (``${CLAUDE_PROJECT_DIR}``) becomes the project,
``$HOME`` and a leading ``~`` the home folder: harness sets neither variable for a hook,
and a path must be written out for the guard to check it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from pathguard.records import NamedTuple

SHELL = "/bin/sh"
# Outside quotes these make the string shell syntax: lists, pipes, redirections,
# sub-shells, command substitution, globs, brace expansion.
_META = set("|&;<>()`*?[]{}\n")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class Command(NamedTuple):
    """``argv`` to run; ``shell`` when it is ``/bin/sh -c``; ``words`` the string's words
    with the variables expanded (for a shell string, as they can be told)."""

    argv: tuple[str, ...]
    shell: bool
    words: tuple[str, ...]


def _dq_escape(value: str) -> str:
    """``value`` for the inside of a double-quoted shell word."""
    return re.sub(r'([\\"$`])', r"\\\1", value)


class _Scan:
    """One pass over the string: the words, the string rebuilt with the known variables
    written out, and whether anything in it needs a shell."""

    def __init__(self, text: str, values: Mapping[str, str], home: str,
                 rewrite: Mapping[str, str]) -> None:
        self.text = text
        self.rewrite = rewrite
        self.start = 0
        self.values = values
        self.home = home
        self.words: list[str] = []
        self.out: list[str] = []
        self.word: list[str] = []
        self.in_word = False
        self.shell = False
        self.i = 0

    def begin(self) -> None:
        """A word starts (or goes on) here."""
        if not self.in_word:
            self.start = len(self.out)
            self.in_word = True

    def end_word(self) -> None:
        if self.in_word:
            word = "".join(self.word)
            new = self.rewrite.get(word)
            if new is not None:
                word = new
                self.out[self.start :] = [shlex.quote(new)]
            self.words.append(word)
        self.word, self.in_word = [], False

    def variable(self, quoted: bool) -> None:
        """At a ``$``: a known variable is written out; anything else needs a shell."""
        text, i = self.text, self.i
        m = None
        if text.startswith("{", i + 1):
            close = text.find("}", i + 2)
            if close != -1 and _NAME.fullmatch(text[i + 2 : close]):
                name, end = text[i + 2 : close], close + 1
                m = (name, end)
        else:
            found = _NAME.match(text, i + 1)
            if found:
                m = (found.group(), found.end())
        self.begin()
        if m is None or m[0] not in self.values:
            self.shell = True
            self.word.append("$")
            self.out.append("$")
            self.i += 1
            return
        value = self.values[m[0]]
        self.word.append(value)
        self.out.append(_dq_escape(value) if quoted else shlex.quote(value))
        self.i = m[1]

    def run(self) -> None:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t":
                self.end_word()
                self.out.append(c)
                self.i += 1
            elif c == "'":
                self.single()
            elif c == '"':
                self.double()
            elif c == "\\":
                nxt = text[self.i + 1 : self.i + 2]
                if nxt != "\n":
                    self.begin()
                    self.word.append(nxt)
                self.out.append(text[self.i : self.i + 2])
                self.i += 2
            elif c == "$":
                self.variable(quoted=False)
            elif c == "~" and not self.in_word and text[self.i + 1 : self.i + 2] in ("", "/",
                                                                                    " ", "\t"):
                self.begin()
                self.word.append(self.home)
                self.out.append(shlex.quote(self.home))
                self.i += 1
            else:
                if c in _META or (c == "#" and not self.in_word):
                    self.shell = True
                self.begin()
                self.word.append(c)
                self.out.append(c)
                self.i += 1
        self.end_word()

    def single(self) -> None:
        close = self.text.find("'", self.i + 1)
        if close == -1:
            # An open quote: only a shell can say what it means (an error).
            self.shell = True
            close = len(self.text)
        self.begin()
        self.word.append(self.text[self.i + 1 : close])
        self.out.append(self.text[self.i : close + 1])
        self.i = close + 1

    def double(self) -> None:
        text = self.text
        self.begin()
        self.out.append('"')
        self.i += 1
        while self.i < len(text) and text[self.i] != '"':
            c = text[self.i]
            if c == "\\" and text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                self.word.append(text[self.i + 1])
                self.out.append(text[self.i : self.i + 2])
                self.i += 2
            elif c == "$":
                self.variable(quoted=True)
            else:
                if c == "`":
                    self.shell = True
                self.word.append(c)
                self.out.append(c)
                self.i += 1
        if self.i >= len(text):
            self.shell = True
        else:
            self.out.append('"')
        self.i += 1


def convert(text: str, *, project: str | None, home: str,
            rewrite: Mapping[str, str] | None = None) -> Command:
    """The argv for Claude Code command string ``text``. ``rewrite`` maps a word (as
    expanded) to the word to write instead: a hook file's new place. With ``project``
    None, ``$CLAUDE_PROJECT_DIR`` is left to a shell."""
    values = {"HOME": home}
    if project is not None:
        values["CLAUDE_PROJECT_DIR"] = project
    scan = _Scan(text, values, home, rewrite or {})
    scan.run()
    words = tuple(scan.words)
    # FOO=bar cmd: an assignment only a shell makes.
    shell = scan.shell or not words or bool(_ASSIGNMENT.match(words[0]))
    if shell:
        return Command((SHELL, "-c", "".join(scan.out).strip()), True, words)
    return Command(words, False, words)
