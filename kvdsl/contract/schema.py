"""The JSON Schema of ``index.json`` (``index.schema.json``, package data) and a validator of the
subset of JSON Schema it uses, so checking needs no extra package.

The subset: ``type`` (object, array, string, integer, number, boolean, null), ``properties``,
``required``, ``additionalProperties`` (false or a schema), ``items``, ``minItems``, ``maxItems``,
``enum``, ``pattern``, ``minimum``, ``minLength``, ``oneOf`` and ``$ref`` to ``#/$defs/...``.
Any other keyword in a schema is an error, so the validator never ignores a rule silently.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).with_name("index.schema.json")

_ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs"}
_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "pattern",
    "minimum",
    "minLength",
    "oneOf",
    "$ref",
}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _of_type(value: Any, s: dict[str, Any], root: dict[str, Any]) -> bool:
    while "$ref" in s:
        s = root["$defs"][s["$ref"].removeprefix("#/$defs/")]
    return "type" in s and _TYPES[s["type"]](value)


def schema() -> dict[str, Any]:
    """The schema of ``index.json``."""
    return json.loads(SCHEMA.read_text())


def errors(
    value: Any,
    s: dict[str, Any] | None = None,
    root: dict[str, Any] | None = None,
    where: str = "index.json",
) -> list[str]:
    """Each way ``value`` breaks schema ``s`` (default: ``index.json``'s), as
    ``"<path>: <what is wrong>"``; empty when it validates."""
    root = root if root is not None else (s if s is not None else schema())
    s = s if s is not None else root
    unknown = set(s) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"schema at {where} uses {sorted(unknown)}, outside the validated subset")
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"schema at {where}: $ref {ref!r} is not '#/$defs/<name>'")
        return errors(value, root["$defs"][ref.removeprefix("#/$defs/")], root, where)
    if "oneOf" in s:
        found = [errors(value, o, root, where) for o in s["oneOf"]]
        passing = found.count([])
        if passing != 1:
            # Where one branch is of the value's type, its errors say what is wrong.
            typed = [f for o, f in zip(s["oneOf"], found) if _of_type(value, o, root)]
            if passing == 0 and len(typed) == 1:
                return typed[0]
            return [f"{where}: matches {passing} of the oneOf schemas, expected exactly 1"]
    if "type" in s and not _TYPES[s["type"]](value):
        return [f"{where}: {json.dumps(value)[:60]} is not of type {s['type']}"]
    out: list[str] = []
    if "enum" in s and value not in s["enum"]:
        out.append(f"{where}: {json.dumps(value)} is not one of {json.dumps(s['enum'])}")
    if isinstance(value, str):
        if "pattern" in s and not re.search(s["pattern"], value):
            out.append(f"{where}: {value!r} does not match {s['pattern']}")
        if len(value) < s.get("minLength", 0):
            out.append(f"{where}: {value!r} is shorter than {s['minLength']}")
    if _TYPES["number"](value) and "minimum" in s and value < s["minimum"]:
        out.append(f"{where}: {value} is less than {s['minimum']}")
    if isinstance(value, list):
        if len(value) < s.get("minItems", 0):
            out.append(f"{where}: {len(value)} items, fewer than {s['minItems']}")
        if "maxItems" in s and len(value) > s["maxItems"]:
            out.append(f"{where}: {len(value)} items, more than {s['maxItems']}")
        if "items" in s:
            for i, item in enumerate(value):
                out += errors(item, s["items"], root, f"{where}[{i}]")
    if isinstance(value, dict):
        for key in s.get("required", []):
            if key not in value:
                out.append(f"{where}: required key '{key}' is missing")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += errors(item, props[key], root, f"{where}.{key}")
            elif extra is False:
                out.append(f"{where}: key '{key}' is not allowed (allowed: {', '.join(props)})")
            elif isinstance(extra, dict):
                out += errors(item, extra, root, f"{where}.{key}")
    return out
