"""Validated, frozen kernel configurations and the error they raise."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from kvdsl.ir.types import SCALARS, Scalar

MAX_WORKGROUP = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup / SizeX
MAX_FOLD = 65535  # WebGPU's default maxComputeWorkgroupsPerDimension


class ConfigError(ValueError):
    """A config field holds a value the kernel cannot be built for."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        super().__init__(f"{field}={value!r}: expected {allowed}")
        self.field = field
        self.value = value
        self.allowed = allowed


def check(ok: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`ConfigError` unless ``ok``."""
    if not ok:
        raise ConfigError(field, value, allowed)


def positive_int(field: str, value: Any, limit: int | None = None) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    ok = ok and (limit is None or value <= limit)
    check(ok, field, value, "a positive integer" + (f" <= {limit}" if limit else ""))


def one_of(field: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    check(value in allowed, field, value, "one of " + ", ".join(map(repr, allowed)))


def scalar(name: str) -> Scalar:
    """The IR scalar type spelled ``name``."""
    return SCALARS[name]


def common(cfg: Any) -> None:
    """Checks every config shares: workgroup size and dispatch fold width."""
    positive_int("workgroup_size", cfg.workgroup_size, MAX_WORKGROUP)
    positive_int("fold", cfg.fold, MAX_FOLD)


def as_dict(cfg: Any) -> dict[str, Any]:
    """The config's fields as a JSON-ready dict, its mode first."""
    return {"mode": cfg.mode, **dataclasses.asdict(cfg)}


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Make ``cls`` from a dict, naming unknown fields in the error."""
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        check(
            key in names, key, data[key], f"a field of {cls.__name__}: {', '.join(sorted(names))}"
        )
    return cls(**data)
