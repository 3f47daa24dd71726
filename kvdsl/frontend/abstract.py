"""WGSL's abstract numbers as the typer reads them: a literal's value as the IR holds it
(:func:`canonical`), whether an expression is abstract and of which kind (an abstract int
beside an abstract float makes an abstract float; an abstract float expression's value, computed
in f64 as WGSL computes it), and the concrete type its context picks."""

from __future__ import annotations

import math

import numpy as np

from kvdsl.frontend.errors import FrontendError
from kvdsl.frontend.numbers import const_int
from kvdsl.frontend.records import ArrayShape, RawCtor, RawLit, VecShape
from kvdsl.ir import tree as ir
from kvdsl.ir.consteval import literal_ok
from kvdsl.ir.ops import Op
from kvdsl.ir.types import Mat, Scalar, Type, Vec, f16, f32, i32


def canonical(value: int | float, ty: Scalar) -> int | float | bool:
    """The literal value as the IR holds it.

    An f32 is the shortest decimal that reads back as the same value (so ``1e-6`` stays
    ``1e-6``, as the builder writes it), except where that decimal lies past the type's largest
    finite value (``3.4028235e38``): then the exact value, which the verifier accepts. An f16 is
    its exact value, as the builder holds it (``31.62h`` is ``31.625``: Tint would read those
    digits as 31.609375).
    """
    if not ty.is_float:
        return value
    with np.errstate(over="ignore"):
        v = (np.float16 if ty == f16 else np.float32)(value)
    if not np.isfinite(v):
        raise ValueError(f"{value!r} is out of range for {ty}")
    if ty == f16:
        return float(v)
    short = float(np.format_float_positional(v, unique=True))
    return short if literal_ok(short, ty) else float(v)


def is_abstract(e: ir.Expr) -> bool:
    """Whether every leaf of ``e`` is an abstract literal (so its type comes from context)."""
    match e:
        case RawLit(_, ty):
            return ty is None
        case ir.Unary(_, x):
            return is_abstract(x)
        case ir.Binary(_, a, b):
            return is_abstract(a) and is_abstract(b)
        case ir.Call(_, args):
            return all(is_abstract(a) for a in args)
        case RawCtor(VecShape() | ArrayShape(), args):
            return bool(args) and all(is_abstract(a) for a in args)  # vec2(1, 2)
        case ir.Member(base, _) | ir.Index(base, _):
            return is_abstract(base)  # vec3(1, 2, 3).y, array(4, 5)[i]
    return False


def abstract_kind(e: ir.Expr) -> str | None:
    """``"int"`` or ``"float"`` where ``e`` is abstract (its literals, and the inferred
    constructors ``vec2(1, 2)`` and ``array(1.5, 2)`` of them), the latter where a float is among
    them; None where ``e`` has a concrete type."""
    match e:
        case RawLit(value, None):
            return "float" if isinstance(value, float) else "int"
        case ir.Unary(_, x):
            return abstract_kind(x)
        case ir.Binary(_, a, b) | ir.Call(_, (a, b)):
            return widest((abstract_kind(a), abstract_kind(b)))
        case RawCtor(VecShape() | ArrayShape(), args) if args:
            return widest([abstract_kind(a) for a in args])
        case ir.Member(base, _) | ir.Index(base, _):
            return abstract_kind(base)  # array(1, 2.5)[0]
    return None


def widest(kinds) -> str | None:
    """The abstract type abstract operands of ``kinds`` make: float where one is."""
    if None in kinds:
        return None
    return "float" if "float" in kinds else "int"


def pick(value: int | float, want: Type | None) -> Scalar:
    s = want.scalar if isinstance(want, (Scalar, Vec, Mat)) else None
    if isinstance(value, float):
        return s if s is not None and s.is_float else f32
    return s if s is not None and s.is_numeric else i32


def abstract_float(e: ir.Expr) -> float | None:
    """The value of ``e``, an abstract float expression of literals and ``+ - * / %`` (and unary
    ``-``), computed as WGSL computes abstract floats, in f64, each abstract int operand exact
    before it converts: ``16777217.0 - 16777216.0`` is ``1.0``, though neither literal is an
    f32. None where ``e`` is no such expression, or its value is not finite or divides by zero
    (left to the typer, which types each literal and refuses what WGSL refuses)."""
    if abstract_kind(e) != "float":
        return None
    return _f64(e)


def _f64(e: ir.Expr) -> float | None:
    if abstract_kind(e) == "int":
        try:
            return float(const_int(e, {}, ("", 0, 0)))
        except (FrontendError, OverflowError):  # no integer arithmetic of literals; past f64
            return None
    match e:
        case RawLit(value, None):
            return float(value)
        case ir.Unary(Op.NEG, x):
            v = _f64(x)
            return None if v is None else -v
        case ir.Binary(op, a, b) if op in _F64_OPS:
            x, y = _f64(a), _f64(b)
            if x is None or y is None or op in (Op.DIV, Op.MOD) and y == 0:
                return None
            v = _F64_OPS[op](x, y)
            return v if math.isfinite(v) else None
    return None


_F64_OPS = {
    Op.ADD: lambda x, y: x + y,
    Op.SUB: lambda x, y: x - y,
    Op.MUL: lambda x, y: x * y,
    Op.DIV: lambda x, y: x / y,
    Op.MOD: math.fmod,  # x - y * trunc(x / y), WGSL's float remainder
}
