"""K RMSNorm: over one row held in a function-scope ``var`` array, or reduced across the
invocations that hold a row's vectors.

For a row ``k`` of ``n`` elements, a weight vector ``w`` and an epsilon::

    k'[d] = k[d] * inverseSqrt(mean(k^2) + eps) * w[d]

The inverse RMS is :func:`inverse_rms` alone; :class:`Norm` applies it, with the weight, to the
vectors a lane holds. The sum of squares accumulates in f32 from ``d = 0`` upward (the order the template uses, so the
interpreter and the GPU add the same terms in the same order); ``k[d] * invRms`` is multiplied
before the weight. The flat walks sum per-vector ``dot`` partials (:func:`row_sum_of_squares`,
:func:`subgroup_row_sum_of_squares`), so their sums may differ from the per-row sum in the last
ulps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Local,
    Val,
    Vec,
    array,
    convert,
    dot,
    f32,
    inverse_sqrt,
    lit,
    min_,
    select,
    shuffle_xor,
    u32,
    vec,
)
from kvdsl.nodes.walks import row_elements
from kvdsl.nodes.words import splat


def rms_norm_row(kb: KernelBuilder, row: Local, weight: Buffer, n: Val, eps: Val) -> Val:
    """Normalise the f32 ``var`` array ``row`` of ``n`` elements in place; returns ``invRms``."""
    ms = kb.var("ms", f32, 0.0)
    with row_elements(kb, n) as d:
        ms.set(ms + row[d] * row[d])
    inv_rms = inverse_rms(kb, ms, n, eps)
    with row_elements(kb, n) as d:
        row[d] = normed(row[d], inv_rms, convert(f32, weight[d]))
    return inv_rms


def inverse_rms(kb: KernelBuilder, ms: Val, n: Val, eps: Val) -> Val:
    """``invRms = inverseSqrt(ms / f32(n) + eps)``: the inverse root mean square of a row of
    ``n`` elements whose squares sum to ``ms`` (every RMSNorm of every writer takes it here)."""
    return kb.let("invRms", inverse_sqrt(ms / convert(f32, n) + eps))


def reduced_inverse_rms(
    kb: KernelBuilder, n: Val, eps: Val, *row: Any, what: str = "K RMSNorm"
) -> Val:
    """``invRms`` of a row of ``n`` elements whose sum of squares the invocations holding it
    reduce in workgroup memory: ``row`` is :func:`row_sum_of_squares`' arguments after ``kb``
    (a barrier every invocation reaches); ``what`` names the norm in the kernel's comment."""
    kb.comment(f"{what}: the row's sum of squares, reduced in workgroup memory.")
    return inverse_rms(kb, row_sum_of_squares(kb, *row), n, eps)


@dataclass(frozen=True)
class Norm:
    """RMSNorm of the vectors a lane holds of a row: the row's ``invRms`` (:func:`inverse_rms`),
    ``weight(at)`` the weight's vector ``at`` (f32 lanes), and ``rows``: where the row is
    normed (a fused kernel's heads without a norm keep their values; None: every row)."""

    inv_rms: Val
    weight: Callable[[Val], Val]
    rows: Val | None = None

    def apply(self, x: Val, at: Val) -> Val:
        """The row's vector ``at``, ``x``, normed with its weight (:meth:`scale`)."""
        return self.scale(x, self.weight(at))

    def scale(self, x: Val, w: Val) -> Val:
        """``x`` normed with the weight ``w`` (:func:`normed`), or ``x`` as it is where the row
        is not normed."""
        y = normed(x, self.inv_rms, w)
        return y if self.rows is None else select(x, y, self.rows)


def normed(x: Val, inv_rms: Val, w: Val) -> Val:
    """``x * invRms * w``: the RMSNorm of an element (or vector) with its weight, multiplied in
    the per-row program's order (so that every walk computes the same products)."""
    return x * inv_rms * w


def square(x: Val | tuple[Val, ...]) -> Val:
    """``dot(x, x)`` (``x * x`` for a scalar); of a tuple, the sum of its members' in order."""
    xs = x if isinstance(x, tuple) else (x,)
    parts = [dot(v, v) if isinstance(v.ty, Vec) else v * v for v in xs]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def row_sum_of_squares(
    kb: KernelBuilder,
    x: Val | tuple[Val, ...],
    d: Val,
    per_row: Val,
    wg: int,
    lanes_per_row: int,
) -> Val:
    """The sum of squares of the row whose vector ``d`` this invocation holds as ``x``.

    ``x`` may be the pair walk's two vectors (:func:`square`); ``per_row`` and
    ``lanes_per_row`` then count pairs, the row's invocations.

    Each invocation writes ``dot(x, x)`` to workgroup memory; after a barrier it adds its row's
    ``per_row`` partials from the row's first lane, in a fixed order. A row's vectors are
    consecutive invocations of one workgroup when ``WG % per_row == 0`` (the configs require it),
    so the row starts at lane ``lid.x - d``.

    When the row has a multiple of four partials, they are stored four to a ``vec4<f32>``
    (``wsum[lid.x / 4][lid.x % 4]``) and read back as ``per_row / 4`` vector loads into one
    vector accumulator, summed ``(a.x + a.y) + (a.z + a.w)``: partial ``j`` goes to lane
    ``j % 4``: four independent chains of ``per_row / 4`` adds instead of one, a quarter of
    the workgroup loads, bit-identical to four scalar accumulators. Otherwise the partials are
    scalars added in one chain.

    Call at the top level of the entry point, with every invocation: the barrier must be
    uniform. Invocations past the end (the unguarded :func:`kvdsl.nodes.walks.vectors`) fill
    whole workgroup rows of their own, whose sums only they read.
    """
    sq = square(x)
    first = kb.lid.x - d
    if lanes_per_row % 4 or wg % 4:
        wsum = kb.workgroup_var("wsum", array(f32, wg))
        wsum[kb.lid.x] = sq
        kb.barrier()
        row = kb.let("rowFirst", first)
        ms = kb.var("ms", f32, 0.0)
        with kb.for_range("j", lit(0, u32), per_row, 1) as j:
            ms.set(ms + wsum[row + j])
        return ms
    wsum = kb.workgroup_var("wsum", array(vec(4, f32), wg // 4))
    wsum[kb.lid.x / 4, kb.lid.x % 4] = sq
    kb.barrier()
    row = kb.let("rowQuad", first / 4)
    acc = kb.var("acc", vec(4, f32), splat(vec(4, f32), 0.0))
    with kb.for_range("j", lit(0, u32), per_row / 4, 1) as j:
        acc.set(acc + wsum[row + j])
    return kb.let("ms", (acc.x + acc.y) + (acc.z + acc.w))


def subgroup_row_sum_of_squares(
    kb: KernelBuilder,
    x: Val | tuple[Val, ...],
    d: Val,
    per_row: Val,
    wg: int,
    fence: bool = False,
) -> Val:
    """:func:`row_sum_of_squares` across the subgroup: no barrier where a subgroup holds a row.

    A butterfly of ``subgroupShuffleXor`` over ``min(subgroup_size, per_row)`` lanes (masks 1, 2,
    4, ...) leaves every lane of an aligned run of that many invocations with the run's sum;
    where the subgroup is narrower than the row (a uniform branch: llvmpipe's are 8 wide,
    NVIDIA's 32), each lane writes that sum to ``wsum[lid.x]`` and, after a barrier, adds the
    row's runs from its first lane. Rows are aligned runs of ``per_row`` (a power of two)
    consecutive invocations and subgroups aligned runs of consecutive local indices (WGSL leaves
    that layout to the device; every device kvdsl runs on uses it, see :mod:`kvdsl.interp`).
    The sum's order differs from :func:`row_sum_of_squares`'s (a butterfly, not four
    accumulators): results may differ in the last ulps.

    ``fence`` (the drop-ins' block walk, which runs this once per step): the narrow branch ends
    with a second barrier, after every lane has read ``wsum``, so the next step may write it;
    the walk then adds no barrier of its own to each step, and a subgroup that holds the row
    passes none at all.
    """
    sg = kb.subgroup_size
    ms = kb.var("ms", f32, square(x))
    with kb.for_range("mask", lit(1, u32), min_(sg, per_row), 1, shift=True) as mask:
        ms.set(ms + shuffle_xor(ms, mask))
    with kb.if_(sg < per_row):
        wsum = kb.workgroup_var("wsum", array(f32, wg), fenced=fence)
        wsum[kb.lid.x] = ms
        kb.barrier()
        total = kb.var("total", f32, 0.0)
        with kb.for_range("j", lit(0, u32), per_row, sg) as j:
            total.set(total + wsum[kb.lid.x - d + j])
        ms.set(total)
        if fence:
            kb.comment("Every lane has read wsum: the next step may write it.")
            kb.barrier()
    return ms
