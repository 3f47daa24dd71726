"""Symmetric integer quantisation of K/V elements and int4 nibble packing.

An element ``x`` with scale ``s`` quantises to ``i32(clamp(round(x / s), QMIN, QMAX))``: WGSL's
``round`` ties to even, the clamp keeps the value in the cache's integer range and the conversion
is then exact. Scales are either one per (kv head, channel) -- ``scale[hk * HEAD_DIM + d]`` -- or
one per tensor -- ``scale[0]`` -- chosen at run time by ``params.perChannel != 0u``, as the
template's ``kscale``/``vscale`` helper functions do.

Packed int4 stores two elements per u32 word, each offset by +8 into ``[0, 15]``: element ``2j``
in bits 0..3 (low nibble first) and element ``2j + 1`` in bits 4..7.
"""

from __future__ import annotations

from kvdsl.ir import Buffer, KernelBuilder, Val, clamp, convert, f32, i32, round_, select, u32

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


def quantize(x: Val, scale: Val, qmin: Val, qmax: Val) -> Val:
    """``i32(clamp(round(x / scale), qmin, qmax))`` for f32 ``x`` and ``scale``."""
    return convert(i32, clamp(round_(x / scale), qmin, qmax))


def nibble(q: Val) -> Val:
    """The 4-bit field of a quantised int4 value: ``u32(q + 8) & 0xFu``."""
    return convert(u32, q + NIBBLE_OFFSET) & 0xF


def pack_int4(q0: Val, q1: Val) -> Val:
    """Two int4 values in one u32, ``q0`` in the low nibble: ``nib(q0) | (nib(q1) << 4u)``."""
    return nibble(q0) | (nibble(q1) << 4)
