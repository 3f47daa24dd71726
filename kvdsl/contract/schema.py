"""The JSON Schema of ``index.json`` (``index.schema.json``, package data), checked against its
metaschema and applied by ``jsonschema``, the Python implementation of the standard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).with_name("index.schema.json")


def schema() -> dict[str, Any]:
    """The schema of ``index.json``."""
    return json.loads(SCHEMA.read_text())


def validator(s: dict[str, Any] | None = None) -> jsonschema.protocols.Validator:
    """A validator of schema ``s`` (default: ``index.json``'s) for the draft its ``$schema``
    names; raises ``jsonschema.SchemaError`` when ``s`` breaks that draft's metaschema."""
    s = s if s is not None else schema()
    cls = jsonschema.validators.validator_for(s)
    cls.check_schema(s)
    return cls(s)


def errors(value: Any, s: dict[str, Any] | None = None, where: str = "index.json") -> list[str]:
    """Each way ``value`` breaks schema ``s`` (default: ``index.json``'s), as
    ``"<path>: <what is wrong>"`` (the path from ``where``: ``index.json.<variant>.params[1]``);
    empty when it validates. Where no branch of a ``oneOf`` matches, the error is the branch's
    that ``jsonschema.exceptions.best_match`` finds most relevant (the one of the value's type)."""
    out = []
    for top in sorted(
        validator(s).iter_errors(value), key=lambda e: list(map(str, e.absolute_path))
    ):
        err = jsonschema.exceptions.best_match([top])
        path = where + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path
        )
        out.append(f"{path}: {err.message}")
    return out
