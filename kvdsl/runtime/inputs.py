"""What a host passes a kernel, checked once for every backend: the params values against the
params struct, and one array per binding against the binding's host type.

:func:`check_inputs` is the one check: ``kvdsl run`` applies it before any backend runs (the GPU,
the interpreter, or both), and :func:`kvdsl.runtime.run`, :func:`~kvdsl.runtime.time_kernel` and
:func:`~kvdsl.runtime.run_source` before a dispatch. A refusal is a :class:`ParamsError` or a
:class:`BufferError`, one line naming the field or binding, the value and what is allowed, in
words.

Params: every field of the struct given, no other; an integer field (``u32``, ``i32``) takes
an integer inside its type's range (not a float, even a whole one, nor a boolean); a float
field takes a finite number inside its type's range (it is rounded to the type); a vector
field takes as many values as it has components; a struct field an object of its members, a
fixed-size array field a list of its elements, each checked as a field of its own (``inner.a``,
``packed[1]``).

Buffers: every binding given an array, no array without a binding (all of them named at once);
an array holds the binding's host type (:attr:`~kvdsl.ir.tree.Binding.host`: float16 for f16
data moved as ``vec4<u32>`` words), a whole number of elements of it. The kind and width must
be the binding's: an int64 array is refused even where its values would fit 32 bits, so that
what is taken depends on the type a host builds, never on the values of one run, and no value is
ever cut. The byte order is not a value: an array of the right kind and width in big-endian
order (``>f4`` from a file) is converted to little-endian, WebGPU's order, and runs as its
values say; what comes back is little-endian.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np

from kvdsl.ir.tree import Binding, Kernel
from kvdsl.ir.types import Array, Mat, Scalar, Struct, Vec
from kvdsl.runtime.errors import BufferError, ParamsError

_INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1)}
_KIND_WORDS = {"f": "floats", "i": "signed integers", "u": "unsigned integers"}
_OTHER_KINDS = {
    "b": "booleans (true/false)",
    "U": "text",
    "S": "bytes of text",
    "O": "Python objects",
    "c": "complex numbers",
    "V": "records",
    "M": "dates",
    "m": "time spans",
}


def shown(value: Any) -> str:
    """``value`` as a refusal shows it: JSON's words for null and booleans, text quoted."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        more = f", ... {len(value)} values" if len(value) > 4 else ""
        return "[" + ", ".join(shown(v) for v in value[:4]) + more + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(k)}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"an array of {value.size} values"
    return "a value that is not a number, text, a list or null"


def array_words(dtype: np.dtype) -> str:
    """What an array of ``dtype`` holds, in words: ``32-bit floats (float32)``."""
    if dtype.kind in _KIND_WORDS:
        return f"{dtype.itemsize * 8}-bit {_KIND_WORDS[dtype.kind]} ({dtype.name})"
    return _OTHER_KINDS.get(dtype.kind, dtype.name)


def _describe(struct: Struct) -> str:
    return f"struct {struct.name} {{ " + ", ".join(f"{n}: {t}" for n, t in struct.fields) + " }"


def _names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _scalar(field: str, ty: Scalar, value: Any) -> None:
    if isinstance(value, np.generic):
        value = value.item()
    if ty.is_int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ParamsError(
                f"params field '{field}' is {ty}: got {shown(value)}, expected an integer"
            )
        lo, hi = _INT_RANGE[ty.name]
        if not lo <= int(value) <= hi:
            raise ParamsError(f"params field '{field}' is {ty}: {value} is outside [{lo}, {hi}]")
        return
    if ty.is_float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ParamsError(
                f"params field '{field}' is {ty}: got {shown(value)}, expected a number"
            )
        most = float(np.finfo(ty.dtype).max)
        if not math.isfinite(value) or abs(value) > most:
            raise ParamsError(
                f"params field '{field}' is {ty}: {shown(float(value))} is outside its range: "
                f"expected a finite number from {-most:.8g} to {most:.8g}"
            )
        return
    raise ParamsError(f"params field '{field}' has type {ty}, which a uniform buffer cannot hold")


def check_params(struct: Struct | None, params: Mapping[str, Any] | None, kernel: str) -> None:
    """Raise :class:`ParamsError` unless ``params`` gives every field of ``struct`` (the
    kernel's params, None: it has none) a value of its type, and no other field."""
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise ParamsError(f"params: got {shown(params)}, expected an object of params fields")
    if struct is None:
        if params:
            raise ParamsError(
                f"params has no field {_names(list(params))}: kernel {kernel} takes no params"
            )
        return
    known = [n for n, _ in struct.fields]
    unknown = [n for n in params if n not in known]
    if unknown:
        what = "field" if len(unknown) == 1 else "fields"
        raise ParamsError(
            f"params has no {what} {_names(unknown)}; the params are {_describe(struct)}"
        )
    missing = [n for n in known if n not in params]
    if missing:
        what = (
            f"field {_names(missing)} is" if len(missing) == 1 else f"fields {_names(missing)} are"
        )
        raise ParamsError(f"params {what} missing; the params are {_describe(struct)}")
    for name, ty in struct.fields:
        _field(name, ty, params[name])


def check_value(name: str, ty: Any, value: Any) -> None:
    """Raise :class:`ParamsError` unless ``value`` is a value of type ``ty`` for the uniform
    value ``name`` (a uniform other than params, given by its name)."""
    _field(name, ty, value)


def _field(name: str, ty: Any, value: Any) -> None:
    """Raise :class:`ParamsError` unless ``value`` is a value of params field ``name``'s type
    ``ty``: a struct member's named ``inner.a``, an array element's ``packed[1]``."""
    if isinstance(ty, Struct):  # an object of its members, every one and no other
        if not isinstance(value, Mapping) or set(value) != {n for n, _ in ty.fields}:
            raise ParamsError(
                f"params field '{name}' is {_describe(ty)}: got {shown(value)}, expected an "
                f"object of its members {_names([n for n, _ in ty.fields])}"
            )
        for n, t in ty.fields:
            _field(f"{name}.{n}", t, value[n])
        return
    if isinstance(ty, Array):  # a list of its elements, as many as it has
        parts = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if parts is None or len(parts) != ty.n:
            raise ParamsError(
                f"params field '{name}' is {ty}: got {shown(value)}, expected a list of {ty.n} "
                f"values of {ty.elem}"
            )
        for k, part in enumerate(parts):
            _field(f"{name}[{k}]", ty.elem, part)
        return
    if isinstance(ty, (Vec, Mat)):
        n = ty.n if isinstance(ty, Vec) else ty.c * ty.r
        if isinstance(value, np.ndarray):
            parts = list(value.reshape(-1))
        elif isinstance(value, (list, tuple)) and isinstance(ty, Mat):
            parts = list(np.ravel(np.asarray(value, dtype=object)))
        elif isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            parts = [value]
        if len(parts) != n:
            what = "" if isinstance(ty, Vec) else f" (column-major: {ty.c} columns of {ty.r})"
            raise ParamsError(
                f"params field '{name}' is {ty}: got {shown(value)}, expected {n} values" + what
            )
        for part in parts:
            _scalar(name, ty.elem, part)
    else:
        _scalar(name, ty, value)


def check_buffers(
    bindings: tuple[Binding, ...],
    buffers: Mapping[str, Any],
    sized_by: tuple[Kernel, Mapping[str, Any]] | None = None,
) -> dict[str, np.ndarray]:
    """Raise :class:`BufferError` unless ``buffers`` holds exactly one fitting array per
    binding; the arrays to run on (a big-endian one converted to little-endian).

    Every problem is named in the one line: each missing binding, each array without a binding,
    each array of the wrong type and, with ``sized_by`` (a kernel with extents and its checked
    params: :func:`kvdsl.runtime.contract.needs`), the elements a missing binding needs and each
    array too short for the params (one whose extent reads an input's values, such as a pool
    sized by ``page_table``'s largest id, is checked after those values are:
    :func:`kvdsl.runtime.contract.check_contract`)."""
    names = [b.name for b in bindings]
    wrong = []
    extra = [n for n in buffers if n not in names]
    out = {}
    for b in bindings:
        if b.name not in buffers:
            continue
        problem, a = _array(b, buffers[b.name])
        if problem is None:
            out[b.name] = a
        else:
            wrong.append(problem)
    need = {}
    if sized_by is not None:
        from kvdsl.runtime.contract import needs

        need = needs(sized_by[0], sized_by[1], out)
    missing = [b for b in bindings if b.name not in buffers]
    if missing:
        each = ", ".join(
            f"'{b.name}' (array<{b.elem}>, {b.access}"
            + (f", {need[b.name]} elements" if b.name in need else "")
            + ")"
            for b in missing
        )
        one = len(missing) == 1
        wrong.insert(
            0, f"{'binding' if one else 'bindings'} {each} {'has' if one else 'have'} no buffer"
        )
    if extra:
        what = f"buffer {_names(extra)} has" if len(extra) == 1 else f"buffers {_names(extra)} have"
        wrong.append(f"{what} no binding; the kernel's bindings are {', '.join(names)}")
    if sized_by is not None:
        from kvdsl.runtime.contract import elements, reads_values, short_binding

        kernel = sized_by[0]
        for name, extent in kernel.extents:
            b, a = kernel.binding(name), out.get(name)
            if b is None or a is None or reads_values(kernel, extent):
                continue  # an extent of an input's values waits for their check
            if elements(b, a) < need[name]:
                wrong.append(short_binding(kernel.name, b, elements(b, a), need[name], extent))
    if wrong:  # every problem named at once
        raise BufferError("; ".join(wrong))
    return out


def _array(b: Binding, a: Any) -> tuple[str | None, np.ndarray]:
    """What is wrong with ``a`` as binding ``b``'s array (None: nothing), and the array to run
    on (a big-endian one converted to little-endian)."""
    want = b.host.dtype
    what = f"array<{b.elem}>" if b.data is None else f"array<{b.elem}> of {b.data} data"
    if not isinstance(a, np.ndarray):
        got = f"a list of {len(a)} values" if isinstance(a, (list, tuple)) else shown(a)
        return (
            f"binding '{b.name}' ({what}) got {got}, expected a numpy array of "
            f"{array_words(want)}"
        ), a
    if a.dtype.kind != want.kind or a.dtype.itemsize != want.itemsize:
        return (
            f"binding '{b.name}' ({what}) got an array of {array_words(a.dtype)}, "
            f"expected {array_words(want)}"
        ), a
    if a.dtype != want:  # the same values in the other byte order
        a = a.astype(want)
    if a.size % b.host_values:
        return (
            f"binding '{b.name}' ({what}) got {a.size} {want} values, "
            f"expected a multiple of {b.host_values}"
        ), a
    return None, a


def check_inputs(
    bindings: tuple[Binding, ...],
    struct: Struct | None,
    buffers: Mapping[str, Any],
    params: Mapping[str, Any] | None,
    kernel: str = "kernel",
    contract: Kernel | None = None,
) -> dict[str, np.ndarray]:
    """The one check of what a host passes (the params, then the buffers), before any backend
    runs: raise :class:`ParamsError` or :class:`BufferError`, else return the arrays to run on
    (:func:`check_buffers`; ``contract``: a kernel whose extents size the buffers, so that a
    short array and a missing one's size are named too)."""
    check_params(struct, params, kernel)
    return check_buffers(bindings, buffers, None if contract is None else (contract, params or {}))
