"""The docs cannot drift: the CLI reference names what the parser has, every relative
link resolves, the architecture's map is what the modules say, the README stays short."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO

from launchers.cli.main import parser

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
CLI = DOCS / "cli.md"
README_LINES = 260

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


# -- the CLI reference against the parser --------------------------------------------


def _subparsers(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the parser has no subcommands")


def _options(p: argparse.ArgumentParser) -> set[str]:
    """Every long and short option of ``p``, without argparse's own ``-h``/``--help``."""
    out: set[str] = set()
    for action in p._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        out.update(action.option_strings)
    return out


def _choices(p: argparse.ArgumentParser) -> set[str]:
    out: set[str] = set()
    for action in p._actions:
        if not action.option_strings and action.choices is not None:
            out.update(str(c) for c in action.choices)
    return out


def _prose(text: str) -> list[str]:
    """The lines of a page outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def cli_sections() -> dict[str, str]:
    """docs/cli.md's sections: the command each ``## `harness-sandbox X` `` heading
    names ("" for the command itself) -> the section's text, code blocks included."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in CLI.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^## `harness-sandbox(?: ([a-z-]+))?`\s*$", line)
        if m:
            current = sections.setdefault(m.group(1) or "", [])
        elif line.startswith("## "):
            current = None
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def test_the_cli_reference_names_every_command_and_no_other() -> None:
    documented = set(cli_sections()) - {""}
    assert documented == set(_subparsers(parser())), (
        "docs/cli.md's ## `harness-sandbox X` sections against the parser's commands")


@pytest.mark.parametrize("command", sorted(_subparsers(parser())))
def test_the_cli_reference_names_every_option_and_no_other(command: str) -> None:
    section = cli_sections()[command]
    have = _options(_subparsers(parser())[command])
    named = set(_OPTION.findall(section)) - {"--help"}
    assert have - named == set(), f"options of {command} that docs/cli.md does not name"
    assert named - have == set(), f"options docs/cli.md names for {command} that do not exist"
    for choice in _choices(_subparsers(parser())[command]):
        assert f"`{choice}`" in section, f"{command}: its argument's choice {choice!r}"


def test_the_cli_reference_names_the_top_options() -> None:
    top = cli_sections()[""]
    have = _options(parser())
    named = set(_OPTION.findall(top)) - {"--help", "--config", "--project"}
    assert have == named


# -- links ----------------------------------------------------------------------------


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: markup dropped, lower case, every
    character but letters, digits, spaces, ``-`` and ``_`` removed, spaces made ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page has, a repeated heading getting ``-1``, ``-2``, ... as on
    GitHub."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose(path.read_text(encoding="utf-8")):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The relative links of a page's prose (not of its code blocks, nor inline code)."""
    out: list[str] = []
    for line in _prose(path.read_text(encoding="utf-8")):
        line = re.sub(r"`[^`]*`", "", line)
        out.extend(m.group(1) for m in _LINK.finditer(line))
    return [t for t in out if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        name, _, anchor = target.partition("#")
        dest = (page.parent / name).resolve() if name else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    assert broken == []


def test_the_slugs_are_githubs() -> None:
    assert slug("Does the box work here: `harness-sandbox doctor`") == \
        "does-the-box-work-here-harness-sandbox-doctor"
    assert slug("What each tool sends in `tool_input`") == "what-each-tool-sends-in-tool_input"
    assert slug("Records, replay and resume") == "records-replay-and-resume"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Top\n\n[ok](#top) [gone](nowhere.md) [`x`](p.md#top)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    assert links(page) == ["#top", "nowhere.md", "p.md#top"]
    assert anchors(page) == {"top"}


# -- the architecture's map, the README's length --------------------------------------


def test_the_architecture_map_is_what_the_modules_say() -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "docs_map.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_readme_is_short() -> None:
    n = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_LINES, f"README.md has {n} lines; move the detail into docs/"
