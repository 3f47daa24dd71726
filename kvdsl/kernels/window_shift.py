"""``window_shift``: a sliding-window cache step (past → a distinct present buffer).

Drop-in for the template's ``mode == "window_shift"`` branch. The cache keeps the most recent
``min(total, seq)`` tokens of each batch contiguous at rows ``[0, resident)``: surviving past rows
slide down by the eviction count, the new BSH K/V follow, rows past ``resident`` are zeroed
(:func:`kvdsl.nodes.window.sliding_window`). ``seq`` is the capacity of past and present. Walks:
``per_row``, one invocation per row (the template's only walk for this mode), and ``flat``
(:mod:`kvdsl.nodes.walks`: one invocation per present ``vec4``, ``count * HEAD_DIM_V4`` items,
each working out its batch's window from ``seqlens_k``; the rotary append on f16 data walks one
invocation per rotary pair, ``count * HALF_V4`` items, :func:`kvdsl.nodes.walks.pairs`).
Regions, i.e. which rows a pass owns:

- ``all``: every row; params ``count`` = batch × kvHeads × seq, ``seq``, ``keySeq``;
- ``shift``: every row but the appended ones (same params and dispatch); no new K/V bindings;
- ``append``: only the appended rows, one invocation per new token row (``count`` = batch ×
  kvHeads × keySeq); no past bindings.

``shift`` and ``append`` own disjoint rows, so two passes give the same present as ``all``.

``rotary`` NeoX-rotates appended K at its absolute position ``past + j`` (the retained rows were
rotated when they were appended), in ``append`` and in ``all`` alike; ``rotary_half`` (unset:
``head_dim / 2``) rotates only the first ``2 * half`` elements of a row, the rest pass through.
``append`` reads ``cos_cache`` / ``sin_cache`` (f32, ``HALF`` per position); ``all`` reads them
packed in one ``rotary_table`` (per position ``HALF`` cos values, then ``HALF`` sin values), so
that with past, new and present K/V it binds 8 storage buffers, WebGPU's default
``maxStorageBuffersPerShaderStage`` (two tables would make nine). ``shift`` writes no new K. The
template's ``append`` always rotates (and does not compile without ``hasRotary``: ``HALF`` is
declared only then), while its ``all`` never rotates, even with ``hasRotary``: its one- and
two-pass forms disagree for a rotary host. Here ``rotary`` means the same in every region that
appends, and ``append`` without it is the unrotated append.

``present_type`` is the element type of past and present, ``input_type`` that of the new K/V; kvdsl
converts on store (the template stores new K and its f32 rotary row unconverted).

``window`` (:class:`kvdsl.nodes.index.CacheWindow`, the flat walk): ``count`` is the window's rows,
past and present are bound from slice ``headBase`` on (rows slide within their slice, so a
window of whole slices holds every row a pass moves), new K/V from batch ``batchBase`` on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvdsl.ir import Kernel, KernelBuilder, Val, largest, with_contract
from kvdsl.kernels.config import (
    CacheConfig,
    Element,
    FLOATS,
    ROTARY_TABLE,
    ROTARY_TABLES,
    ShiftRegion,
    Walk,
    builds,
    choice,
    require,
    require_rotary,
)
from kvdsl.kernels.extents import ceil_div, emax, plus, times

from kvdsl.kernels.merge import MovedTypes, moved_rows
from kvdsl.kernels.rows import seqlens_extent, source_batches
from kvdsl.kernels.plan import RotaryWalk, WalkPlan
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import split_rows
from kvdsl.nodes.rotary import Rotation, move_new
from kvdsl.nodes.window import sliding_window

WALKS = (Walk.PER_ROW, Walk.FLAT)
ROTARY_REGIONS = "false for region 'shift' (it writes no new K)"


@dataclass(frozen=True)
class WindowShiftConfig(MovedTypes, RotaryWalk, CacheConfig):
    """A window_shift pass: which rows it owns, rotary of appended K and element types;
    ``pairs``: one invocation per rotary pair (:attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs`)."""

    region: ShiftRegion = choice(ShiftRegion.ALL)
    rotary: bool = False
    present_type: Element = choice(Element.F32, FLOATS)
    input_type: Element = choice(Element.F32, FLOATS)
    walk: Walk = choice(Walk.PER_ROW, WALKS)
    pairs: bool | None = None
    rotary_half: int | None = None
    mode = "window_shift"

    def check_fields(self) -> None:
        appends = self.region is not ShiftRegion.SHIFT
        require_rotary(self.rotary, self.head_dim, appends, ROTARY_REGIONS, self.rotary_half)
        self.check_moved()

    def check_schedule(self) -> None:
        super().check_schedule()
        if self.pairs:
            require(
                self.region is ShiftRegion.APPEND,
                "pairs",
                self.pairs,
                "None or False unless region='append' (the pair walk appends rotary pairs;"
                " 'all' and 'shift' move every vector of a row alike)",
            )

    @property
    def plan(self) -> WalkPlan:
        """The walk of the kernel: by default the pair walk only where the pass only appends."""
        plan = super().plan
        if self.region is not ShiftRegion.APPEND and self.pairs is None:
            return dataclasses.replace(plan, pairs=False)
        return plan


@builds(WindowShiftConfig)
def window_shift(cfg: WindowShiftConfig, name: str = "window_shift") -> Kernel:
    """Build the window_shift pass for ``cfg`` (the flat rotary append walks rotary pairs where
    :attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs` says)."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    plan = cfg.plan
    pairs = plan.uses_pairs
    region = cfg.region
    past, new = region is not ShiftRegion.APPEND, region is not ShiftRegion.SHIFT
    # Only the types of the bindings the region declares decide whether f16 moves as words.
    types = (cfg.present_type, cfg.input_type) if new else (cfg.present_type,)
    width = words.width(cfg.head_dim, types, cfg.rotary, cfg.half)
    # 'all' with rotary binds cos and sin as one packed table: 8 storage buffers in all.
    packed = cfg.rotary and region is ShiftRegion.ALL
    m = moved_rows(kb, cfg, width, past, new, rotary=cfg.rotary, packed=packed)
    present_key, present_value = m.present
    head_dim, heads, hidden, half, win, hd4 = m.head_dim, m.heads, m.hidden, m.half, m.win, m.hd4
    rows, seq, key_seq = m.params
    it = plan.items(kb, rows, hd4, width, m.half4)

    def append_vec(b: Val, hk: Val, j: Val, dst: Val, pos: Val) -> None:
        n_src = kb.let("nSrc", (win.batch(b) * key_seq + j) * m.hidden4 + hk * hd4)
        rot = Rotation(m.cos, m.sin, pos, m.half4, cfg.partial, packed) if cfg.rotary else None
        if rot is not None:
            kb.comment("Appended K is rotated at its absolute position; retained keys already are.")
        move_new(kb, *m.new, n_src, it.d, rot, *m.present, dst, pairs)

    if region is ShiftRegion.APPEND:
        kb.comment("Append-only pass: the vectors of the new token rows; `seq` stays the capacity.")
        b, hk, j = split_rows(kb, win.row(kb, it.row, key_seq), heads, key_seq, "j")
        w = sliding_window(kb, m.seqlens_k, b, seq, key_seq)
        kb.comment("New tokens before `skip` do not fit the window (keySeq > seq).")
        kb.leave_if(j < w.skip)
        t = kb.let("t", w.append_start + (j - w.skip))
        dst = kb.let("dst", win.bnsh(b, hk, t, heads, seq, hd4) + it.d)
        append_vec(b, hk, j, dst, kb.let("pos", w.past + j))
    else:
        b, hk, t = split_rows(kb, win.row(kb, it.row, seq), heads, seq)
        w = sliding_window(kb, m.seqlens_k, b, seq, key_seq)
        with kb.if_(t < w.append_start):
            kb.comment("Surviving past rows slide down by the eviction count.")
            src = kb.let("src", win.bnsh(b, hk, t + w.evicted, heads, seq, hd4) + it.d)
            present_key[it.e] = m.past[0][src]
            present_value[it.e] = m.past[1][src]
        if region is ShiftRegion.ALL:
            with kb.elif_(t < w.resident):
                j = kb.let("j", t - w.append_start + w.skip)
                append_vec(b, hk, j, it.e, kb.let("pos", w.past + j))
            zero_guard = kb.else_()
        else:
            zero_guard = kb.elif_(t >= w.resident)
        with zero_guard:
            kb.comment("Outside the resident window: cleared, not left stale.")
            present_key[it.e] = words.zero(m.cache)
            present_value[it.e] = words.zero(m.cache)
    dispatch = plan.row_dispatch(kb, rows, width)
    doc = (
        "Windowed cache: compact the surviving past rows down by the eviction count and\n"
        "append the new BSH K/V, keeping the most recent min(T, capacity) tokens\n"
        "contiguous at rows [0, L). Reads past, writes present (distinct buffers)."
    )
    kernel = kb.build(dispatch, doc)
    per_batch = key_seq if region is ShiftRegion.APPEND else seq
    batches = seqlens_extent(rows, heads, per_batch, win)
    extents = {"seqlens_k": batches}
    if region is ShiftRegion.APPEND and cfg.window:
        present = times(ceil_div(rows, key_seq), seq, head_dim)
    elif region is ShiftRegion.APPEND:
        present = times(batches, heads, seq, head_dim)
    else:
        present = times(rows, head_dim)
        past = times(ceil_div(rows, seq), seq, head_dim)
        extents |= {"past_k": past, "past_v": past}
    if new:
        news = times(source_batches(rows, cfg.kv_heads, per_batch, win), key_seq, hidden)
        extents |= {"new_k": news, "new_v": news}
    if cfg.rotary:
        # New token j sits at position max(keySeq, seqlens_k[b] + 1) - keySeq + j.
        positions = emax(key_seq, plus(largest("seqlens_k"), 1))
        if packed:
            extents[ROTARY_TABLE] = times(positions, half, 2)
        else:
            extents |= {t: times(positions, half) for t in ROTARY_TABLES}
    extents |= {"present_key": present, "present_value": present}
    divisor = "keySeq" if region is ShiftRegion.APPEND else "seq"
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return walks.vector_extents(with_contract(kernel, extents, {f"{divisor} >= 1": per_batch >= 1}))
