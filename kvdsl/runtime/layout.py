"""Host-side memory layout: the params uniform's bytes and storage buffers' bytes.

Uniform layout follows WGSL's rules for host-shareable structs: each field sits at the next
multiple of its alignment (4 for 32-bit scalars, 2 for f16, ``vec2`` 2x the element size, ``vec3``
and ``vec4`` 4x, ``matCxR`` its column ``vecR``'s, each column that far from the last, a struct
its largest member's, an array its element's, its elements a stride apart), and the
whole struct is padded to a multiple of 16, the uniform address space's
struct alignment. Storage arrays of ``vec3`` have a stride of four elements; every other element
type is packed. A storage binding must be non-empty and a multiple of 4 bytes, so the bytes sent to
the GPU are zero-padded and the padding is cut off again on read-back.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from kvdsl.ir.host import split_values
from kvdsl.ir.texels import host_axes, host_shape_fits, texel_refusal
from kvdsl.ir.types import (
    Array,
    Mat,
    Sampler,
    Scalar,
    Struct,
    Vec,
    field_offsets,
    size_of,
    stride,
)
from kvdsl.runtime.errors import BufferError, ParamsError
from kvdsl.runtime.inputs import check_buffers, check_params, check_value

__all__ = [
    "check_buffers",
    "from_storage",
    "pack_params",
    "pack_uniform",
    "params_layout",
    "split_textures",
    "split_uniforms",
    "to_storage",
]


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def params_layout(struct: Struct) -> tuple[dict[str, int], int]:
    """Each field's byte offset (:func:`kvdsl.ir.types.field_offsets`), and the struct's size
    rounded up to 16."""
    offsets = dict(zip((n for n, _ in struct.fields), field_offsets(struct)))
    return offsets, max(_round_up(size_of(struct), 16), 16)


def _scalar_bytes(ty: Scalar, value: object) -> bytes:
    return np.array(value.item() if isinstance(value, np.generic) else value, ty.dtype).tobytes()


def pack_params(struct: Struct, values: Mapping[str, object]) -> bytes:
    """The bytes of ``struct`` holding ``values`` (one value per field, vectors as sequences),
    after :func:`kvdsl.runtime.inputs.check_params` (a :class:`ParamsError` for a value that
    does not fit)."""
    check_params(struct, values, "kernel")
    _, size = params_layout(struct)
    out = bytearray(size)
    _pack(out, 0, struct, values)
    return bytes(out)


def split_uniforms(
    uniforms: tuple, values: Mapping[str, object] | None, params_struct: Struct | None = None
) -> tuple[dict, dict]:
    """``values`` parted into the params fields' and the other uniforms' (by each uniform's
    name, :class:`~kvdsl.ir.tree.Uniform`; a field given as ``params.NAME`` too, and only so
    where a uniform shares its name: :func:`kvdsl.ir.host.split_values`)."""
    fields = tuple(n for n, _ in params_struct.fields) if params_struct is not None else ()
    try:
        return split_values(fields, uniforms, values)
    except KeyError as err:
        raise ParamsError(err.args[0]) from None


def split_textures(textures: tuple, buffers: Mapping[str, object]) -> tuple[dict, dict]:
    """``buffers`` parted into the storage bindings' arrays and the storage textures' (by each
    :class:`~kvdsl.ir.tree.Texture`'s name), each texture's checked: ``[height, width,
    channels]`` of its format's dtype (``[depth, height, width, 4]`` of a ``texture_3d``)."""
    names = {t.name: t for t in textures}
    texels = {}
    for name, t in names.items():
        if isinstance(t.ty, Sampler):  # the default sampler: the host gives nothing
            continue
        a = buffers.get(name)
        if a is None:
            raise BufferError(f"texture '{name}' ({t.ty}) has no array")
        a = np.asarray(a)
        ty = t.ty
        axes = host_axes(ty)
        shape_ok = host_shape_fits(ty, a.shape)
        if not shape_ok or a.dtype.newbyteorder("=") != ty.dtype:
            raise BufferError(
                f"texture '{name}' ({ty}) is given as {a.dtype}{list(a.shape)}: expected "
                f"{ty.dtype}[{', '.join(axes)}]"
            )
        if min(a.shape[: len(axes) - (not getattr(ty, "depth", False))]) < 1:
            raise BufferError(f"texture '{name}' ({ty}) is empty: {list(a.shape)}")
        if (why := texel_refusal(name, ty, a)) is not None:
            raise BufferError(why)
        texels[name] = np.ascontiguousarray(a, ty.dtype.newbyteorder("<"))
    return {k: v for k, v in buffers.items() if k not in names}, texels


def pack_uniform(uniform, values: Mapping[str, object], kernel: str = "kernel") -> bytes:
    """The bytes of uniform ``uniform`` (a :class:`~kvdsl.ir.tree.Uniform`) holding its value,
    ``values[uniform.name]``, checked as a params field of its type is, padded to 16 bytes."""
    if uniform.name not in values:
        raise ParamsError(
            f"uniform '{uniform.name}' ({uniform.ty}) has no value: kernel {kernel} takes it "
            "by its name beside the params fields"
        )
    check_value(uniform.name, uniform.ty, values[uniform.name])
    out = bytearray(max(_round_up(size_of(uniform.ty), 16), 16))
    _pack(out, 0, uniform.ty, values[uniform.name])
    return bytes(out)


def _pack(out: bytearray, at: int, ty: object, value: object) -> None:
    """Write ``value`` of type ``ty`` into ``out`` from byte ``at``: a struct member by member
    at its offset, a fixed-size array element by element at its stride."""
    if isinstance(ty, Struct):
        for (name, t), offset in zip(ty.fields, field_offsets(ty)):
            _pack(out, at + offset, t, value[name])
        return
    if isinstance(ty, Array):
        for k, part in enumerate(value):
            _pack(out, at + k * stride(ty.elem), ty.elem, part)
        return
    if isinstance(ty, Mat):  # column by column, each vecR's alignment apart
        cols = np.asarray(value, dtype=np.float64).reshape(ty.c, ty.r)
        for k, col in enumerate(cols):
            data = b"".join(_scalar_bytes(ty.elem, v) for v in col)
            out[at + k * ty.column.align : at + k * ty.column.align + len(data)] = data
        return
    if isinstance(ty, Vec):
        parts = list(np.ravel(value)) if not np.isscalar(value) else [value]
        data = b"".join(_scalar_bytes(ty.elem, v) for v in parts)
    else:
        data = _scalar_bytes(ty, value)
    out[at : at + len(data)] = data


def _vec3(elem: Scalar | Vec) -> bool:
    return isinstance(elem, Vec) and elem.n == 3


def to_storage(elem: Scalar | Vec, a: np.ndarray) -> bytes:
    """The bytes of a storage buffer holding ``a`` as ``array<elem>``, padded to a legal size."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if _vec3(elem):
        flat = np.pad(flat.reshape(-1, 3), ((0, 0), (0, 1))).reshape(-1)
    data = flat.tobytes()
    least = (
        elem.align
        if _vec3(elem)
        else size_of(elem) if isinstance(elem, (Array, Mat)) else elem.size
    )
    size = max(_round_up(len(data), 4), _round_up(least, 4))
    return data + bytes(size - len(data))


def from_storage(elem: Scalar | Vec, data: bytes | memoryview, like: np.ndarray) -> np.ndarray:
    """The array read back from a storage buffer's bytes, shaped and typed like ``like``."""
    n = like.size + (like.size // 3 if _vec3(elem) else 0)
    flat = np.frombuffer(data, dtype=like.dtype, count=n)
    if _vec3(elem):
        flat = flat.reshape(-1, 4)[:, :3].reshape(-1)
    return flat.reshape(like.shape).copy()
