"""Symmetric integer quantisation of K/V elements and int4 nibble packing.

An element ``x`` with scale ``s`` quantises to ``i32(clamp(round(x / s), QMIN, QMAX))``: WGSL's
``round`` ties to even, the clamp keeps the value in the cache's integer range and the conversion
is then exact. Scales are either one per (kv head, channel) -- ``scale[hk * HEAD_DIM + d]`` -- or
one per tensor -- ``scale[0]`` -- chosen at run time by ``params.perChannel != 0u``, as the
template's ``kscale``/``vscale`` helper functions do (:func:`scale_function`); the flat walks
read a vector's four scales in one ``vec4<f32>`` (:func:`scale_index`, :func:`scales`).
Packed, K's and V's scales are one binding of ``vec2<f32>`` entries ``(k, v)`` at those indices,
each entry read once for both (:func:`kv_scale_function`, :func:`kv_scales`).

Packed int4 stores two elements per u32 word, each offset by +8 into ``[0, 15]``: element ``2j``
in bits 0..3 (low nibble first) and element ``2j + 1`` in bits 4..7; four elements make two
words (:func:`pack_int4x4`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Val,
    Vec,
    clamp,
    construct,
    convert,
    f32,
    i32,
    lit,
    round_,
    select,
    u32,
    vec,
)
from kvdsl.nodes.words import splat

#: The integer range of each supported bit width.
QRANGE = {8: (-128, 127), 4: (-8, 7)}
NIBBLE_OFFSET = 8


def scale_function(
    kb: KernelBuilder, name: str, scale: Buffer, head_dim: Val, per_channel: Val
) -> str:
    """Define ``fn name(d: u32, hk: u32) -> f32`` reading the per-channel or per-tensor scale.

    ``per_channel`` is a bool expression over params (``params.perChannel != 0u``). Returns the
    function's name for :meth:`KernelBuilder.fn_call`.
    """
    with kb.function(name, [("d", u32), ("hk", u32)], f32) as (d, hk):
        kb.return_(convert(f32, scale[select(0, hk * head_dim + d, per_channel)]))
    return name


def kv_scale_function(
    kb: KernelBuilder, name: str, scale: Buffer, head_dim: Val, per_channel: Val
) -> str:
    """Define ``fn name(d: u32, hk: u32) -> vec2<f32>`` reading the ``(k, v)`` scale entry of a
    packed scale binding, per channel or per tensor as :func:`scale_function` does."""
    with kb.function(name, [("d", u32), ("hk", u32)], vec(2, f32)) as (d, hk):
        kb.return_(scale[select(0, hk * head_dim + d, per_channel)])
    return name


def quantize(x: Val, scale: Val, qmin: Val, qmax: Val) -> Val:
    """``i32(clamp(round(x / scale), qmin, qmax))`` lane by lane, for f32 ``x`` and ``scale`` (or
    ``vec4<f32>`` of both; ``qmin``/``qmax`` are f32 consts)."""
    if isinstance(x.ty, Vec):
        out, lo, hi = vec(x.ty.n, i32), splat(x.ty, qmin), splat(x.ty, qmax)
        return convert(out, clamp(round_(x / scale), lo, hi))
    return convert(i32, clamp(round_(x / scale), qmin, qmax))


def nibble(q: Val) -> Val:
    """The 4-bit field of a quantised int4 value: ``u32(q + 8) & 0xFu``."""
    return convert(u32, q + NIBBLE_OFFSET) & 0xF


def pack_nibbles(lo: Val, hi: Val) -> Val:
    """Two 4-bit fields in one u32 word, ``lo`` in the low nibble: ``lo | (hi << 4u)``."""
    return lo | (hi << 4)


def pack_int4(q0: Val, q1: Val) -> Val:
    """Two int4 values in one u32, ``q0`` in the low nibble: ``nib(q0) | (nib(q1) << 4u)``."""
    return pack_nibbles(nibble(q0), nibble(q1))


def pack_int4x4(kb: KernelBuilder, name: str, q: Val) -> Val:
    """Four int4 values (a ``vec4<i32>``) as two u32 words (``vec2<u32>``), lanes 0/2 in the low
    nibbles; ``name`` holds their 4-bit fields."""
    u32x4 = vec(4, u32)
    nib = kb.let(name, convert(u32x4, q + splat(vec(4, i32), NIBBLE_OFFSET)) & splat(u32x4, 0xF))
    return construct(vec(2, u32), pack_nibbles(nib.x, nib.y), pack_nibbles(nib.z, nib.w))


@dataclass(frozen=True)
class ScaleIndex:
    """Where vector ``d``'s scales start in a scale binding and the step between its lanes'."""

    base: Val
    step: Val | None  # None for one lane per vector


def scale_index(
    kb: KernelBuilder,
    name: str,
    hk: Val,
    d: Val,
    head_dim: Val,
    width: int,
    per_channel: Val,
    step: Val | None = None,
) -> ScaleIndex:
    """The scales' index of vector ``d`` of kv head ``hk``, shared by K's and V's scale
    bindings: per channel ``hk*HEAD_DIM + 4d + l`` for lane ``l``, per tensor 0 in every lane,
    as ``per_channel`` (a bool over params) says (``{name}Base`` and ``sStep``). ``step`` reuses
    another index's step."""
    if width == 1:
        return ScaleIndex(kb.let(f"{name}Base", select(0, hk * head_dim + d, per_channel)), None)
    base = kb.let(f"{name}Base", select(0, hk * head_dim + d * width, per_channel))
    if step is None:
        step = kb.let("sStep", select(lit(0, u32), lit(1, u32), per_channel))
    return ScaleIndex(base, step)


def scales(kb: KernelBuilder, name: str, scale: Buffer, at: ScaleIndex) -> Val:
    """The scales of binding ``scale`` at ``at`` (:func:`scale_index`): ``f32``, or one
    ``vec4<f32>`` of the four lanes'."""
    if at.step is None:
        return kb.let(name, scale[at.base])
    width = 4
    lanes_ = [scale[at.base + at.step * i] if i else scale[at.base] for i in range(width)]
    return kb.let(name, construct(vec(width, f32), *lanes_))


def kv_scales(
    kb: KernelBuilder, k_name: str, v_name: str, scale: Buffer, at: ScaleIndex
) -> tuple[Val, Val]:
    """K's and V's scales from a packed binding of ``vec2<f32>`` entries at ``at``
    (:func:`scale_index`): each entry loaded once (``{k_name}V{l}`` for lane ``l``), then K's
    and V's ``f32``, or one ``vec4<f32>`` each of the four lanes'."""
    if at.step is None:
        e = kb.let(f"{k_name}V", scale[at.base])
        return kb.let(k_name, e.x), kb.let(v_name, e.y)
    width = 4
    e = [
        kb.let(f"{k_name}V{i}", scale[at.base + at.step * i] if i else scale[at.base])
        for i in range(width)
    ]
    k = kb.let(k_name, construct(vec(width, f32), *(x.x for x in e)))
    v = kb.let(v_name, construct(vec(width, f32), *(x.y for x in e)))
    return k, v
