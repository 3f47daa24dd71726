"""Constant arithmetic: one step of a const-expression on numpy values of its type, as WGSL
evaluates it when it compiles (by the op table's implementation, the interpreter's), with the
range checks a running kernel does not make: an integer step that wraps, a left shift that
loses bits, a float step past its type's largest value. :mod:`kvdsl.ir.consteval` folds the
IR's const-expressions through these steps and names the expression a refusal is about.
"""

from __future__ import annotations

import math

import numpy as np

from kvdsl.ir.ops import Op
from kvdsl.ir.types import Scalar, i32, u32

_SHL, _SHR, _DIV, _MOD = Op.SHL, Op.SHR, Op.DIV, Op.MOD
#: The integer operators the folder evaluates (:func:`fold_int`).
_INT_STEPS = frozenset(
    (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD, Op.SHL, Op.SHR, Op.AND, Op.OR, Op.XOR)
)
_INT_DTYPE = {u32: np.uint32, i32: np.int32}

F16_MAX = 65504.0  # f16's largest finite value
FLOAT_MAX = {np.float16: F16_MAX, np.float32: float(np.finfo(np.float32).max)}
_FLOATS: dict[tuple[object, str], np.floating] = {}


def float_step(op: Op, a: np.floating, b: np.floating) -> np.floating:
    """``a op b`` (+, -, *, /, %) for two constants of one float type, as Tint evaluates a
    const-expression: in the next wider type (f16 in f32, f32 in f64), a result past the type's
    largest value refused even where it would round down to it (``65504.0h + 8.0h``,
    ``3.4028235e38f + 1.0e30f``), then rounded to the type; ``%`` is WGSL's ``x - y * trunc(x /
    y)`` computed in f32, whose quotient must be finite (``3.0e38f % 0.5f`` is refused,
    ``-65504.0h % 0.5h`` is not: tests/ir/test_constant_operands.py holds these to Tint). f16
    values round to the nearest here; WGSL lets an implementation round them either way and
    Tint rounds toward zero (``-2.0h + 65504.0h`` is 65472.0h there, 65504.0h here), so a
    verdict that turns on how an inexact f16 result rounds (within a step of 65504, a
    ``clamp``'s bounds a step apart) is the implementation's. Raises a ``ValueError``
    naming the value past the range (or not finite); the caller names the expression."""
    dtype = type(a)
    top = FLOAT_MAX[dtype]
    with np.errstate(all="ignore"):
        if op is Op.MOD:  # every step in f32, for f32 and f16 alike (Tint's storage type)
            a, b = np.float32(a), np.float32(b)
            q = Op.DIV._row.impl(a, b)
            if not np.isfinite(q):
                raise ValueError(q)
            v = Op.SUB._row.impl(a, Op.MUL._row.impl(b, Op.TRUNC._row.impl(q)))
        else:
            wide = np.float64 if dtype is np.float32 else np.float32
            v = op._row.impl(wide(a), wide(b))
    if not np.isfinite(v) or abs(v) > top:
        raise ValueError(v)
    return dtype(v)


def float_of(value: object, ty: Scalar) -> np.floating:
    """A literal's value in ``ty``'s precision (remembered: the catalog's few values recur;
    -0.0 apart from 0.0, which equal it as a key: 1.0 / -0.0 is -inf)."""
    key = (value, ty.name) if value else (value, ty.name, math.copysign(1.0, value))
    got = _FLOATS.get(key)
    if got is None:
        got = ty.dtype.type(value)
        if len(_FLOATS) < 4096:
            _FLOATS[key] = got
    return got


def same_bits(v: int, ty: Scalar) -> int:
    """The ``ty`` (u32 or i32) value whose bits are those of the integer ``v``: WGSL's
    conversion between u32 and i32."""
    v %= 2**32
    return v - 2**32 if ty is i32 and v >= 2**31 else v


def int_step(op: Op, ty: Scalar, *values: int) -> int:
    """``op`` on integer constants whose type is ``ty`` (a shift's amount is u32), by the op
    table's implementation: WGSL's result, taken modulo 2**32 where a step leaves the type's
    range, in const-expressions too (gpuweb/gpuweb#4767, #4795: ``-1 * i32(-2147483648)`` is
    i32's least value; Tint does so, and so does wgpu-native 0.32's naga,
    ``test_integer_constant_steps_that_wrap_compile_and_run_as_wgsl_says``)."""
    dtype = _INT_DTYPE[ty]
    if op is _SHL or op is _SHR:
        args = (dtype(values[0]), np.uint32(values[1]))
    else:
        args = tuple(dtype(v) for v in values)
    return int(op._row.impl(*args))


def shl_fits(a: int, b: int, ty: Scalar) -> bool:
    """Whether ``a << b`` (``b`` below 32) keeps every bit of ``a`` in ``ty``: WGSL refuses a
    constant left shift that overflows (for i32, one that changes the sign too), where a running
    shift drops the bits. Shifting the result back gives ``a`` exactly when none was lost."""
    return int_step(_SHR, ty, int_step(_SHL, ty, a, b), b) == a


def fold_int(op: Op, a: int, b: int, ty: Scalar) -> int | None:
    """``a op b`` for integer constants of type ``ty`` as WGSL evaluates it when it compiles
    (:func:`int_step`); None for an op the folder does not evaluate, and for a step WGSL refuses
    there, which is reported where it stands (:meth:`kvdsl.ir.typeof.ExprTyper._const_operands`): a division or
    remainder by 0, i32's least value over -1 (its quotient, 2**31, does not fit: a running
    division gives the least value again), a shift by 32 or more, a left shift that overflows."""
    if op not in _INT_STEPS:
        return None
    if op is _DIV or op is _MOD:
        if b == 0 or (op is _DIV and b == -1 and a == -(2**31)):
            return None
    elif op is _SHL or op is _SHR:
        if b >= 32 or (op is _SHL and not shl_fits(a, b, ty)):
            return None
    return int_step(op, ty, a, b)
