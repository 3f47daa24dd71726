"""``merge_share``: append into a buffer-sharing BNSH cache (past and present share the capacity).

Drop-in for the template's ``mode == "merge_share"`` branches. Past and present both have ``seq``
(the full capacity) rows per head. Batch ``b``'s new tokens land at rows ``[appendStart,
activeEnd)`` (:func:`kvdsl.nodes.window.append_window`). Two passes own disjoint rows, so their
order is immaterial:

- ``region="retain"``: every row outside the window is an identity copy ``present[e] = past[e]``;
  params ``count`` = batch × kvHeads × seq, ``seq``, ``keySeq``; bindings ``past_k``, ``past_v``,
  ``seqlens_k``, ``present_key``, ``present_value``.
- ``region="append"``: the window's rows come from ``new_k`` / ``new_v`` (BSH), K optionally
  NeoX-rotated at its row (= absolute position; ``rotary``, bindings ``cos_cache`` /
  ``sin_cache`` of ``seq * HALF`` f32); params ``count`` = batch × kvHeads × keySeq, ``seq``,
  ``keySeq``.

Walks (:mod:`kvdsl.nodes.walks`, both passes): ``flat``, one invocation per present ``vec4``,
``count * HEAD_DIM_V4`` items (rotary loads its partner vector and a cos/sin ``vec4``; rotary on
f16 data walks one invocation per rotary pair, ``count * HALF_V4`` items,
:func:`kvdsl.nodes.walks.pairs`), and the template's ``cooperative`` (off Apple),
``per_row`` (Apple's retain pass) and ``hybrid`` (Apple's append pass), whose dispatch the block
walk keeps.

``present_type`` is the element type of past and present, ``input_type`` that of the new K/V. The
template converts neither: its per-row rotary stores an f32 row into the cache and its
cooperative rotary multiplies raw new K by f32 cos/sin. kvdsl computes rotary in f32 and
converts on store.

``window`` (:class:`kvdsl.nodes.index.CacheWindow`, the flat walk): ``count`` is the window's rows
(slices × ``seq`` for retain, slices × ``keySeq`` for append), past and present are bound from
slice ``headBase`` on, new K/V from batch ``batchBase`` on; ``seqlens_k`` and the rotary tables
are bound whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Kernel, KernelBuilder, with_contract
from kvdsl.kernels.config import (
    COPY_WALKS,
    CacheConfig,
    Element,
    FLOATS,
    ShareRegion,
    Walk,
    builds,
    choice,
    one_of,
    require_rotary,
)
from kvdsl.kernels.extents import ceil_div, times

from kvdsl.kernels.merge import MovedRows, MovedTypes, moved_rows
from kvdsl.kernels.rows import seqlens_extent, source_batches
from kvdsl.kernels.plan import RotaryWalk
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import split_rows
from kvdsl.nodes.rotary import Rotation, move_new
from kvdsl.nodes.window import append_window

WALKS = (Walk.COOPERATIVE, Walk.PER_ROW, Walk.HYBRID, Walk.FLAT)


@dataclass(frozen=True)
class MergeShareConfig(MovedTypes, RotaryWalk, CacheConfig):
    """A merge_share pass: which rows it owns, the walk, rotary and element types; ``pairs``:
    one invocation per rotary pair (:attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs`)."""

    region: ShareRegion = choice(ShareRegion.APPEND)
    walk: Walk = choice(Walk.COOPERATIVE, WALKS)
    rotary: bool = False
    present_type: Element = choice(Element.F32, FLOATS)
    input_type: Element = choice(Element.F32, FLOATS)
    pairs: bool | None = None
    rotary_half: int | None = None
    mode = "merge_share"

    def check_fields(self) -> None:
        append = self.region is ShareRegion.APPEND
        one_of("walk", self.walk, WALKS if append else COPY_WALKS)
        require_rotary(
            self.rotary, self.head_dim, append, "false for region 'retain'", self.rotary_half
        )
        self.check_moved()

    @property
    def width(self) -> int:
        """The walk's vector width (f16 moved as words: :func:`kvdsl.nodes.words.width`)."""
        retain = self.region is ShareRegion.RETAIN
        types = (self.present_type,) if retain else (self.present_type, self.input_type)
        return words.width(self.head_dim, types, self.rotary, self.half)


@builds(MergeShareConfig)
def merge_share(cfg: MergeShareConfig, name: str = "merge_share") -> Kernel:
    """Build the merge_share pass for ``cfg`` (the flat rotary append walks rotary pairs where
    :attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs` says)."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    plan = cfg.plan
    pairs = plan.uses_pairs
    if cfg.region is ShareRegion.RETAIN:
        m = _retain(kb, cfg)
        doc = (
            "Buffer-sharing append, retain pass: rows outside each batch's append window\n"
            "are an identity copy of the past cache (dst index == src index)."
        )
    else:
        m = _append(kb, cfg, pairs)
        doc = (
            "Buffer-sharing append, append pass: the rows of each batch's append window come\n"
            "from the new BSH K/V"
            + (", K rotated at its absolute position." if cfg.rotary else ".")
        )
    (rows, seq, key_seq), win = m.params, m.win
    kernel = kb.build(plan.row_dispatch(kb, rows, cfg.width), doc)
    heads, head_dim = cfg.kv_heads, cfg.head_dim
    if cfg.region is ShareRegion.RETAIN:
        cache = times(rows, head_dim)
        batches = seqlens_extent(rows, heads, seq, win)
        extents = {"past_k": cache, "past_v": cache, "seqlens_k": batches}
        requires = {"seq >= 1": seq >= 1}
    else:
        batches = seqlens_extent(rows, heads, key_seq, win)
        new = times(source_batches(rows, heads, key_seq, win), key_seq, heads * head_dim)
        cache = times(batches, heads, seq, head_dim)
        if cfg.window:
            cache = times(ceil_div(rows, key_seq), seq, head_dim)
        extents = {"new_k": new, "new_v": new, "seqlens_k": batches}
        if cfg.rotary:
            rot = times(seq, cfg.half)
            extents |= {"cos_cache": rot, "sin_cache": rot}
        requires = {"keySeq >= 1": key_seq >= 1}
    extents |= {"present_key": cache, "present_value": cache}
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return walks.vector_extents(with_contract(kernel, extents, requires))


def _retain(kb: KernelBuilder, cfg: MergeShareConfig) -> MovedRows:
    m = moved_rows(kb, cfg, cfg.width, past=True, new=False)
    (past_k, past_v), (present_key, present_value) = m.past, m.present
    rows, seq, key_seq = m.params
    it = cfg.plan.vectors(kb, rows, m.hd4, cfg.width)
    row = m.win.row(kb, it.row, seq)
    t = kb.let("t", row % seq)
    b = kb.let("b", row / (seq * m.heads))
    w = append_window(kb, m.seqlens_k, b, seq, key_seq)
    kb.comment("Outside the append window; the shared stride makes this dst == src.")
    with kb.if_((t < w.append_start).lor(t >= w.active_end)):
        present_key[it.e] = past_k[it.e]
        present_value[it.e] = past_v[it.e]
    return m


def _append(kb: KernelBuilder, cfg: MergeShareConfig, pairs: bool) -> MovedRows:
    m = moved_rows(kb, cfg, cfg.width, past=False, new=True, rotary=cfg.rotary)
    rows, seq, key_seq = m.params
    win, heads, hd4 = m.win, m.heads, m.hd4
    it = cfg.plan.items(kb, rows, hd4, cfg.width, m.half4)
    # New row -> its cache row t in the append window.
    b, hk, j = split_rows(kb, win.row(kb, it.row, key_seq), heads, key_seq, "j")
    w = append_window(kb, m.seqlens_k, b, seq, key_seq)
    kb.comment("New tokens before `skip` do not fit the cache (keySeq > seq).")
    kb.leave_if(j < w.skip)
    t = kb.let("t", w.append_start + (j - w.skip))
    dst = kb.let("dst", win.bnsh(b, hk, t, heads, seq, hd4) + it.d)
    n_src = kb.let("nSrc", (win.batch(b) * key_seq + j) * m.hidden4 + hk * hd4)
    rot = Rotation(m.cos, m.sin, t, m.half4, cfg.partial) if cfg.rotary else None
    if rot is not None:
        what = "one pair of vectors" if pairs else "one vector"
        kb.comment(f"NeoX rotation of {what}; row t is its own absolute position.")
    move_new(kb, *m.new, n_src, it.d, rot, *m.present, dst, pairs)
    return m
