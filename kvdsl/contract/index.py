"""A variant's entry of ``emitted/index.json``: the whole host contract as JSON-ready data.

Generated from the kernel (bindings, params struct, workgroup size, dispatch rule, features) and
the mode's contract in :mod:`kvdsl.contract.modes` (shape variables, binding sizes, param meanings).
``emitted/kvdsl.js`` carries the same data (:mod:`kvdsl.contract.module`); :func:`buffer_sizes`,
:func:`params_bytes` and :func:`workgroups` here are the rules it implements, over the entry alone.
"""

from __future__ import annotations

import numbers
import struct as _struct
from typing import Any, Mapping

from kvdsl.contract.expr import ExprError, evaluate, is_sum, product
from kvdsl.contract.requirements import says
from kvdsl.contract.modes import meanings as mode_meanings
from kvdsl.contract.modes import shape
from kvdsl.contract.modes import values as mode_values
from kvdsl.contract.modes import sizes as mode_sizes
from kvdsl.ir import Kernel
from kvdsl.ir import tree as ir
from kvdsl.ir.features import features
from kvdsl.ir.features import limits as kernel_limits
from kvdsl.ir.ops import Op
from kvdsl.ir.uses import binding_uses
from kvdsl.ir.types import Scalar, Vec
from kvdsl.kernels.config import KernelConfig, as_dict
from kvdsl.kernels.dense import contract_fields
from kvdsl.kernels.paged import page_fields
from kvdsl.kernels.qkv import contract_fields as qkv_contract_fields
from kvdsl.kernels.qkv_paged import contract_fields as paged_qkv_contract_fields
from kvdsl.runtime.layout import params_layout

#: The bytes of a binding: ``max(ceil4(elements * element_bytes), ceil4(element_bytes))``, the
#: runtime's padding (a storage binding is a non-empty multiple of 4 bytes).
SIZE_RULE = "max(ceil(elements * element_bytes / 4) * 4, ceil(element_bytes / 4) * 4)"

BALANCED_RULE = (
    "(ceil(n / y), y, 1) with y = ceil(n / fold) (the kernel reads x back from num_workgroups: "
    "any (x, y, 1) with x <= fold covering n also works)"
)

#: The default of the largest workgroup count per dimension (WebGPU's
#: maxComputeWorkgroupsPerDimension).
MAX_PER_DIMENSION = 65535


class ContractError(ValueError):
    """A kernel the contract cannot describe, or a value a host gave that breaks it."""


def limits(kernel: Kernel) -> dict[str, int]:
    """The GPU limits ``kernel`` needs beyond WebGPU's defaults, by GPUSupportedLimits name:
    :func:`kvdsl.ir.features.limits`, the runtime's rule too (``{}`` for every catalog kernel
    but the ``*_template_bindings_*`` drop-ins, which need 9 or 10 storage buffers)."""
    return kernel_limits(kernel)


def element_bytes(elem: Scalar | Vec) -> int:
    """The array stride of ``array<elem>`` in storage (``vec3`` takes the space of four)."""
    return elem.align if isinstance(elem, Vec) and elem.n == 3 else elem.size


def text(e: ir.Expr, kernel: Kernel) -> str:
    """A dispatch's integer expression over params fields and module consts, as the contract's
    language (consts folded to their values, ``params.`` dropped)."""
    ops = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*"}
    match e:
        case ir.Lit(value, _):
            return str(int(value))
        case ir.Name(name) if kernel.const(name) is not None:
            return text(kernel.const(name).value, kernel)
        case ir.Member(ir.Name("params"), field):
            return field
        case ir.Member(ir.Name(name), "max") if kernel.binding(name) is not None:
            return name  # a requirement's largest value of an integer input
        case ir.Binary(op, a, b) if op in ops:
            left, right = text(a, kernel), text(b, kernel)
            if op != Op.ADD:
                left = f"({left})" if is_sum(left) else left
                right = f"({right})" if is_sum(right) else right
            return f"{left} {ops[op]} {right}"
    raise ContractError(
        f"kernel {kernel.name}: the dispatch expression {e!r} is not +, - and * over params "
        "fields, consts and integers"
    )


def dispatch(kernel: Kernel) -> dict[str, Any] | None:
    """The dispatch rule as data: items (an expression of the params fields), per workgroup,
    fold, balanced, and the rule in words."""
    d = kernel.dispatch
    if d is None:
        return None
    return dispatch_rule(text(d.items, kernel), d.per_group, d.fold, d.balanced)


def dispatch_rule(items: str, per_workgroup: int, fold: int, balanced: bool) -> dict[str, Any]:
    """A dispatch rule as index.json states it: its four values and the rule in words."""
    return {
        "items": items,
        "per_workgroup": per_workgroup,
        "fold": fold,
        "balanced": balanced,
        "rule": "n = ceil(items / per_workgroup); (n, 1, 1) if n <= fold else "
        + (BALANCED_RULE if balanced else "(fold, ceil(n / fold), 1)"),
    }


def bindings(kernel: Kernel, cfg: KernelConfig | None) -> list[dict[str, Any]]:
    """Each binding in binding order (the params uniform last) with its element count as an
    expression of the shape variables (without ``cfg``: no counts) and its ``use``, whether the
    kernel reads it, writes it or both (:func:`kvdsl.ir.uses.binding_uses`)."""
    sizes = mode_sizes(cfg) if cfg is not None else {}
    uses = binding_uses(kernel)
    out = []
    for i, b in enumerate(kernel.bindings):
        entry: dict[str, Any] = {
            "binding": i,
            "name": b.name,
            "type": f"array<{b.elem}>",
            "access": b.access,
            "use": uses[b.name],
            "element_bytes": element_bytes(b.elem),
        }
        if b.data is not None:
            entry["data"] = str(b.data)
        if cfg is not None:
            if b.name not in sizes:
                raise ContractError(
                    f"kernel {kernel.name}: binding '{b.name}' has no size in mode {cfg.mode}'s "
                    f"contract (kvdsl.contract.modes.CONTRACTS); it sizes {', '.join(sorted(sizes))}"
                )
            rows, width = sizes[b.name]
            if width % b.host_values:
                raise ContractError(
                    f"kernel {kernel.name}: binding '{b.name}' rows of {width} values do not "
                    f"fill whole {b.elem} elements of {b.host_values} values"
                )
            entry["elements"] = product(rows, width // b.host_values)
        out.append(entry)
    if kernel.params is not None:
        _, size = params_layout(kernel.params)
        out.append(
            {
                "binding": len(kernel.bindings),
                "name": "params",
                "type": kernel.params.name,
                "access": "uniform",
                "use": "read",
                "element_bytes": size,
                "elements": "1",
            }
        )
    return out


def params(kernel: Kernel, cfg: KernelConfig | None) -> tuple[list[dict[str, Any]], int]:
    """The params struct's fields (name, type, byte offset, meaning) and its size in bytes."""
    if kernel.params is None:
        return [], 0
    offsets, size = params_layout(kernel.params)
    mode = None if cfg is None else cfg.mode
    meanings = mode_meanings(cfg) if cfg is not None else {}
    values = mode_values(cfg) if cfg is not None else {}
    fields = []
    for name, ty in kernel.params.fields:
        if not isinstance(ty, Scalar) or ty.name not in ("u32", "i32", "f32"):
            raise ContractError(
                f"kernel {kernel.name}: params field '{name}' is {ty}; the contract describes "
                "u32, i32 and f32 fields"
            )
        if mode is not None and name not in meanings:
            raise ContractError(
                f"kernel {kernel.name}: params field '{name}' has no meaning in mode {mode}'s "
                "contract (kvdsl.contract.modes.CONTRACTS)"
            )
        fields.append(
            {"name": name, "type": ty.name, "offset": offsets[name]}
            | ({"meaning": meanings[name]} if mode is not None else {})
            | ({"value": values[name]} if values.get(name) is not None else {})
        )
    return fields, size


def entry(kernel: Kernel, cfg: KernelConfig | None) -> dict[str, Any]:
    """``kernel``'s host contract (``cfg``: the config it was built from; without one, for a
    kernel outside the catalog, the parts that need no mode table)."""
    fields, size = params(kernel, cfg)
    out: dict[str, Any] = {}
    if cfg is not None:
        out |= {
            "config": as_dict(cfg),
            "mode": cfg.mode,
            "shape": shape(cfg, [b.name for b in kernel.bindings]),
        }
        out |= contract_fields(cfg)
        out |= page_fields(cfg)
        out |= qkv_contract_fields(cfg)
        out |= paged_qkv_contract_fields(cfg)
    return out | {
        "entry_point": "main",
        "workgroup_size": list(kernel.workgroup_size),
        # The WebGPU device features a host must request (the module's `enable` lines).
        "features": sorted(features(kernel)),
        "limits": limits(kernel),
        "bindings": bindings(kernel, cfg),
        "size_rule": SIZE_RULE,
        "params": fields,
        "params_size": size,
        "params_align": 16,
        "dispatch": dispatch(kernel),
        "requires": requirements(kernel),
    }


_COMPARISONS = {Op.LE: "<=", Op.GE: ">=", Op.LT: "<", Op.GT: ">"}


def requirements(kernel: Kernel) -> list[dict[str, Any]]:
    """The kernel's requirements (:attr:`kvdsl.ir.tree.Kernel.requires`) as data: each a
    comparison ``left op right`` of expressions over params fields and, for the names in
    ``largest``, the largest value of that integer input binding (``seqlens_k``), with the
    kernel's words for it (``rule``) and what it keeps true (``says``,
    :func:`kvdsl.contract.requirements.says`)."""
    out = []
    for words, cond in kernel.requires:
        if not isinstance(cond, ir.Binary) or cond.op not in _COMPARISONS:
            raise ContractError(
                f"kernel {kernel.name}: requirement '{words}' is not one comparison (<=, >=, <, >)"
            )
        sentence = says(words)
        if sentence is None:
            raise ContractError(
                f"kernel {kernel.name}: requirement '{words}' has no sentence in "
                "kvdsl/contract/requirements.py's REQUIREMENTS"
            )
        left, right = text(cond.a, kernel), text(cond.b, kernel)
        largest = sorted(
            n.base.name
            for n in ir.walk(cond)
            if isinstance(n, ir.Member) and n.name == "max" and isinstance(n.base, ir.Name)
        )
        out.append(
            {"rule": words, "left": left, "op": _COMPARISONS[cond.op], "right": right}
            | ({"largest": largest} if largest else {})
            | {"says": sentence}
        )
    return out


def _largest(name: str, data: Any) -> int:
    """The largest value of integer input ``name`` as the host gave it: the value itself, or
    an array (-1 when empty, as the kernel's ``seqlens_k`` reads an empty batch)."""
    if isinstance(data, numbers.Integral) and not isinstance(data, bool):
        return int(data)
    try:
        size = len(data)
        top = (data.max() if hasattr(data, "max") else max(data)) if size else -1
        if isinstance(top, bool) or not isinstance(top, numbers.Integral):
            raise TypeError
    except (TypeError, ValueError):
        raise ContractError(
            f"input '{name}' is {data!r}: expected an array of integers or its largest value"
        ) from None
    return int(top)


def check_requirements(
    source: Mapping[str, Any] | Kernel,
    params: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> None:
    """Raise :class:`ContractError` at the first requirement ``params`` break, naming the
    variant (``name``, or the kernel's), the requirement, the values and what it keeps true.

    ``source`` is a variant's entry (:func:`entry`, ``index.json``'s) or a kernel; ``inputs``
    gives, for a requirement that reads the largest value of an integer input (``seqlens_k``),
    that input: an array of integers or its largest value. ``emitted/kvdsl.js``'s
    ``checkRequirements`` is the same rule, word for word."""
    if isinstance(source, Kernel):
        name, reqs = name or source.name, requirements(source)
    else:
        name, reqs = name or source.get("mode", "variant"), source.get("requires", [])
        for p in source.get("params", []):  # each value as its field's type holds it
            if p["name"] in params:
                _scalar(p["name"], p["type"], params[p["name"]])
    inputs = inputs or {}
    for r in reqs:
        values: dict[str, Any] = {}
        for b in r.get("largest", []):
            if b not in inputs:
                raise ContractError(
                    f"kernel {name} requires {r['rule']}: give the values of input '{b}' "
                    "(its largest is checked)"
                )
            values[b] = _largest(b, inputs[b])
        values |= {k: v for k, v in params.items() if k not in values}
        try:
            left = evaluate(r["left"], values, "params field")
            right = evaluate(r["right"], values, "params field")
        except ExprError as err:
            raise ContractError(f"kernel {name}: {err}") from None
        if not _HOLDS[r["op"]](left, right):
            shown = [f"{k}={params[k]}" for k in sorted(params)]
            shown += [f"largest {b}={values[b]}" for b in r.get("largest", [])]
            raise ContractError(
                f"kernel {name} requires {r['rule']}; got {', '.join(shown)}: {r['says']}"
            )


_HOLDS = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}


def _counts(what: str, given: Mapping[str, Any], names: list[str]) -> dict[str, int]:
    for name in given:
        if name not in names:
            raise ContractError(f"{what} has no variable '{name}'; it has {', '.join(names)}")
    for name in names:
        if name not in given:
            raise ContractError(f"{what} variable '{name}' is missing; give {', '.join(names)}")
        v = given[name]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
            raise ContractError(f"{what} variable '{name}' is {v!r}; expected an integer >= 0")
    return {k: int(v) for k, v in given.items()}


def buffer_sizes(e: Mapping[str, Any], shape_values: Mapping[str, int]) -> dict[str, int]:
    """Bytes per binding name for ``shape_values`` (the params binding: ``params_size``)."""
    values = _counts("shape", shape_values, e["shape"])
    out = {}
    for b in e["bindings"]:
        if b["access"] == "uniform":
            out[b["name"]] = e["params_size"]
            continue
        n, stride = evaluate(b["elements"], values, "shape variable"), b["element_bytes"]
        out[b["name"]] = max(-(-n * stride // 4) * 4, -(-stride // 4) * 4)
    return out


_PACK = {"u32": "<I", "i32": "<i", "f32": "<f"}
_RANGES = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1)}


def _scalar(field: str, ty: str, value: Any) -> int | float:
    """``value`` as params field ``field`` of type ``ty`` holds it; ContractError if it cannot."""
    if ty == "f32":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ContractError(f"params field '{field}' is f32: got {value!r}, expected a number")
        return float(value)
    lo, hi = _RANGES[ty]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ContractError(f"params field '{field}' is {ty}: got {value!r}, expected an integer")
    if not lo <= value <= hi:
        raise ContractError(f"params field '{field}' is {ty}: {value} is outside [{lo}, {hi}]")
    return int(value)


def params_bytes(e: Mapping[str, Any], values: Mapping[str, Any]) -> bytes:
    """The uniform buffer's bytes for ``values``, by the entry's offsets alone."""
    names = [p["name"] for p in e["params"]]
    for name in values:
        if name not in names:
            raise ContractError(f"params has no field '{name}'; the fields are {', '.join(names)}")
    out = bytearray(e["params_size"])
    for p in e["params"]:
        if p["name"] not in values:
            raise ContractError(f"params field '{p['name']}' is missing")
        value = _scalar(p["name"], p["type"], values[p["name"]])
        _struct.pack_into(_PACK[p["type"]], out, p["offset"], value)
    return bytes(out)


def workgroups(
    e: Mapping[str, Any], values: Mapping[str, Any], max_per_dim: int = MAX_PER_DIMENSION
) -> tuple[int, int, int]:
    """The ``(x, y, z)`` workgroups the entry's dispatch rule gives for params ``values``."""
    d = e["dispatch"]
    if d is None:
        raise ContractError("the kernel has no dispatch rule")
    try:
        items = evaluate(d["items"], values, "params field")
    except ExprError as err:
        raise ContractError(str(err)) from None
    n = -(-max(items, 0) // d["per_workgroup"])
    if n <= d["fold"]:
        x, y = n, 1
    else:
        y = -(-n // d["fold"])
        x = -(-n // y) if d["balanced"] else d["fold"]
    if x > max_per_dim or y > max_per_dim:
        raise ContractError(
            f"{n} workgroups need ({x}, {y}) with fold {d['fold']}, past {max_per_dim} per "
            "dimension"
        )
    return (x, y, 1)
