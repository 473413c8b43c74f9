"""Bounded reading of everything that comes from outside: hook output, openHarness
answers and HTTP bodies, records, configs, and a tool call's arguments.

Each document has a size limit and a nesting limit, and the nesting is measured without
recursion on the input's shape: JSON and TOML texts are scanned for their bracket depth
(outside strings and comments) before they are parsed, YAML is measured from the
parser's event stream (aliases counted as what they expand to) before it is composed,
and a value already in hand is walked with an explicit stack. Python's own parsers
recurse once per level, so a document past the limit never reaches them.

A leaf module: it imports nothing from the package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any

# Arrays and objects (sequences and mappings) inside one another, the outermost counted.
MAX_DEPTH = 100
# Values in one document once YAML aliases are expanded, or in a tool call's arguments.
MAX_VALUES = 1_000_000
# A hook's answer on stdout, and an openHarness HTTP hook's reply (the supervisor's
# default output cap: an answer that was cut is not an answer).
ANSWER_BYTES = 1 << 20
# The user config (TOML).
CONFIG_BYTES = 1 << 20
# An openHarness config file: PyYAML builds it in pure Python, about a second for this.
YAML_BYTES = 128 << 10
# One line of a record file. An effect holds a run's stdout and stderr (each 1 MiB by
# default) with JSON's escapes, so this leaves room.
RECORD_LINE_BYTES = 32 << 20
# The JSON line a hook receives on stdin (a tool call's arguments, or a prompt).
ENVELOPE_BYTES = 32 << 20


class BoundsError(ValueError):
    """A document is over a limit. ``str()`` is a phrase that follows its subject:
    ``"nests deeper than 100 levels"``."""


def size_text(limit: int) -> str:
    """A byte limit as people read it: ``1 MiB``, ``128 KiB``, ``4,095 bytes``."""
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit:,} bytes"


def too_deep() -> BoundsError:
    return BoundsError(f"nests deeper than {MAX_DEPTH} levels")


def too_large(limit: int) -> BoundsError:
    return BoundsError(f"is larger than {size_text(limit)}")


def too_many() -> BoundsError:
    return BoundsError(f"holds more than {MAX_VALUES:,} values")


# -- measuring texts ---------------------------------------------------------------

# +1 for an opening bracket, -1 for a closing one, indexed by byte.
_DELTA = [0] * 256
for _c in b"[{":
    _DELTA[_c] = 1
for _c in b"]}":
    _DELTA[_c] = -1

# The patterns below are compiled at their first use (re keeps them): a text with few
# brackets never needs one, and compiling them all cost every command's start 0.4 ms.
# A JSON string, or the rest of the text after an unclosed quote. The optional closing
# quote lets every attempt succeed, so the scan never backtracks.
_JSON_STRING = r'"(?:[^"\\]+|\\.)*"?'
# TOML's four kinds of string and its comments, each possibly unclosed at the end.
_TOML_SKIP = (
    r'"""(?:[^"\\]+|\\.|"(?!""))*(?:"""|\Z)'
    r"|'''(?:[^']+|'(?!''))*(?:'''|\Z)"
    r'|"(?:[^"\\\n]+|\\.)*"?'
    r"|'[^'\n]*'?"
    r"|#[^\n]*"
)
# YAML's quoted scalars and comments. Plain scalars may hold brackets too; counting them
# can only overstate the depth of a text with over a hundred unclosed ones.
_YAML_SKIP = r"'(?:[^']+|'')*'?" r'|"(?:[^"\\]+|\\.)*"?' r"|#[^\n]*"
_NOT_BRACKET = r"[^\[\]{}]+"


def bracket_depth(text: str, skip: str = _JSON_STRING) -> int:
    """The deepest nesting of ``[]`` and ``{}`` in ``text``, outside what ``skip`` matches
    (JSON strings by default); when there are no more than :data:`MAX_DEPTH` opening
    brackets at all, their count (the depth cannot be more). Linear, and done by the
    regex engine and ``accumulate``: no Python loop over the text."""
    opening = text.count("[") + text.count("{")
    if opening <= MAX_DEPTH:
        return opening
    brackets = re.sub(_NOT_BRACKET, "", re.sub(skip, "", text, flags=re.DOTALL)
                      ).encode("ascii")
    return max(accumulate(map(_DELTA.__getitem__, brackets)), default=0)


def loads_json(data: str | bytes, *, max_bytes: int | None = None) -> Any:
    """``json.loads`` within the limits. Raises :class:`BoundsError` over a limit, and
    ``ValueError`` for text that is not JSON (bytes that are not UTF-8 included)."""
    if max_bytes is not None and len(data) > max_bytes:
        raise too_large(max_bytes)
    # As json.loads does: UTF-8, or UTF-16/32 told by the first bytes.
    text = data.decode(json.detect_encoding(data), "surrogatepass") \
        if isinstance(data, bytes) else data
    if bracket_depth(text) > MAX_DEPTH:
        raise too_deep()
    try:
        return json.loads(text)
    except RecursionError as err:  # a backstop: the scan above keeps this from happening
        raise too_deep() from err


def loads_toml(data: bytes, *, max_bytes: int = CONFIG_BYTES) -> dict[str, Any]:
    """``tomllib.loads`` within the limits (dotted keys and table headers counted too).
    Raises :class:`BoundsError`, ``UnicodeDecodeError`` or ``tomllib.TOMLDecodeError``."""
    import tomllib

    if len(data) > max_bytes:
        raise too_large(max_bytes)
    text = data.decode("utf-8")
    if bracket_depth(text, _TOML_SKIP) > MAX_DEPTH:
        raise too_deep()
    try:
        doc = tomllib.loads(text)
    except RecursionError as err:
        raise too_deep() from err
    check_value(doc)
    return doc


def loads_yaml(text: str, loader: type[Any], *, max_bytes: int = YAML_BYTES) -> Any:
    """``yaml.load(text, Loader=loader)`` (a safe loader) within the limits.

    The event stream is measured first: depth, and the number of values with every alias
    counted as the values it stands for, so a "billion laughs" document is refused
    before it is built. An alias to a node that is still open (a recursive document) is
    refused too. Raises :class:`BoundsError` or ``yaml.YAMLError``.
    """
    import yaml

    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise too_large(max_bytes)
    # PyYAML's scanner reads a deep flow collection ahead at a cost of its depth per
    # token; brackets are counted first so that an obviously deep text costs nothing.
    if bracket_depth(text, _YAML_SKIP) > MAX_DEPTH:
        raise too_deep()
    # libyaml's parser, where PyYAML has it, gives the same events twenty times faster;
    # on a text it refuses, the caller's own parser measures it (and words the error).
    fast = getattr(yaml, "CSafeLoader", None)
    try:
        _measure_yaml(yaml.parse(text, Loader=fast or loader))
    except yaml.YAMLError:
        if fast is None:
            raise
        _measure_yaml(yaml.parse(text, Loader=loader))
    try:
        return yaml.load(text, Loader=loader)  # the caller passes a safe loader
    except RecursionError as err:
        raise too_deep() from err


class _YamlMeasure:
    """The size and depth of a YAML document from its events, aliases expanded.

    One frame per open collection: [values so far (itself included), the height of its
    tallest child, its anchor]; the first frame is the document."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = [[0, 0, None]]
        self.anchors: dict[str, tuple[int, int]] = {}
        self.open_anchors: set[str] = set()

    def add(self, values: int, height: int) -> None:
        top = self.stack[-1]
        top[0] += values
        top[1] = max(top[1], height)
        if sum(frame[0] for frame in self.stack) > MAX_VALUES:
            raise too_many()
        if len(self.stack) - 1 + height > MAX_DEPTH:
            raise too_deep()

    def alias(self, anchor: str) -> None:
        if anchor in self.open_anchors:
            raise BoundsError("refers to itself through an alias")
        self.add(*self.anchors.get(anchor, (1, 0)))

    def scalar(self, anchor: str | None) -> None:
        self.add(1, 0)
        if anchor is not None:
            self.anchors[anchor] = (1, 0)

    def start(self, anchor: str | None) -> None:
        if len(self.stack) > MAX_DEPTH:
            raise too_deep()
        self.stack.append([1, 0, anchor])
        if anchor is not None:
            self.open_anchors.add(anchor)

    def end(self) -> None:
        values, child_height, anchor = self.stack.pop()
        if anchor is not None:
            self.open_anchors.discard(anchor)
            self.anchors[anchor] = (values, child_height + 1)
        self.add(values, child_height + 1)


def _measure_yaml(events: Any) -> None:
    import yaml

    measure = _YamlMeasure()
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            measure.alias(event.anchor or "")
        elif isinstance(event, yaml.ScalarEvent):
            measure.scalar(event.anchor)
        elif isinstance(event, yaml.CollectionStartEvent):
            measure.start(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            measure.end()


# -- values in hand ----------------------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def check_value(value: Any) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH` or holding more than
    :data:`MAX_VALUES` values (shared parts counted each time they appear). Iterative;
    a value that contains itself is refused as too deep."""
    copy_json(value, keep_types=True)


def copy_json(value: Any, text: Callable[[str], str] | None = None, *,
              keep_types: bool = False) -> Any:
    """A copy of a JSON-shaped value: mappings become dicts, lists and tuples lists,
    and ``text`` is applied to every string that is a value (never to keys).

    Iterative, with the limits of :func:`check_value`. Raises :class:`BoundsError`
    over a limit, or for a value JSON cannot hold (a set, bytes, a key that is not a
    string or a number), unless ``keep_types`` (only the shape is checked then).
    """
    out: list[Any] = [None]
    # (value, container to put it in, key or index, depth)
    work: list[tuple[Any, Any, Any, int]] = [(value, out, 0, 1)]
    count = 0
    while work:
        item, into, at, depth = work.pop()
        count += 1
        if count > MAX_VALUES:
            raise too_many()
        if isinstance(item, str):
            into[at] = text(item) if text is not None else item
        elif isinstance(item, _SCALARS):
            into[at] = item
        elif isinstance(item, Mapping | list | tuple):
            into[at] = _container(item, depth, work, keep_types=keep_types)
        elif keep_types:
            into[at] = item
        else:
            raise BoundsError(f"holds a value JSON cannot hold ({type(item).__name__})")
    return out[0]


def _container(item: Mapping[Any, Any] | list[Any] | tuple[Any, ...], depth: int,
               work: list[tuple[Any, Any, Any, int]], *, keep_types: bool) -> Any:
    """The copy of a mapping, list or tuple at ``depth``, made empty: its members are
    put on ``work`` to be copied into it."""
    if depth > MAX_DEPTH:
        raise too_deep()
    if isinstance(item, Mapping):
        made: dict[Any, Any] = {}
        for k, v in item.items():
            if not keep_types and not isinstance(k, _SCALARS):
                raise BoundsError(f"holds a key JSON cannot hold ({type(k).__name__})")
            made[k] = None
            work.append((v, made, k, depth + 1))
        return made
    listed: list[Any] = [None] * len(item)
    work.extend((v, listed, i, depth + 1) for i, v in enumerate(item))
    return listed


# -- files and messages ------------------------------------------------------------


def read_capped(path: str, max_bytes: int) -> bytes:
    """A file's bytes, refusing one larger than ``max_bytes`` without reading it all.
    Raises :class:`BoundsError` or ``OSError``."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_large(max_bytes)
    return data


_CONTROL = r"[\x00-\x1f\x7f-\x9f]"  # compiled at its first use


def one_line(text: str) -> str:
    """``text`` with control characters (newlines included) written as escapes, so a
    message that quotes outside input stays one line and sends nothing to a terminal."""
    return re.sub(_CONTROL, lambda m: f"\\x{ord(m.group()):02x}", text)
