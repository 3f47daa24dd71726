"""``paged_append``: new tokens into the pages of a paged cache (:mod:`kvdsl.kernels.paged`).

``paged_append``: new BSH K/V (``src_k``, ``src_v``: ``keySeq`` tokens per batch; token ``(b,
t)`` is token ``b * keySeq + t`` of a slot mapping) go to their pages, K RMS-normed
(``k_norm``) and NeoX-rotated at the token's position (``rotary``: the first ``2 *
rotary_half`` elements of a row, or the whole head), stored as ``format``:
f32 or f16 values (f16 pools travel as ``vec2<u32>`` words: no ``shader-f16``), or a dense
format quantised by :func:`kvdsl.nodes.quantise.quantise_rows`, each row's scale reduced in
the kernel, inline or in ``scale_pages`` (the same pages' rows of K's then V's stats: scales
travel with their tokens). With ``slot_mapping`` the slot of
each token is ``slot_mapping[token]`` and its rotary position ``token_positions[token]``; with
``page_table`` sequence ``b`` holds ``seqlens_k[b] + 1`` tokens after the step, the last
``fresh = min(keySeq, seqlens_k[b] + 1)`` of them new: token ``t < fresh`` lands at position
``total - fresh + t``, later ones (right padding) are skipped, as are tokens of a negative slot
or page id.

The walk is flat, one invocation per ``vec4`` of a row (:func:`kvdsl.nodes.walks.vectors`); with
K RMSNorm a row is reduced whole inside a workgroup (:func:`kvdsl.nodes.rmsnorm.row_sum_of_squares`)
and the invocations leave after the barrier, before any store. A dense format's row is held by
the quantiser's ``ROW_LANES`` lanes (:class:`kvdsl.nodes.quantise.Quantiser`), each a run of
its vectors, the row's place in its pages given to the quantiser's destination hook.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdsl.kernels.config import builds
from kvdsl.kernels.extents import ceil_div
from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, f32, i32, max_, min_, u32, with_contract
from kvdsl.ir.tree import Member, Name
from kvdsl.kernels.rows import FlatRow, declare_inputs, flat_k, flat_k_loads, row_extents

from kvdsl.kernels.paged import (
    POOLS,
    Addressing,
    PagedAppendConfig,
    addressing_extents,
    pages_named,
    pool_bindings,
    pool_extents,
    scale_binding,
    scale_pages,
)
from kvdsl.nodes import paged, walks, words
from kvdsl.nodes.index import bsh
from kvdsl.nodes.quantise import Destination, RowPlace, cache_binding, quantise_rows
from kvdsl.nodes.rmsnorm import reduced_inverse_rms
from kvdsl.nodes.rotary import rotate
from kvdsl.nodes.transforms import lane_norm, transform_run


def _addressing(kb: KernelBuilder, cfg: PagedAppendConfig) -> dict[str, Buffer | None]:
    """``paged_append``'s addressing bindings by name: ``seqlens_k`` and ``page_table``, or
    ``slot_mapping`` and, with rotary, ``token_positions`` (None where the config has none)."""
    names = ("slot_mapping", "token_positions") if cfg.rotary else ("slot_mapping",)
    if cfg.addressing is Addressing.PAGE_TABLE:
        names = ("seqlens_k", "page_table")
    ins = dict.fromkeys(("seqlens_k", "page_table", "slot_mapping", "token_positions"))
    return ins | {n: kb.binding(n, i32, "read") for n in names}


@dataclass(frozen=True)
class _Token:
    """An invocation's new token: its row ``(b, hk, t)``, source base, rotary position (None
    without rotary or a table), and ``late``: right padding of a page-table append."""

    b: Val
    hk: Val
    t: Val
    src_base: Val
    token: Val
    pos: Val | None
    past: Val | None
    late: Val | None


def _token(kb: KernelBuilder, cfg: PagedAppendConfig, ins: dict, row: Val, key_seq: Val) -> _Token:
    """Row ``row`` of the new tokens and where it sits in its sequence. Rows are token-major
    (a token's heads adjacent, as in the BSH source and in an NHD page), so that a workgroup
    reads, and in NHD writes, whole tokens."""
    heads = walks.named(kb, "KV_HEADS", 1)
    hk = kb.let("hk", row % heads)
    token = kb.let("token", row / heads)
    t = kb.let("t", token % key_seq)
    b = kb.let("b", token / key_seq)
    hidden, per_row = walks.named(kb, "KV_HIDDEN", 4), walks.named(kb, "HEAD_DIM", 4)
    src_base = kb.let("srcBase", bsh(b, t, hk, key_seq, hidden, per_row))
    pos = past = late = None
    if cfg.addressing is Addressing.PAGE_TABLE:
        step = paged.table_step(kb, ins["seqlens_k"], b, key_seq)
        fresh, past = step.fresh, step.past
        kb.comment("Tokens t >= fresh are right padding, skipped.")
        if cfg.rotary or cfg.dense is not None:
            kb.comment("Their position is clamped into the sequence: every load stays in range.")
        pos = kb.let("pos", past + min_(t, max_(fresh, 1) - 1))
        late = t >= fresh
    elif cfg.rotary:
        pos = kb.let("pos", max_(ins["token_positions"][token], 0).to(u32))
    return _Token(b, hk, t, src_base, token, pos, past, late)


def _address(
    kb: KernelBuilder, cfg: PagedAppendConfig, ins: dict, pages: paged.Pages, tok: _Token, at: Val
) -> paged.Address:
    """The token's page and slot: through the page table at position ``at``, or its slot."""
    if cfg.addressing is Addressing.PAGE_TABLE:
        max_pages = kb.param("maxPages")
        return paged.table_address(kb, pages, ins["page_table"], tok.b, max_pages, at)
    return paged.slot_address(kb, pages, ins["slot_mapping"], tok.token)


@builds(PagedAppendConfig)
def paged_append(cfg: PagedAppendConfig, name: str = "paged_append") -> Kernel:
    """Build the ``paged_append`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    inputs = declare_inputs(kb, cfg, width=4, between=lambda: _addressing(kb, cfg))
    ins = inputs.layout
    q = cfg.quantiser
    if q is None:
        key_pool, value_pool = pool_bindings(kb, cfg, "read_write")
    else:
        key_pool, value_pool = (cache_binding(kb, q, n) for n in POOLS)
    side = scale_binding(kb, cfg, "read_write")
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    per_row = kb.const("HEAD_DIM_V4", u32, cfg.per_row)
    kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.const("KV_HIDDEN_V4", u32, cfg.hidden // 4)
    lanes = kb.const("ROW_LANES", u32, q.lanes) if q is not None else per_row
    half = kb.const("HALF_V4", u32, cfg.half // 4) if cfg.rotary else None
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.k_norm else None
    pages = paged.declare(kb, cfg.geometry)
    count, key_seq = kb.param("count"), kb.param("keySeq")
    table = cfg.addressing is Addressing.PAGE_TABLE
    if table:
        kb.param("maxPages")
    src_k, src_v, weight = inputs.src_k, inputs.src_v, inputs.k_norm_weight

    # A barrier (K RMSNorm's, the quantiser's) must be reached by every invocation: the walk
    # clamps the rows past the end instead of returning, and they leave after it.
    barrier = cfg.k_norm or q is not None
    if q is not None:
        kb.comment(f"ROW_LANES invocations per row, each holding {q.vectors} vectors of it.")
        it = walks.vectors(kb, cfg.fold, count, lanes, 1, guard=False)
    else:
        it = walks.vectors(kb, cfg.fold, count, per_row, 4, guard=not barrier)
    tok = _token(kb, cfg, ins, it.row, key_seq)
    if tok.late is not None and not barrier:
        kb.leave_if(tok.late)
    done = it.e >= count * lanes if barrier else None
    if q is not None:
        n = q.vectors
        at = [tok.src_base + q.vector_at(it.d, j) for j in range(n)]
        k = [kb.let(f"kIn{j}", words.as_f32(kb, src_k[at[j]])) for j in range(n)]
        v = [kb.let(f"v{j}", words.as_f32(kb, src_v[at[j]])) for j in range(n)]
        norm = None
        if cfg.k_norm:
            norm = lane_norm(kb, k, it.d, lanes, q.lanes, cfg.workgroup_size, head_dim, eps, weight)
        rot = inputs.rotation(tok.pos, half, cfg.partial) if cfg.rotary else None

        def load_k(i: Val) -> Val:
            return words.as_f32(kb, src_k[tok.src_base + i])

        args = (load_k, norm, rot, cfg.rotation, cfg.workgroup_size)
        k, v = transform_run(kb, q, it.d, k, v, *args)
        addr = _address(kb, cfg, ins, pages, tok, tok.pos if table else None)

        def place() -> RowPlace:
            kb.comment("The token's rows in its pages: its words, its side scales.")
            base = kb.let("rowWord", pages.row_base(addr.page, addr.slot, tok.hk))
            sides = scale_pages(pages, cfg)
            if sides is None:
                return RowPlace(base)
            return RowPlace(base, kb.let("rowSide", sides.row_base(addr.page, addr.slot, tok.hk)))

        skip = done.lor(addr.skip) if tok.late is None else done.lor(tok.late).lor(addr.skip)
        quantise_rows(kb, q, it.d, k, v, Destination(key_pool, value_pool, side, place, skip))
    else:
        if cfg.k_norm:
            k_own = kb.let("kOwn", words.as_f32(kb, src_k[tok.src_base + it.d]))
            row = FlatRow(
                it, tok.b, tok.hk, tok.t, tok.src_base, per_row, half, None, k_own,
                partial=cfg.partial,
            )  # fmt: skip
            loads = flat_k_loads(kb, row, inputs, lambda: tok.pos)
            v = kb.let("v", src_v[tok.src_base + it.d])
            sums = (k_own, it.d, per_row, cfg.workgroup_size, cfg.per_row)
            inv_rms = reduced_inverse_rms(kb, head_dim, eps, *sums)
            k = flat_k(kb, row, loads, inv_rms)
            kb.leave_if(done if tok.late is None else done.lor(tok.late))
        else:
            if cfg.rotary:
                rot = inputs.rotation(tok.pos, half, cfg.partial)
                k = kb.let("k", rotate(kb, src_k, tok.src_base, it.d, rot))
            else:
                k = kb.let("k", src_k[tok.src_base + it.d])
            v = kb.let("v", src_v[tok.src_base + it.d])
        addr = _address(kb, cfg, ins, pages, tok, tok.past + tok.t if table else None)
        kb.leave_if(addr.skip)
        kb.comment("The token's rows in its page: K's, then V's.")
        k_base = kb.let("kBase", pages.row_base(addr.page, addr.slot, tok.hk))
        v_base = kb.let("vBase", pages.row_base(addr.page, addr.slot, tok.hk, value=True))
        elem = key_pool.binding.elem
        key_pool[k_base + it.d] = words.to(kb, elem, k)
        value_pool[v_base + it.d] = words.to(kb, elem, v)

    dispatch = walks.dispatch(count, lanes, cfg.workgroup_size, cfg.fold, blocks=False)
    doc = f"Append new BSH K/V to a paged {cfg.format.value} cache through a "
    doc += "page table" if table else "slot mapping"
    doc += "".join(
        f"; {x}" for x, on in (("K RMS-normed", cfg.k_norm), ("K rotated", cfg.rotary)) if on
    )
    if q is not None:
        doc += "; each row's scale reduced in the kernel"
    kernel = kb.build(dispatch, doc + ".")
    return walks.vector_extents(with_contract(kernel, *_append_contract(cfg, count, key_seq)))


def _append_contract(cfg: PagedAppendConfig, count: Val, key_seq: Val) -> tuple[dict, dict]:
    """``paged_append``'s least binding sizes and requirements."""
    batch = ceil_div(count, cfg.kv_heads * key_seq)
    max_pages = Member(Name("params"), "maxPages")
    address, fits, positions = addressing_extents(cfg, batch, key_seq, max_pages, 1)
    extents = row_extents(cfg, count, key_seq, positions, between=address)
    requires: dict[str, Any] = {"keySeq >= 1": key_seq >= 1} | fits
    extents |= pool_extents(cfg, pages_named(cfg, cfg.addressing))
    return extents, requires
