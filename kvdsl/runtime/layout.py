"""Host-side memory layout: the params uniform's bytes and storage buffers' bytes.

Uniform layout follows WGSL's rules for host-shareable structs: each field sits at the next
multiple of its alignment (4 for 32-bit scalars, 2 for f16, ``vec2`` 2x the element size, ``vec3``
and ``vec4`` 4x), and the whole struct is padded to a multiple of 16, the uniform address space's
struct alignment. Storage arrays of ``vec3`` have a stride of four elements; every other element
type is packed. A storage binding must be non-empty and a multiple of 4 bytes, so the bytes sent to
the GPU are zero-padded and the padding is cut off again on read-back.
"""

from __future__ import annotations

import numbers

import numpy as np

from kvdsl.ir.tree import Binding
from kvdsl.ir.types import Array, Scalar, Struct, Vec, size_of
from kvdsl.runtime.errors import BufferError, ParamsError

_INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1)}


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _align(t: Scalar | Vec) -> int:
    return t.align if isinstance(t, Vec) else t.size


def _describe(struct: Struct) -> str:
    return f"struct {struct.name} {{ " + ", ".join(f"{n}: {t}" for n, t in struct.fields) + " }"


def params_layout(struct: Struct) -> tuple[dict[str, int], int]:
    """Each field's byte offset, and the struct's size rounded up to 16."""
    offsets, end = {}, 0
    for name, ty in struct.fields:
        offset = _round_up(end, _align(ty))
        offsets[name] = offset
        end = offset + ty.size
    return offsets, max(_round_up(end, 16), 16)


def _scalar_bytes(field: str, ty: Scalar, value: object) -> bytes:
    if ty.is_int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise ParamsError(f"params field '{field}' is {ty}: got {value!r}, expected an integer")
        lo, hi = _INT_RANGE[ty.name]
        if not lo <= int(value) <= hi:
            raise ParamsError(f"params field '{field}' is {ty}: {value} is outside [{lo}, {hi}]")
        return np.array(int(value), ty.dtype).tobytes()
    if ty.is_float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ParamsError(f"params field '{field}' is {ty}: got {value!r}, expected a number")
        return np.array(value, ty.dtype).tobytes()
    raise ParamsError(f"params field '{field}' has type {ty}, which a uniform buffer cannot hold")


def pack_params(struct: Struct, values: dict) -> bytes:
    """The bytes of ``struct`` holding ``values`` (one value per field, vectors as sequences)."""
    known = {n for n, _ in struct.fields}
    for name in values:
        if name not in known:
            raise ParamsError(f"params has no field '{name}'; the params are {_describe(struct)}")
    offsets, size = params_layout(struct)
    out = bytearray(size)
    for name, ty in struct.fields:
        if name not in values:
            raise ParamsError(
                f"params field '{name}' is missing; the params are {_describe(struct)}"
            )
        value = values[name]
        if isinstance(ty, Vec):
            parts = list(np.ravel(value)) if not np.isscalar(value) else [value]
            if len(parts) != ty.n:
                raise ParamsError(
                    f"params field '{name}' is {ty}: got {value!r}, expected {ty.n} values"
                )
            data = b"".join(_scalar_bytes(name, ty.elem, v) for v in parts)
        else:
            data = _scalar_bytes(name, ty, value)
        out[offsets[name] : offsets[name] + len(data)] = data
    return bytes(out)


def check_buffers(bindings: tuple[Binding, ...], buffers: dict[str, np.ndarray]) -> None:
    """Raise :class:`BufferError` unless ``buffers`` holds exactly one fitting array per binding.

    An array holds the binding's host type (:attr:`~kvdsl.ir.tree.Binding.host`: float16 for
    f16 data moved as ``vec4<u32>`` words), a whole number of elements of it.
    """
    names = [b.name for b in bindings]
    for name in buffers:
        if name not in names:
            raise BufferError(
                f"buffer '{name}' has no binding; the kernel's bindings are {', '.join(names)}"
            )
    for b in bindings:
        if b.name not in buffers:
            raise BufferError(f"binding '{b.name}' (array<{b.elem}>, {b.access}) has no buffer")
        a = buffers[b.name]
        want = b.host.dtype
        what = f"array<{b.elem}>" if b.data is None else f"array<{b.elem}> of {b.data} data"
        if not isinstance(a, np.ndarray):
            raise BufferError(
                f"binding '{b.name}' ({what}) got {type(a).__name__}, "
                f"expected a numpy array of {want}"
            )
        if a.dtype != want:
            raise BufferError(f"binding '{b.name}' ({what}) got a {a.dtype} array, expected {want}")
        if a.size % b.host_values:
            raise BufferError(
                f"binding '{b.name}' ({what}) got {a.size} {want} values, "
                f"expected a multiple of {b.host_values}"
            )


def _vec3(elem: Scalar | Vec) -> bool:
    return isinstance(elem, Vec) and elem.n == 3


def to_storage(elem: Scalar | Vec, a: np.ndarray) -> bytes:
    """The bytes of a storage buffer holding ``a`` as ``array<elem>``, padded to a legal size."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if _vec3(elem):
        flat = np.pad(flat.reshape(-1, 3), ((0, 0), (0, 1))).reshape(-1)
    data = flat.tobytes()
    least = elem.align if _vec3(elem) else size_of(elem) if isinstance(elem, Array) else elem.size
    size = max(_round_up(len(data), 4), _round_up(least, 4))
    return data + bytes(size - len(data))


def from_storage(elem: Scalar | Vec, data: bytes | memoryview, like: np.ndarray) -> np.ndarray:
    """The array read back from a storage buffer's bytes, shaped and typed like ``like``."""
    n = like.size + (like.size // 3 if _vec3(elem) else 0)
    flat = np.frombuffer(data, dtype=like.dtype, count=n)
    if _vec3(elem):
        flat = flat.reshape(-1, 4)[:, :3].reshape(-1)
    return flat.reshape(like.shape).copy()
