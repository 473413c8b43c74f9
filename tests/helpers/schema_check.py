"""A validator for the part of JSON Schema (2020-12) that ``launchers/serve/schema.json``
uses: ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``minItems``, ``enum``, ``const``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``anyOf``, ``oneOf`` and local ``$ref``. A keyword it does not know is an error, so the
schema cannot grow past what is checked without this file growing too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "launchers" / "serve" / "schema.json"
_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}
_KNOWN = {"type", "properties", "required", "additionalProperties", "items", "minItems",
          "enum", "const", "minimum", "maximum", "exclusiveMinimum", "anyOf", "oneOf", "$ref",
          *_ANNOTATIONS}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return schema


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) \
        else a == b


class Validator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def errors(self, value: Any, schema: dict[str, Any], at: str = "$") -> list[str]:
        unknown = set(schema) - _KNOWN
        if unknown:
            raise ValueError(f"the schema uses {sorted(unknown)} at {at}, which this "
                             "validator does not check")
        out: list[str] = []
        if "$ref" in schema:
            out += self.errors(value, self._ref(schema["$ref"]), at)
        out += self._simple(value, schema, at)
        if isinstance(value, dict):
            out += self._object(value, schema, at)
        if isinstance(value, list):
            out += self._array(value, schema, at)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                passing = [s for s in schema[key] if not self.errors(value, s, at)]
                if not passing or (key == "oneOf" and len(passing) > 1):
                    out.append(f"{at}: {len(passing)} of the {key} branches match")
        return out

    def _ref(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are checked, not {ref}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part]
        return dict(node)

    def _simple(self, value: Any, schema: dict[str, Any], at: str) -> list[str]:
        out: list[str] = []
        if "type" in schema:
            kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_TYPES[k](value) for k in kinds):
                out.append(f"{at}: {value!r:.60} is not of type {kinds}")
        if "const" in schema and not _same(value, schema["const"]):
            out.append(f"{at}: {value!r:.60} is not {schema['const']!r}")
        if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
            out.append(f"{at}: {value!r:.60} is not one of {schema['enum']}")
        if _TYPES["number"](value):
            if "minimum" in schema and value < schema["minimum"]:
                out.append(f"{at}: {value} is below {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                out.append(f"{at}: {value} is above {schema['maximum']}")
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                out.append(f"{at}: {value} is not above {schema['exclusiveMinimum']}")
        return out

    def _object(self, value: dict[str, Any], schema: dict[str, Any], at: str) -> list[str]:
        out = [f"{at}: {k!r} is required" for k in schema.get("required", ()) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                out += self.errors(v, props[k], f"{at}.{k}")
            elif extra is False:
                out.append(f"{at}: {k!r} is not allowed")
            elif isinstance(extra, dict):
                out += self.errors(v, extra, f"{at}.{k}")
        return out

    def _array(self, value: list[Any], schema: dict[str, Any], at: str) -> list[str]:
        out: list[str] = []
        if len(value) < schema.get("minItems", 0):
            out.append(f"{at}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                out += self.errors(v, schema["items"], f"{at}[{i}]")
        return out


def check(value: Any, definition: str) -> None:
    """Raise AssertionError unless ``value`` is a valid ``$defs/definition``."""
    root = load_schema()
    problems = Validator(root).errors(value, root["$defs"][definition])
    assert not problems, f"not a valid {definition}: {problems[:5]}\n{json.dumps(value)[:2000]}"
