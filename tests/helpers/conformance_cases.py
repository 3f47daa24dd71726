"""What a conformance case is (``tests/interp/test_conformance.py``): a group of cases sharing one
tiny kernel, and the shorthands the case tables (``conformance_int``, ``conformance_float``,
``conformance_convert``) are written with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvdsl.ir import Op, call, u32
from kvdsl.ir.builder import binary

MIN, MAX, UMAX = -(2**31), 2**31 - 1, 2**32 - 1
NAN, INF = float("nan"), float("inf")


@dataclass
class Group:
    """Cases sharing one kernel: ``fn`` over arguments of ``types``."""

    name: str
    fn: Callable
    types: tuple
    rows: list  # (inputs tuple, expected or None)
    approx: bool = False


def rows(*items):
    """Cases: ``(inputs, expected)`` pairs or bare input tuples (expected from the GPU only)."""
    return [
        it if isinstance(it, tuple) and len(it) == 2 and isinstance(it[0], tuple) else (it, None)
        for it in items
    ]


def binop(op):
    """The binary operator ``op`` as a function of two expressions."""
    return lambda a, b: binary(op, a, b)


def binary_group(ty, op: Op, cases: list) -> Group:
    """The binary operator ``op`` on operands of type ``ty`` (a shift's count a u32, as WGSL
    takes it), named ``ty_op`` (``i32_shl``), over ``cases``."""
    count = u32 if op in (Op.SHL, Op.SHR) else ty
    return Group(f"{ty}_{op.name.lower()}", binop(op), (ty, count), cases)


def unop(op):
    """The unary operator ``op`` (negation or bitwise not) as a function of one expression."""
    return lambda a: -a if op == Op.NEG else ~a


def fn_(op):
    """The builtin ``op`` as a function of its arguments."""
    return lambda *a: call(op, *a)
