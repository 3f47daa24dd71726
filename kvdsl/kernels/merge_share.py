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

Walks (:mod:`kvdsl.nodes.flat`, both passes): ``flat``, one invocation per present ``vec4``,
``count * HEAD_DIM_V4`` items (rotary loads its partner vector and a cos/sin ``vec4``; rotary on
f16 data walks one invocation per rotary pair, ``count * HALF_V4`` items,
:func:`kvdsl.nodes.flat.pair_walk`), and the template's ``cooperative`` (off Apple),
``per_row`` (Apple's retain pass) and ``hybrid`` (Apple's append pass), whose dispatch the block
walk keeps.

``present_type`` is the element type of past and present, ``input_type`` that of the new K/V. The
template converts neither: its per-row rotary stores an f32 row into the cache and its
cooperative rotary multiplies raw new K by f32 cos/sin. kvdsl computes rotary in f32 and
converts on store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvdsl.ir import Kernel, KernelBuilder, f32
from kvdsl.kernels.config import (
    ceil_div,
    check,
    common,
    contract,
    flag,
    one_of,
    pairs_field,
    scalar,
    shape,
    times,
)
from kvdsl.nodes import flat
from kvdsl.nodes.index import bnsh, split_rows
from kvdsl.nodes.window import append_window

if TYPE_CHECKING:
    from kvdsl.catalog import Model

FLOATS = ("f32", "f16")
REGIONS = ("retain", "append")
RETAIN_WALKS = ("cooperative", "per_row", "flat")
WALKS = ("cooperative", "per_row", "hybrid", "flat")


@dataclass(frozen=True)
class MergeShareConfig:
    """A merge_share pass: which rows it owns, the walk, rotary and element types."""

    kv_heads: int
    head_dim: int
    region: str = "append"
    walk: str = "cooperative"
    rotary: bool = False
    present_type: str = "f32"
    input_type: str = "f32"
    workgroup_size: int | None = None  # 256 for the flat walk, else 64
    fold: int = 65535
    pairs: bool | None = None  # flat rotary: one invocation per rotary pair (flat.uses_pairs)
    mode = "merge_share"

    def __post_init__(self) -> None:
        shape(self)
        one_of("region", self.region, REGIONS)
        one_of("walk", self.walk, WALKS if self.region == "append" else RETAIN_WALKS)
        flat.resolve_workgroup(self)
        flag("rotary", self.rotary)
        if self.rotary:
            check(self.region == "append", "rotary", self.rotary, "false for region 'retain'")
            check(self.head_dim % 2 == 0, "head_dim", self.head_dim, "even for rotary")
        one_of("present_type", self.present_type, FLOATS)
        one_of("input_type", self.input_type, FLOATS)
        common(self)
        pairs_field(self)


def merge_share(cfg: MergeShareConfig, name: str = "merge_share") -> Kernel:
    """Build the merge_share pass for ``cfg`` (the flat rotary append walks rotary pairs where
    :func:`kvdsl.nodes.flat.uses_pairs` says)."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    pairs = flat.uses_pairs(cfg)
    if cfg.region == "retain":
        _retain(kb, cfg)
        doc = (
            "Buffer-sharing append, retain pass: rows outside each batch's append window\n"
            "are an identity copy of the past cache (dst index == src index)."
        )
    else:
        _append(kb, cfg, pairs)
        doc = (
            "Buffer-sharing append, append pass: the rows of each batch's append window come\n"
            "from the new BSH K/V"
            + (", K rotated at its absolute position." if cfg.rotary else ".")
        )
    rows, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")
    if pairs:
        dispatch = flat.pair_dispatch(kb, rows, cfg)
    else:
        dispatch = flat.dispatch(rows, flat.named(kb, "HEAD_DIM", _width(cfg)), cfg)
    kernel = kb.build(dispatch, doc)
    heads, head_dim = cfg.kv_heads, cfg.head_dim
    if cfg.region == "retain":
        batches = ceil_div(rows, heads * seq)
        cache = times(rows, head_dim)
        extents = {"past_k": cache, "past_v": cache, "seqlens_k": batches}
        requires = {"seq >= 1": seq >= 1}
    else:
        batches = ceil_div(rows, heads * key_seq)
        new = times(batches, key_seq, heads * head_dim)
        cache = times(batches, heads, seq, head_dim)
        extents = {"new_k": new, "new_v": new, "seqlens_k": batches}
        if cfg.rotary:
            rot = times(seq, head_dim // 2)
            extents |= {"cos_cache": rot, "sin_cache": rot}
        requires = {"keySeq >= 1": key_seq >= 1}
    extents |= {"present_key": cache, "present_value": cache}
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return flat.vector_extents(contract(kernel, extents, requires))


def _width(cfg: MergeShareConfig) -> int:
    """The walk's vector width (f16 moved as words; see :func:`kvdsl.nodes.flat.width`)."""
    types = (cfg.present_type,) if cfg.region == "retain" else (cfg.present_type, cfg.input_type)
    return flat.width(cfg.head_dim, types, cfg.rotary)


def _retain(kb: KernelBuilder, cfg: MergeShareConfig) -> None:
    width = _width(cfg)
    cache = scalar(cfg.present_type)
    past_k = flat.binding(kb, "past_k", cache, width, "read")
    past_v = flat.binding(kb, "past_v", cache, width, "read")
    seqlens_k = kb.binding("seqlens_k", scalar("i32"), "read")
    present_key = flat.binding(kb, "present_key", cache, width, "read_write")
    present_value = flat.binding(kb, "present_value", cache, width, "read_write")
    u32 = scalar("u32")
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.workgroup_const("WG")
    rows, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")
    hd4 = flat.vector_const(kb, head_dim, cfg.head_dim, width)
    it = flat.walk(kb, cfg, rows, hd4, width)
    t = kb.let("t", it.row % seq)
    b = kb.let("b", it.row / (seq * heads))
    w = append_window(kb, seqlens_k, b, seq, key_seq)
    kb.comment("Outside the append window; the shared stride makes this dst == src.")
    with kb.if_((t < w.append_start).lor(t >= w.active_end)):
        present_key[it.e] = past_k[it.e]
        present_value[it.e] = past_v[it.e]


def _append(kb: KernelBuilder, cfg: MergeShareConfig, pairs: bool) -> None:
    width = _width(cfg)
    cache_ty, inp_ty = scalar(cfg.present_type), scalar(cfg.input_type)
    new_k = flat.binding(kb, "new_k", inp_ty, width, "read")
    new_v = flat.binding(kb, "new_v", inp_ty, width, "read")
    seqlens_k = kb.binding("seqlens_k", scalar("i32"), "read")
    cos = sin = None
    if cfg.rotary:
        cos = kb.binding("cos_cache", flat.elem(f32, width), "read")
        sin = kb.binding("sin_cache", flat.elem(f32, width), "read")
    present_key = flat.binding(kb, "present_key", cache_ty, width, "read_write")
    present_value = flat.binding(kb, "present_value", cache_ty, width, "read_write")
    u32 = scalar("u32")
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.workgroup_const("WG")
    hidden = kb.const("KV_HIDDEN", u32, cfg.kv_heads * cfg.head_dim)
    half = kb.const("HALF", u32, cfg.head_dim // 2) if cfg.rotary else None
    rows, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")

    hd4 = flat.vector_const(kb, head_dim, cfg.head_dim, width)
    hidden4 = flat.vector_const(kb, hidden, cfg.kv_heads * cfg.head_dim, width)
    half4 = flat.vector_const(kb, half, cfg.head_dim // 2, width) if cfg.rotary else None
    it = flat.pair_walk(kb, cfg, rows, half4) if pairs else flat.walk(kb, cfg, rows, hd4, width)
    # New row -> its cache row t in the append window.
    b, hk, j = split_rows(kb, it.row, heads, key_seq, "j")
    w = append_window(kb, seqlens_k, b, seq, key_seq)
    kb.comment("New tokens before `skip` do not fit the cache (keySeq > seq).")
    kb.leave_if(j < w.skip)
    t = kb.let("t", w.append_start + (j - w.skip))
    dst = kb.let("dst", bnsh(b, hk, t, heads, seq, hd4) + it.d)
    n_src = kb.let("nSrc", (b * key_seq + j) * hidden4 + hk * hd4)
    rot = (cos, sin, t, half4) if cfg.rotary else None
    if rot is not None:
        what = "one pair of vectors" if pairs else "one vector"
        kb.comment(f"NeoX rotation of {what}; row t is its own absolute position.")
    flat.move_new(kb, new_k, new_v, n_src, it.d, rot, present_key, present_value, dst, pairs)


def catalog_variants(models: dict[str, Model]) -> dict[str, MergeShareConfig]:
    """Named merge_share passes: both regions, every walk, rotary on and off, f16."""
    v: dict[str, MergeShareConfig] = {}
    for key in ("qwen25_05b", "llama31_8b", "gemma3_1b"):
        m = models[key]
        h, d = m.kv_heads, m.head_dim
        v[f"merge_share_retain_{key}"] = MergeShareConfig(h, d, "retain")
        v[f"merge_share_retain_per_row_{key}"] = MergeShareConfig(h, d, "retain", "per_row")
        v[f"merge_share_append_{key}"] = MergeShareConfig(h, d, "append")
        v[f"merge_share_append_rotary_{key}"] = MergeShareConfig(h, d, "append", rotary=True)
        v[f"merge_share_retain_flat_{key}"] = MergeShareConfig(h, d, "retain", "flat")
        v[f"merge_share_append_flat_{key}"] = MergeShareConfig(h, d, "append", "flat")
        v[f"merge_share_append_rotary_flat_{key}"] = MergeShareConfig(
            h, d, "append", "flat", rotary=True
        )
        if key != "gemma3_1b":
            v[f"merge_share_append_rotary_hybrid_{key}"] = MergeShareConfig(
                h, d, "append", "hybrid", rotary=True
            )
    m = models["llama31_8b"]
    h, d = m.kv_heads, m.head_dim
    v["merge_share_append_per_row_llama31_8b"] = MergeShareConfig(h, d, "append", "per_row")
    v["merge_share_append_rotary_per_row_llama31_8b"] = MergeShareConfig(
        h, d, "append", "per_row", rotary=True
    )
    v["merge_share_append_hybrid_llama31_8b"] = MergeShareConfig(h, d, "append", "hybrid")
    f16 = dict(present_type="f16", input_type="f16")
    v["merge_share_retain_f16_llama31_8b"] = MergeShareConfig(h, d, "retain", **f16)
    v["merge_share_append_rotary_f16_llama31_8b"] = MergeShareConfig(
        h, d, "append", rotary=True, **f16
    )
    v["merge_share_retain_flat_f16_llama31_8b"] = MergeShareConfig(h, d, "retain", "flat", **f16)
    v["merge_share_append_rotary_flat_f16_llama31_8b"] = MergeShareConfig(
        h, d, "append", "flat", rotary=True, **f16
    )
    v["merge_share_append_rotary_per_row_f16_llama31_8b"] = MergeShareConfig(
        h, d, "append", "per_row", rotary=True, **f16
    )
    return v
