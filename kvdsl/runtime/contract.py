"""Host-side checks before a dispatch: the kernel's contract for the params, and device limits.

A kernel built by a mode carries its host-side contract (:attr:`kvdsl.ir.tree.Kernel.extents`
and ``requires``): the least number of elements each binding must hold for the given params, and
conditions the params must meet, as integer expressions over params fields, module consts and
``binding.max`` (the largest value of an integer input such as ``seqlens_k``). They are evaluated
here exactly, in Python integers, so a buffer too small is an error naming the binding and both
sizes instead of an access WebGPU would silently clamp or drop. A parsed kernel carries no
contract and gets only the device checks.

Device checks, for any kernel or WGSL text: the number of storage bindings against
``max-storage-buffers-per-shader-stage``, each buffer's bytes against
``max-storage-buffer-binding-size`` and ``max-buffer-size``, and the dispatch rule's workgroups
against ``max-compute-workgroups-per-dimension`` after folding. (``shader-f16`` availability is
checked where the device is made, :func:`kvdsl.runtime.device.device`.)
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from kvdsl.emit.wgsl import emit_expr
from kvdsl.ir import tree as ir
from kvdsl.ir.ops import Op
from kvdsl.runtime.errors import BufferError, DeviceError, ParamsError

_OPS = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a // b if b else a,
    Op.MOD: lambda a, b: a % b if b else 0,
    Op.LT: lambda a, b: a < b,
    Op.LE: lambda a, b: a <= b,
    Op.GT: lambda a, b: a > b,
    Op.GE: lambda a, b: a >= b,
    Op.EQ: lambda a, b: a == b,
    Op.NE: lambda a, b: a != b,
    Op.LAND: lambda a, b: a and b,
    Op.LOR: lambda a, b: a or b,
}


class LimitError(DeviceError):
    """A request past a device limit: storage bindings, binding size, workgroups per dimension."""


def evaluate(
    e: ir.Expr, kernel: ir.Kernel, params: Mapping[str, int], buffers: Mapping[str, np.ndarray]
) -> int:
    """``e`` in exact integers (booleans for conditions); ``binding.max`` reads ``buffers``."""
    match e:
        case ir.Lit(value, _):
            return value
        case ir.Name(name) if kernel.const(name) is not None:
            return evaluate(kernel.const(name).value, kernel, params, buffers)
        case ir.Member(ir.Name("params"), field):
            if field not in params:
                raise ParamsError(
                    f"params field '{field}' is missing; kernel {kernel.name} needs it to size "
                    "its buffers"
                )
            return int(params[field])
        case ir.Member(ir.Name(name), "max") if kernel.binding(name) is not None:
            data = buffers.get(name)
            return int(np.max(data)) if data is not None and data.size else -1
        case ir.Binary(op, a, b) if op in _OPS:
            return _OPS[op](*(evaluate(x, kernel, params, buffers) for x in (a, b)))
        case ir.Call(Op.MIN | Op.MAX as op, args):
            fn = min if op == Op.MIN else max
            return fn(evaluate(a, kernel, params, buffers) for a in args)
        case ir.Call(Op.SELECT, (f, t, c)):
            return evaluate(
                t if evaluate(c, kernel, params, buffers) else f, kernel, params, buffers
            )
    raise ValueError(f"kernel {kernel.name}: host expression {e!r} is not integer arithmetic")


def rule(e: ir.Expr) -> str:
    """An extent or condition as the error shows it (WGSL spelling, without ``params.``)."""
    return emit_expr(e).replace("params.", "")


def elements(b: ir.Binding, a: np.ndarray) -> int:
    """How many elements of ``array<b.elem>`` the host array ``a`` holds."""
    return a.size // b.host_values


def needs(
    kernel: ir.Kernel, params: Mapping[str, int], buffers: Mapping[str, np.ndarray]
) -> dict[str, int]:
    """The elements each binding with an extent must hold for ``params`` (checked already); an
    extent reading the largest value of an input ``buffers`` lacks reads -1 for it."""
    return {name: evaluate(e, kernel, dict(params), buffers) for name, e in kernel.extents}


def reads_values(kernel: ir.Kernel, e: ir.Expr) -> bool:
    """Whether ``e`` reads the largest value of an input binding (``binding.max``)."""
    return any(
        isinstance(n, ir.Member)
        and n.name == "max"
        and isinstance(n.base, ir.Name)
        and kernel.binding(n.base.name) is not None
        for n in ir.walk(e)
    )


def check_contract(
    kernel: ir.Kernel, buffers: Mapping[str, np.ndarray], params: Mapping[str, int] | None
) -> None:
    """Raise :class:`ParamsError` for a broken requirement, :class:`BufferError` for buffers
    smaller than what the kernel touches for ``params`` (every short one named, in one line).
    Call after the params and the buffers' dtypes are checked
    (:func:`kvdsl.runtime.inputs.check_inputs`)."""
    params = dict(params or {})
    for text, cond in kernel.requires:
        if not evaluate(cond, kernel, params, buffers):
            used = {
                f: params[f] for f in sorted(_fields(cond)) if f in params
            }  # the values that broke it
            shown = ", ".join(f"{k}={v}" for k, v in used.items())
            raise ParamsError(f"kernel {kernel.name} requires {text}; got {shown}")
    short = []
    for name, extent in kernel.extents:
        b, a = kernel.binding(name), buffers.get(name)
        if b is None or a is None:
            continue
        need, have = evaluate(extent, kernel, params, buffers), elements(b, a)
        if have < need:
            short.append(short_binding(kernel.name, b, have, need, extent))
    if short:
        raise BufferError("; ".join(short))


def short_binding(kernel: str, b: ir.Binding, have: int, need: int, extent: ir.Expr) -> str:
    """A binding that holds ``have`` elements where ``kernel`` touches ``need``, as a refusal
    words it (several are joined by "; " into one line)."""
    return (
        f"binding '{b.name}' (array<{b.elem}>) holds {have} elements, but kernel {kernel} "
        f"touches {need} for these params ({rule(extent)})"
    )


def _fields(e: object) -> set[str]:
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Member) and n.base == ir.Name("params")}


def check_bindings(
    bindings: tuple[ir.Binding, ...], buffers: Mapping[str, np.ndarray], limits: Mapping[str, int]
) -> None:
    """Raise :class:`LimitError` when the storage bindings or a buffer exceed the device."""
    most = limits["max-storage-buffers-per-shader-stage"]
    if len(bindings) > most:
        raise LimitError(
            f"the kernel binds {len(bindings)} storage buffers; the device allows {most} per "
            "shader stage (max-storage-buffers-per-shader-stage)"
        )
    size_limit = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
    for b in bindings:
        a = buffers.get(b.name)
        if a is not None and a.nbytes > size_limit:
            raise LimitError(
                f"binding '{b.name}' is {a.nbytes} bytes; the device binds at most {size_limit} "
                "(max-storage-buffer-binding-size)"
            )


def check_workgroups(kernel: ir.Kernel, params: Mapping[str, int] | None, limit: int) -> None:
    """Raise :class:`LimitError` when the dispatch rule's workgroups cannot fit even folded."""
    d = kernel.dispatch
    if d is None:
        return
    items = evaluate(d.items, kernel, dict(params or {}), {})
    groups = math.ceil(max(items, 0) / d.per_group)
    if groups > d.fold and (d.fold > limit or math.ceil(groups / d.fold) > limit):
        raise LimitError(
            f"kernel {kernel.name} needs {groups} workgroups ({items} items, {d.per_group} per "
            f"workgroup); folded at {d.fold} that is {math.ceil(groups / d.fold)} in y, past "
            f"the device's {limit} per dimension (max-compute-workgroups-per-dimension)"
        )
