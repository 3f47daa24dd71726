"""Host-side extent arithmetic: the integer expressions over params fields, consts and the
largest values of integer inputs that a kernel's contract states (``extents`` and ``requires`` of
:func:`kvdsl.ir.with_contract`), evaluated exactly by every host before a dispatch."""

from __future__ import annotations

from kvdsl.ir.builder import Val
from kvdsl.ir.ops import Op
from kvdsl.ir.tree import Binary, Call, Expr, Lit
from kvdsl.ir.types import i32, u32


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


def minus(a: Val | Expr | int, b: Val | Expr | int) -> Expr:
    """``a - b`` in the host's exact integers."""
    return Binary(Op.SUB, node(a), node(b))


def window_batches(rows: Val, heads: int, per_slice: Val, head_base: Val, batch_base: Val) -> Expr:
    """The batches of a BSH source a window's ``rows`` rows (``per_slice`` rows per slice, from
    slice ``headBase`` on) touch, from the bound range's first batch ``batchBase`` on."""
    end = ceil_div(plus(times(head_base, per_slice), rows), heads * per_slice)
    return minus(end, batch_base)


def emax(a: Val | Expr | int, b: Val | Expr | int) -> Expr:
    """``max(a, b)`` in the host's exact integers."""
    return Call(Op.MAX, (node(a), node(b)))
