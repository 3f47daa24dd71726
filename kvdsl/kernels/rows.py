"""The row program of the modes that write new BSH K/V rows one token-head row at a time
(``build``, ``build_quant``, ``append_quant``; ``paged_append`` takes its flat K): its config
fields (:class:`RowConfig`), inputs and consts, and its two walks.

The per-row walk (:func:`row_walk`, :func:`k_row`) loads K into ``var k: array<f32, HEAD_DIM>``,
applies ``k' = k * inverseSqrt(mean(k²) + eps) * weight`` and then the rotation at the row's
position (:mod:`kvdsl.nodes.rmsnorm`, :mod:`kvdsl.nodes.rotary`). The flat walk
(:func:`flat_row`, :func:`flat_k_loads`, :func:`flat_k`; one invocation per vector, or per pair
of vectors ``(dr, dr + HALF_V4)`` on the pair walk) computes the same products in the same order
for the vectors an invocation holds; its K RMSNorm reduces each row's sum of squares in
workgroup memory (:func:`flat_norm`), so the sum is of per-vector ``dot`` partials and may
differ from the per-row sum in the last ulps. With a partial rotary (``rotary_half``) the
elements past ``2 * rotary_half`` pass through, normed.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from typing import Any, Callable

from kvdsl.ir import Buffer, KernelBuilder, Local, Val, array, convert, f32, i32, select, u32
from kvdsl.kernels.config import (
    FLOATS,
    KNORM_WORKGROUP,
    ROTARY_TABLE,
    ROTARY_TABLES,
    CacheConfig,
    Element,
    Reduction,
    RotaryHalf,
    Walk,
    choice,
    require,
    require_rotary,
    require_rotary_vectors,
    require_window,
    walk_workgroup,
)
from kvdsl.kernels.extents import ceil_div, plus, times, window_batches

from kvdsl.kernels.plan import RotaryWalk, WalkPlan, require_whole_rows
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import CacheWindow, bsh, cache_window, split_rows
from kvdsl.nodes.rmsnorm import (
    inverse_rms,
    normed,
    rms_norm_row,
    row_sum_of_squares,
    subgroup_row_sum_of_squares,
)
from kvdsl.nodes.rotary import Rotation, pair_entry, rotate, rotate_pair, rotate_row, rotated_pair

WALKS = (Walk.PER_ROW, Walk.FLAT)


@dataclass(frozen=True)
class Transforms(RotaryHalf):
    """The fields of a writer that transforms new K rows (a mixin of its config): K RMSNorm
    (``k_norm``, its ``eps``), NeoX rotary (``rotary``: the first ``2 * rotary_half`` elements
    of a row, or the whole head) and the new rows' ``input_type``."""

    _: KW_ONLY
    k_norm: bool = False
    rotary: bool = False
    rotary_half: int | None = None
    eps: float = 1e-6
    input_type: Element = choice(Element.F32, FLOATS)

    def check_transforms(self, vectors: bool = True, norm: bool = True) -> None:
        """The transforms' checks: ``vectors``, a walk of ``vec4`` values
        (:func:`require_rotary_vectors`); ``norm``, the kernel has a norm whose ``eps`` must be
        a normal f32 (false: ``eps`` is checked only with ``k_norm``)."""
        require_rotary(self.rotary, self.head_dim, half=self.rotary_half)
        if vectors:
            require_rotary_vectors(self.rotary, self.head_dim, self.rotary_half, self.mode)
        if norm or self.k_norm:
            require_eps(self.eps)


def require_eps(eps: Any) -> None:
    """K RMSNorm's epsilon: a number > 0 that stays a normal f32 (``QK_EPS`` is an f32 const)."""
    ok = isinstance(eps, (int, float)) and not isinstance(eps, bool)
    ok = ok and math.isfinite(eps) and 2.0**-126 <= eps <= 3.4e38
    require(ok, "eps", eps, "a number > 0 that is a normal f32 (1.2e-38 .. 3.4e38)")


@dataclass(frozen=True)
class RowConfig(Transforms, RotaryWalk, CacheConfig):
    """The fields of the modes that run the row program (``build``, the quantising modes): K
    RMSNorm and rotary switches, the input type (:class:`~kvdsl.kernels.config.Transforms`),
    the walk, the row reduction and ``pairs`` (one invocation per pair of vectors,
    :attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs`)."""

    _: KW_ONLY
    walk: Walk = choice(Walk.PER_ROW, WALKS)
    reduction: Reduction = choice(Reduction.WORKGROUP)
    pairs: bool | None = None

    def check_fields(self) -> None:
        self.check_transforms(vectors=False)
        require_window(self.window, self.walk)

    def check_schedule(self) -> None:
        # The vectors of a row.
        per_row = self.head_dim // walks.lanes(self.head_dim, self.rotary, self.half)
        if self.walk is Walk.FLAT and self.k_norm:
            what = "vectors of a row for the flat walk with k_norm"
            require_whole_rows(self.workgroup_size, per_row, what)
        if self.reduction is Reduction.SUBGROUP:
            require(
                self.k_norm and self.plan.program,
                "reduction",
                self.reduction,
                "'workgroup' unless k_norm=True (the only row reduction) on the flat walk or on"
                " a template walk whose kernel runs in blocks",
            )
            # Subgroups are powers of two: a row of a power-of-two vectors lies in one, or spans
            # whole ones.
            require(
                per_row & (per_row - 1) == 0,
                "head_dim",
                self.head_dim,
                "a power-of-two number of vectors per row for reduction='subgroup'"
                f" (has {per_row})",
            )
        super().check_schedule()  # pairs

    def default_workgroup_size(self) -> int:
        barrier = self.k_norm and self.reduction is Reduction.WORKGROUP
        if self.walk is Walk.FLAT and barrier:
            return KNORM_WORKGROUP
        return walk_workgroup(self.walk)

    @property
    def int4(self) -> bool:
        """Whether the rows are stored as packed int4."""
        return False

    @property
    def plan(self) -> WalkPlan:
        """The walk of the kernel."""
        return self.walk_plan(k_norm=self.k_norm, reduction=self.reduction, int4=self.int4)


@dataclass(frozen=True)
class RowInputs:
    """The bindings and consts the row program reads (``None`` where a transform is off);
    with ``packed_table`` cos and sin are one binding, ``rotary_table``; ``layout``, the
    bindings a layout declared among them (:func:`declare_inputs`)."""

    src_k: Buffer
    src_v: Buffer
    seqlens_k: Buffer | None
    k_norm_weight: Buffer | None
    cos_cache: Buffer | None
    sin_cache: Buffer | None
    packed_table: bool = False
    layout: Any = None

    def rotation(self, pos: Val, half: Val, partial: bool = False) -> Rotation:
        """The rotation at ``pos`` through these rotary tables (``partial``: the row's elements
        past ``2 * half`` pass through)."""
        return Rotation(self.cos_cache, self.sin_cache, pos, half, partial, self.packed_table)


def declare_inputs(
    kb: KernelBuilder,
    cfg: Transforms,
    seqlens_k: bool = False,
    width: int = 1,
    packed_table: bool = False,
    between: Callable[[], Any] | None = None,
) -> RowInputs:
    """Declare the inputs in the template's order: ``src_k``, ``src_v``, ``seqlens_k`` (when
    asked) or the bindings ``between()`` declares (a layout's: ``paged_append``'s addressing,
    kept as :attr:`RowInputs.layout`), then as ``cfg`` needs them the K-norm weight and the
    rotary caches (one ``rotary_table`` with ``packed_table``); ``width`` > 1 makes the float
    inputs vectors (the flat walk)."""
    src_k, src_v = words.bindings(kb, ("src_k", "src_v"), cfg.input_type.scalar, width)
    seqlens = kb.binding("seqlens_k", i32, "read") if seqlens_k else None
    layout = None if between is None else between()
    weight = words.binding(kb, "k_norm_weight", f32, width) if cfg.k_norm else None
    cos = sin = None
    if cfg.rotary and packed_table:
        cos = sin = words.binding(kb, ROTARY_TABLE, f32, width)
    elif cfg.rotary:
        cos, sin = words.bindings(kb, ROTARY_TABLES, f32, width)
    return RowInputs(src_k, src_v, seqlens, weight, cos, sin, cfg.rotary and packed_table, layout)


@dataclass(frozen=True)
class Consts:
    """The module consts of the row program (``None`` where the config needs none)."""

    head_dim_value: int
    head_dim: Val
    heads: Val
    hidden: Val
    packed: Val | None
    half: Val | None
    eps: Val | None


def declare_consts(kb: KernelBuilder, cfg: RowConfig, packed: int | None = None) -> Consts:
    """``HEAD_DIM``, ``KV_HEADS``, ``WG``, ``KV_HIDDEN``, ``PACKED``, ``HALF``, ``QK_EPS``.

    In the template's order; ``PACKED`` (stored words per row) only when given, ``HALF`` with
    rotary, ``QK_EPS`` with K RMSNorm.
    """
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.workgroup_const("WG")
    hidden = kb.const("KV_HIDDEN", u32, cfg.hidden)
    words = None if packed is None else kb.const("PACKED", u32, packed)
    half = kb.const("HALF", u32, cfg.half) if cfg.rotary else None
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.k_norm else None
    return Consts(cfg.head_dim, head_dim, heads, hidden, words, half, eps)


def declare_params(kb: KernelBuilder, *names: str) -> tuple[Val, ...]:
    """The params fields, all u32, declared in the template's order (used or not, so the uniform
    has the template's layout)."""
    return tuple(kb.param(n) for n in names)


@dataclass(frozen=True)
class Row:
    """One invocation's row: new token ``t`` of batch ``b``, kv head ``hk``, at ``srcBase``."""

    b: Val
    hk: Val
    t: Val
    src_base: Val


def row_walk(kb: KernelBuilder, fold: int, c: Consts) -> Row:
    """The per-row walk over ``params.count`` rows of ``params.seq`` new tokens each."""
    count, seq = kb.param("count"), kb.param("seq")
    i = walks.per_row(kb, fold, count)
    b, hk, t = split_rows(kb, i, c.heads, seq)
    src_base = kb.let("srcBase", bsh(b, t, hk, seq, c.hidden, c.head_dim))
    return Row(b, hk, t, src_base)


def k_row(
    kb: KernelBuilder, c: Consts, inputs: RowInputs, src_base: Val, position: Callable[[], Val]
) -> Local:
    """``var k: array<f32, HEAD_DIM>`` loaded from ``src_k``, then normed and rotated.

    The transforms are those whose consts ``c`` holds; ``position`` makes the rotary position (it
    may declare lets).
    """
    k = kb.var("k", array(f32, c.head_dim_value))
    with walks.row_elements(kb, c.head_dim) as d:
        k[d] = convert(f32, inputs.src_k[src_base + d])
    if c.eps is not None:
        rms_norm_row(kb, k, inputs.k_norm_weight, c.head_dim, c.eps)
    if c.half is not None:
        rotate_row(kb, k, inputs.rotation(position(), c.half))
    return k


@dataclass(frozen=True)
class FlatRow:
    """One flat invocation's vector (or, on the pair walk, its pair ``it.d``, ``it.d + pair``):
    walk item, row coordinates and vector consts (``half``: rotary's; ``pair``: the pair walk's
    offset, ``HALF_V4``); with K RMSNorm, the items' bound and K as loaded (f32 lanes: ``kOwn``,
    or the pair's ``x0Raw`` and ``k_hi``, ``x1Raw``); ``partial``: rotary turns only the first
    ``2 * half`` elements of a row (:attr:`kvdsl.nodes.rotary.Rotation.partial`); ``win``, the
    bound ranges' window."""

    it: walks.Item
    b: Val
    hk: Val
    t: Val
    src_base: Val
    per_row: Val
    half: Val | None
    items: Val | None
    k_own: Val | None
    pair: Val | None = None
    k_hi: Val | None = None
    partial: bool = False
    win: CacheWindow = CacheWindow()

    def own(self) -> Val | tuple[Val, Val]:
        """K as the row reduction takes it: the vector, or the pair."""
        return self.k_own if self.k_hi is None else (self.k_own, self.k_hi)


def flat_row(
    kb: KernelBuilder, cfg: RowConfig, c: Consts, inputs: RowInputs, width: int, pairs: bool = False
) -> FlatRow:
    """The flat walk over ``params.count`` rows of ``params.seq`` new tokens each; with
    ``pairs`` the pair walk, ``it.d`` the pair's first vector, ``it.d + HALF_V4`` its second
    (:func:`kvdsl.nodes.walks.pairs`; ``HALF`` is declared here when rotary has not).

    With K RMSNorm the walk cannot return before the row reduction's barrier: it clamps the row
    (:func:`kvdsl.nodes.walks.vectors`), loads this vector of K at once, and the kernel issues every
    other load it needs before calling :func:`flat_norm`, which reduces and returns the
    invocations past the end. One memory round trip then precedes the barrier and none follows
    it.
    """
    count, seq = kb.param("count"), kb.param("seq")
    win = cache_window(kb, cfg.window)
    per_row = walks.vector_const(kb, c.head_dim, cfg.head_dim, width)
    hidden = walks.vector_const(kb, c.hidden, cfg.hidden, width)
    half = walks.vector_const(kb, c.half, cfg.half, width) if c.half is not None else None
    norm = c.eps is not None
    pair = None
    if pairs:
        pair = half
        if pair is None:  # K RMSNorm without rotary: the pair is the row's two halves
            whole = kb.const("HALF", u32, cfg.head_dim // 2)
            pair = walks.vector_const(kb, whole, cfg.head_dim // 2, width)
        it = cfg.plan.pair_items(kb, count, pair, guard=not norm)
    else:
        it = cfg.plan.vectors(kb, count, per_row, width, guard=not norm)
    b, hk, t = split_rows(kb, win.row(kb, it.row, seq), c.heads, seq)
    src_base = kb.let("srcBase", win.bsh(b, t, hk, seq, hidden, per_row))
    items = k_own = k_hi = None
    if norm:
        # The bound past which invocations leave after the norm: the block walk's own.
        per_item = pair if pair is not None else per_row
        items = it.end if it.end is not None else kb.let("items", count * per_item)
    if norm and pair is not None:
        k_own = kb.let("x0Raw", words.as_f32(kb, inputs.src_k[src_base + it.d]))
        k_hi = kb.let("x1Raw", words.as_f32(kb, inputs.src_k[src_base + (it.d + pair)]))
    elif norm:
        k_own = kb.let("kOwn", words.as_f32(kb, inputs.src_k[src_base + it.d]))
    return FlatRow(
        it, b, hk, t, src_base, per_row, half, items, k_own, pair, k_hi, cfg.partial, win
    )


def flat_norm(
    kb: KernelBuilder, cfg: RowConfig, c: Consts, row: FlatRow, skipped: Val | None = None
) -> Val:
    """``invRms`` of the row (the barrier), then invocations past the end, or ``skipped``,
    return. Call after every load the invocation needs (:func:`flat_k_loads`)."""
    lanes = cfg.head_dim // walks.lanes(cfg.head_dim, cfg.rotary, cfg.half)
    per_row = row.per_row
    if row.pair is not None:  # one invocation per pair: half the partials
        lanes, per_row = lanes // 2, row.pair
    if cfg.reduction is Reduction.SUBGROUP:
        kb.comment(
            "K RMSNorm: the row's sum of squares, reduced across the subgroup (through\n"
            "workgroup memory only where a subgroup is narrower than a row)."
        )
        ms = subgroup_row_sum_of_squares(
            kb, row.own(), row.it.d, per_row, kb.workgroup_size[0], fence=cfg.plan.blocks
        )
    else:
        kb.comment("K RMSNorm: the row's sum of squares, reduced in workgroup memory.")
        ms = row_sum_of_squares(kb, row.own(), row.it.d, per_row, kb.workgroup_size[0], lanes)
    inv_rms = inverse_rms(kb, ms, c.head_dim, c.eps)
    done = row.it.e >= row.items
    kb.leave_if(done if skipped is None else done.lor(skipped))
    return inv_rms


@dataclass(frozen=True)
class KLoads:
    """K's vector, or with K RMSNorm what it needs loaded before the norm: the vectors ``x0`` /
    ``x1`` of the rotary pair (``x0`` alone without rotary), their norm weights and cos/sin;
    with partial rotary the norm weight ``w`` of the vector itself (kept where it lies past the
    rotated part)."""

    k: Val | None
    x0: Val | None = None
    x1: Val | None = None
    w0: Val | None = None
    w1: Val | None = None
    cs: Val | None = None
    sn: Val | None = None
    w: Val | None = None


def flat_k_loads(
    kb: KernelBuilder, row: FlatRow, inputs: RowInputs, position: Callable[[], Val]
) -> KLoads:
    """This invocation's vector of K in f32 lanes, rotated as the row program does; with K
    RMSNorm only its loads (:func:`flat_k` finishes it after :func:`flat_norm`).

    With rotary the vector's partner is the one load besides ``kOwn``: the pair is
    ``(select(partner, own, d < half), select(own, partner, d < half))``. On the pair walk
    the pair is loaded as such (:func:`flat_row`, or here without K RMSNorm), with its norm
    weights and one cos/sin entry.
    """
    d = row.it.d

    def rotation() -> Rotation:
        return inputs.rotation(position(), row.half, row.partial)

    if row.pair is not None:
        if row.k_own is None:
            x0 = kb.let("x0", words.as_f32(kb, inputs.src_k[row.src_base + d]))
            x1 = kb.let("x1", words.as_f32(kb, inputs.src_k[row.src_base + (d + row.pair)]))
            w0 = w1 = None
        else:
            x0, x1 = row.k_own, row.k_hi
            w0 = kb.let("w0", words.as_f32(kb, inputs.k_norm_weight[d]))
            w1 = kb.let("w1", words.as_f32(kb, inputs.k_norm_weight[d + row.pair]))
        cs = sn = None
        if row.half is not None:
            cs, sn = rotation().entry(kb, d)
        return KLoads(None, x0, x1, w0, w1, cs, sn)
    if row.k_own is None:
        if row.half is None:
            return KLoads(kb.let("k", words.as_f32(kb, inputs.src_k[row.src_base + d])))
        rotated = rotate(kb, inputs.src_k, row.src_base, d, rotation())
        return KLoads(kb.let("k", rotated))
    weight = inputs.k_norm_weight
    if row.half is None:
        return KLoads(None, row.k_own, w0=kb.let("kW", words.as_f32(kb, weight[d])))
    half, low = row.half, d < row.half
    dr, cs, sn = pair_entry(kb, d, rotation())
    partner = kb.let(
        "kPair", words.as_f32(kb, inputs.src_k[row.src_base + select(dr, dr + half, low)])
    )
    x0 = kb.let("x0Raw", select(partner, row.k_own, low))
    x1 = kb.let("x1Raw", select(row.k_own, partner, low))
    w0 = kb.let("w0", words.as_f32(kb, weight[dr]))
    w1 = kb.let("w1", words.as_f32(kb, weight[dr + half]))
    w = kb.let("kW", words.as_f32(kb, weight[d])) if row.partial else None
    return KLoads(None, x0, x1, w0, w1, cs, sn, w)


def flat_k_pair(
    kb: KernelBuilder, row: FlatRow, loads: KLoads, inv_rms: Val | None
) -> tuple[Val, Val]:
    """The pair walk's two vectors of K (at ``it.d`` and ``it.d + pair``) from
    :func:`flat_k_loads`: each ``x * invRms * weight`` with K RMSNorm, then rotated as
    :func:`kvdsl.nodes.rotary.move_rotated_pair` does (``x0*cs - x1*sn``, ``x1*cs + x0*sn``):
    per element the products of :func:`flat_k`."""
    x0, x1 = loads.x0, loads.x1
    if inv_rms is not None:
        x0 = kb.let("x0", normed(x0, inv_rms, loads.w0))
        x1 = kb.let("x1", normed(x1, inv_rms, loads.w1))
    if row.half is None:
        return x0, x1
    return rotated_pair(x0, x1, loads.cs, loads.sn)


def flat_k(kb: KernelBuilder, row: FlatRow, loads: KLoads, inv_rms: Val | None) -> Val:
    """K's vector from :func:`flat_k_loads` (and ``invRms`` with K RMSNorm): the same products
    in the same order as the per-row program, ``x * invRms * weight`` then the rotation."""
    if loads.k is not None:
        return loads.k
    if row.half is None:
        return kb.let("k", normed(loads.x0, inv_rms, loads.w0))
    x0 = kb.let("x0", normed(loads.x0, inv_rms, loads.w0))
    x1 = kb.let("x1", normed(loads.x1, inv_rms, loads.w1))
    rotated = rotate_pair(x0, x1, loads.cs, loads.sn, row.it.d, row.half)
    if not row.partial:
        return kb.let("k", rotated)
    kb.comment("Past the rotated part K passes through, normed.")
    own = kb.let("kNormed", normed(row.k_own, inv_rms, loads.w))
    return kb.let("k", select(own, rotated, row.it.d < row.half * 2))


def source_batches(rows: Val, heads: int | Val, per_slice: Val, win: CacheWindow) -> Any:
    """The batches of a BSH source that ``rows`` cache rows of ``per_slice`` per slice read: in
    a window, from its first batch (``batchBase``) on."""
    if win.head_base is None:
        return ceil_div(rows, heads * per_slice)
    return window_batches(rows, heads, per_slice, win.head_base, win.batch_base)


def seqlens_extent(rows: Val, heads: int | Val, per_slice: Val, win: CacheWindow) -> Any:
    """``seqlens_k``'s least size for ``rows`` cache rows of ``per_slice`` per slice: their
    batches, up to a window's last (``seqlens_k`` is bound whole)."""
    if win.head_base is None:
        return ceil_div(rows, heads * per_slice)
    return ceil_div(plus(times(win.head_base, per_slice), rows), heads * per_slice)


def row_extents(
    cfg: Transforms,
    count: Val,
    seq: Val,
    positions: Any,
    win: CacheWindow = CacheWindow(),
    between: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The least sizes of the row program's inputs, in :func:`declare_inputs`' order:
    ``src_k``/``src_v`` for ``count`` rows of ``seq`` tokens per batch (from batch ``batchBase``
    on in a window), the bindings declared after them (``between``: ``seqlens_k``, a layout's),
    the K-norm weight, and ``positions`` rotary positions."""
    src = times(source_batches(count, cfg.kv_heads, seq, win), seq, cfg.kv_heads * cfg.head_dim)
    out: dict[str, Any] = {"src_k": src, "src_v": src}
    out |= between or {}
    if cfg.k_norm:
        out["k_norm_weight"] = cfg.head_dim
    if cfg.rotary:
        out |= {"cos_cache": times(positions, cfg.half)}
        out |= {"sin_cache": times(positions, cfg.half)}
    return out
