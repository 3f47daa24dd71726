"""Host-side evaluation of a kernel's dispatch rule: workgroup counts for given params."""

from __future__ import annotations

import math

from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op

_INT_OPS = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a // b if b else a,
    Op.MIN: min,
    Op.MAX: max,
}


class DispatchError(ValueError):
    """The dispatch rule cannot be evaluated, or its workgroups do not fit the device."""


def evaluate(e: ir.Expr, kernel: ir.Kernel, params: dict[str, int]) -> int:
    """Evaluate an integer expression over params fields and module consts, exactly."""
    match e:
        case ir.Lit(value, _):
            return int(value)
        case ir.Name(name) if kernel.const(name) is not None:
            return evaluate(kernel.const(name).value, kernel, params)
        case ir.Member(ir.Name("params"), field):
            if field not in params:
                raise DispatchError(f"params field '{field}' is needed to size the dispatch")
            return int(params[field])
        case ir.Binary(op, a, b) if op in _INT_OPS:
            return _INT_OPS[op](evaluate(a, kernel, params), evaluate(b, kernel, params))
        case ir.Call(op, args) if op in _INT_OPS:
            return _INT_OPS[op](*(evaluate(a, kernel, params) for a in args))
    raise DispatchError(f"dispatch expression {e!r} is not integer arithmetic over params")


def workgroups(
    kernel: ir.Kernel, params: dict[str, int], max_per_dim: int = 65535
) -> tuple[int, int, int]:
    """The ``(x, y, z)`` workgroup counts for ``params`` under the kernel's dispatch rule."""
    d = kernel.dispatch
    if d is None:
        raise DispatchError(f"kernel {kernel.name} has no dispatch rule: give workgroups")
    items = evaluate(d.items, kernel, params)
    groups = math.ceil(max(items, 0) / d.per_group)
    if groups <= d.fold:
        x, y = groups, 1
    else:
        y = math.ceil(groups / d.fold)
        x = math.ceil(groups / y) if d.balanced else d.fold
    if x > max_per_dim or y > max_per_dim:
        raise DispatchError(
            f"{groups} workgroups need ({x}, {y}) with fold {d.fold}, "
            f"past the device's {max_per_dim} per dimension"
        )
    return (x, y, 1)
