"""Validated, frozen kernel configurations and the error they raise."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from kvdsl.ir.builder import Val
from kvdsl.ir.nodes import Binary, Call, Expr, Kernel, Lit, Member, Name
from kvdsl.ir.ops import Op
from kvdsl.ir.types import SCALARS, Scalar, i32, u32

MAX_WORKGROUP = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup / SizeX
MAX_FOLD = 65535  # WebGPU's default maxComputeWorkgroupsPerDimension
# One token's K row (kvHeads * headDim words of 4 bytes) must fit WebGPU's default
# maxStorageBufferBindingSize (128 MiB); larger shapes could never be bound.
MAX_HIDDEN = 2**25


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
    """``value`` is one of ``allowed``, of the same type (``8.0`` or ``True`` is not ``8``)."""
    allowed = tuple(allowed)
    ok = any(type(value) is type(a) and value == a for a in allowed)
    check(ok, field, value, "one of " + ", ".join(map(repr, allowed)))


def flag(field: str, value: Any) -> None:
    """``value`` is a real bool (not 0/1, not a string)."""
    check(isinstance(value, bool), field, value, "true or false")


def shape(cfg: Any) -> None:
    """``kv_heads`` and ``head_dim`` positive, one token's row small enough to bind."""
    positive_int("kv_heads", cfg.kv_heads)
    positive_int("head_dim", cfg.head_dim)
    hidden = cfg.kv_heads * cfg.head_dim
    check(
        hidden <= MAX_HIDDEN,
        "kv_heads*head_dim",
        hidden,
        f"at most {MAX_HIDDEN} (one token's row must fit WebGPU's default "
        "max-storage-buffer-binding-size of 128 MiB)",
    )


def pairs_field(cfg: Any) -> None:
    """A config's ``pairs``: None (the mode's default), or a bool, True only where the pair walk
    can serve the config (:func:`kvdsl.nodes.flat.pairs_apply`)."""
    from kvdsl.nodes.flat import pairs_apply

    if cfg.pairs is None:
        return
    check(isinstance(cfg.pairs, bool), "pairs", cfg.pairs, "None (the mode's default) or a bool")
    if cfg.pairs:
        check(
            cfg.walk == "flat" and pairs_apply(cfg),
            "pairs",
            cfg.pairs,
            "None or False unless walk='flat', rotary=True or k_norm=True, and head_dim % 8 == 0 "
            "(one invocation per pair of vec4 half a row apart)",
        )


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
    """Make ``cls`` from a dict, naming unknown and missing fields in the error."""
    check(isinstance(data, dict), cls.__name__, data, "a dict of config fields")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    for key in data:
        check(
            key in names, key, data[key], f"a field of {cls.__name__}: {', '.join(sorted(names))}"
        )
    for f in fields:
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        check(not required or f.name in data, f.name, None, f"a value (required by {cls.__name__})")
    return cls(**data)


# ---- the host-side contract: what a kernel touches for given params -----------------------------


def node(x: Val | Expr | int) -> Expr:
    """The expression of a builder value, or an exact literal for a Python int."""
    if isinstance(x, Val):
        return x.node
    if isinstance(x, int):
        return Lit(x, i32 if x < 0 else u32)
    return x


def ceil_div(a: Val | Expr | int, b: Val | Expr | int) -> Expr:
    """``ceil(a / b)`` as host-side integer arithmetic (``b >= 1`` must be required)."""
    a, b = node(a), node(b)
    return Binary(Op.DIV, Binary(Op.SUB, Binary(Op.ADD, a, b), Lit(1, u32)), b)


def times(*xs: Val | Expr | int) -> Expr:
    """The product of ``xs``."""
    out = node(xs[0])
    for x in xs[1:]:
        out = Binary(Op.MUL, out, node(x))
    return out


def plus(a: Val | Expr | int, b: Val | Expr | int) -> Expr:
    """``a + b`` in the host's exact integers."""
    return Binary(Op.ADD, node(a), node(b))


def largest(binding: str) -> Expr:
    """The largest value in an integer input buffer (``-1`` when it is empty)."""
    return Member(Name(binding), "max")


def emax(a: Val | Expr | int, b: Val | Expr | int) -> Expr:
    """``max(a, b)`` in the host's exact integers."""
    return Call(Op.MAX, (node(a), node(b)))


def contract(
    kernel: Kernel,
    extents: dict[str, Val | Expr | int],
    requires: dict[str, Val | Expr] | None = None,
) -> Kernel:
    """``kernel`` with its host-side contract: least element counts per binding and conditions.

    Every binding must have an extent; ``requires`` maps a description (shown in the error) to
    a condition over the params.
    """
    missing = [b.name for b in kernel.bindings if b.name not in extents]
    if missing:
        raise ValueError(f"kernel {kernel.name}: no extent for {', '.join(missing)}")
    return dataclasses.replace(
        kernel,
        extents=tuple((name, node(e)) for name, e in extents.items()),
        requires=tuple((text, node(c)) for text, c in (requires or {}).items()),
    )
