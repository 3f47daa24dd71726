"""f16 in u32 words: how a flat walk carries half-precision data without ``enable f16;``.

A walk that only moves f16 data (:func:`width`) takes eight halves per invocation as one
``vec4<u32>`` (:data:`WORDS`) when the row divides by 8: 16 bytes per invocation, as an f32
``vec4``. Four halves a walk computes on travel as ``vec2<u32>`` (:data:`HALVES`), unpacked by
:func:`as_f32` (``unpack2x16float``) and packed by :func:`to` (``pack2x16float``) through helper
functions the kernel declares once. Bindings (:func:`binding`) keep f16 as the host's type, and
the module needs no ``enable f16;``, so it runs where ``shader-f16`` is missing.
"""

from __future__ import annotations

from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Scalar,
    Val,
    Vec,
    construct,
    convert,
    f16,
    f32,
    pack2x16float,
    u32,
    unpack2x16float,
    vec,
)
from kvdsl.nodes.walks import lanes

#: Halves per :data:`WORDS` vector.
WORD_HALVES = 8
WORDS = Vec(4, u32)
HALVES = Vec(2, u32)
UNPACK_FN, PACK_FN = "unpackHalves", "packHalves"


def width(
    row_len: int, types: tuple[str, ...], rotary: bool = False, half: int | None = None
) -> int:
    """The vector width of a flat walk over rows of ``row_len`` values of ``types``: 8 halves as
    :data:`WORDS` when the walk only moves f16 data (every type f16, no rotary) and the row
    divides by 8, else :func:`lanes` (``half``: rotary's pairs per row)."""
    if not rotary and row_len % WORD_HALVES == 0 and all(t == f16.name for t in types):
        return WORD_HALVES
    return lanes(row_len, rotary, half)


def elem(ty: Scalar, width: int) -> Scalar | Vec:
    """``ty``, ``vec{width}<ty>``, :data:`WORDS` for eight halves (``width`` 8, ``ty`` f16) or
    :data:`HALVES` for four (``width`` 4, ``ty`` f16)."""
    if width == WORD_HALVES:
        if ty != f16:
            raise ValueError(f"only f16 data moves as {WORDS} words, not {ty}")
        return WORDS
    if width == 4 and ty == f16:
        return HALVES
    return ty if width == 1 else vec(width, ty)


def binding(kb: KernelBuilder, name: str, ty: Scalar, width: int, access: str = "read") -> Buffer:
    """A binding of ``ty`` data as :func:`elem` of ``width``; f16 carried in u32 words keeps f16
    as the host array's type (:attr:`kvdsl.ir.tree.Binding.data`)."""
    e = elem(ty, width)
    return kb.binding(name, e, access, ty if ty == f16 and e in (WORDS, HALVES) else None)


def bindings(
    kb: KernelBuilder, names: tuple[str, ...], ty: Scalar, width: int, access: str = "read"
) -> tuple[Buffer, ...]:
    """A :func:`binding` of each of ``names`` (K and V, cos and sin ...), in order."""
    return tuple(binding(kb, name, ty, width, access) for name in names)


def zero(ty: Scalar | Vec) -> Val:
    """Zero in every lane of ``ty`` (all-zero words are +0.0 halves)."""
    return splat(ty, 0 if ty.scalar.is_int else 0.0)


def splat(ty: Scalar | Vec, x: Val | float | int) -> Val:
    """``x`` in every lane of ``ty`` (the builder does not splat scalars into vectors)."""
    if isinstance(ty, Vec):
        return construct(ty, *([x] * ty.n))
    return convert(ty, x)


def as_f32(kb: KernelBuilder, x: Val) -> Val:
    """``x`` converted to f32 lanes (``vec4<f32>`` for a vector; :data:`HALVES` unpacked)."""
    if x.ty == HALVES:
        return kb.fn_call(_halves_fn(kb, UNPACK_FN), x)
    return convert(vec(x.ty.n, f32) if isinstance(x.ty, Vec) else f32, x)


def to(kb: KernelBuilder, ty: Scalar | Vec, x: Val) -> Val:
    """``x`` as a value of the element type ``ty`` to store: itself, converted, or f32 lanes
    packed into :data:`HALVES`."""
    if x.ty == ty:
        return x
    if ty == HALVES:
        return kb.fn_call(_halves_fn(kb, PACK_FN), as_f32(kb, x))
    return convert(ty, as_f32(kb, x) if x.ty == HALVES else x)


def _halves_fn(kb: KernelBuilder, name: str) -> str:
    """Declare ``unpackHalves(w: vec2<u32>) -> vec4<f32>`` or ``packHalves(x: vec4<f32>) ->
    vec2<u32>`` in ``kb`` unless it already is; its name."""
    if any(f.name == name for f in kb.functions):
        return name
    f32x4 = vec(4, f32)
    if name == UNPACK_FN:
        with kb.function(name, [("w", HALVES)], f32x4) as (w,):
            kb.return_(construct(f32x4, unpack2x16float(w.x), unpack2x16float(w.y)))
    else:
        with kb.function(name, [("x", f32x4)], HALVES) as (x,):
            kb.return_(
                construct(HALVES, pack2x16float(x.member("xy")), pack2x16float(x.member("zw")))
            )
    return name
