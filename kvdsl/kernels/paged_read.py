"""``paged_read``: rows gathered back from a paged cache (:mod:`kvdsl.kernels.paged`), decoded
to ``output_type``.

With ``page_table``, rows ``(b, h, t)`` of a BNSH ``[batch, kvHeads, seq, headDim]`` output from
positions ``t < seqlens_k[b] + 1`` of sequence ``b`` (rows past it, and rows of a negative page
id, untouched); with ``slot_mapping``, rows ``(token, h)`` of a BSH output from
``slot_mapping[token]`` (a negative slot: untouched). A dense format's rows are decoded as
``dense_read`` decodes them (:meth:`kvdsl.nodes.formats.Format.decode`). One invocation per output
``vec4``.
"""

from __future__ import annotations

from typing import Any

from kvdsl.kernels.config import builds
from kvdsl.kernels.extents import ceil_div, times
from kvdsl.ir import with_contract
from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, construct, f32, i32, u32, vec

from kvdsl.kernels.paged import (
    LANES,
    Addressing,
    PagedConfig,
    PagedReadConfig,
    pages_named,
    pool_bindings,
    pool_extents,
    scale_binding,
    scale_pages,
)
from kvdsl.nodes import paged, walks, words
from kvdsl.nodes.index import split_rows
from kvdsl.nodes.window import total_tokens


@builds(PagedReadConfig)
def paged_read(cfg: PagedReadConfig, name: str = "paged_read") -> Kernel:
    """Build the ``paged_read`` kernel for ``cfg``."""
    table = cfg.addressing is Addressing.PAGE_TABLE
    fmt = cfg.dense
    kb = KernelBuilder(name, cfg.workgroup_size)
    seqlens = page_table = slot_mapping = None
    if table:
        seqlens = kb.binding("seqlens_k", i32, "read")
        page_table = kb.binding("page_table", i32, "read")
    else:
        slot_mapping = kb.binding("slot_mapping", i32, "read")
    key_pool, value_pool = pool_bindings(kb, cfg, "read")
    side = scale_binding(kb, cfg, "read")
    out_ty = cfg.output_type.scalar
    out_key, out_value = words.bindings(kb, ("key", "value"), out_ty, 4, "read_write")
    out_elem = out_key.binding.elem
    kb.const("HEAD_DIM", u32, cfg.head_dim)
    per_row = kb.const("HEAD_DIM_V4", u32, cfg.per_row)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    pages = paged.declare(kb, cfg.geometry)
    count, seq = kb.param("count"), kb.param("seq")
    max_pages = kb.param("maxPages") if table else None
    it = walks.vectors(kb, cfg.fold, count, per_row, 4)
    if table:
        kb.comment("Output row (b, hk, t): position t of sequence b, if it holds t.")
        b, hk, t = split_rows(kb, it.row, heads, seq)
        kb.leave_if(t >= total_tokens(kb, seqlens, b))
        addr = paged.table_address(kb, pages, page_table, b, max_pages, t)
    else:
        kb.comment("Output row (token, hk) of a BSH output: token's slot.")
        hk = kb.let("hk", it.row % heads)
        addr = paged.slot_address(kb, pages, slot_mapping, kb.let("token", it.row / heads))
    kb.leave_if(addr.skip)
    k_base = kb.let("kBase", pages.row_base(addr.page, addr.slot, hk))
    if fmt is None:
        v_base = kb.let("vBase", pages.row_base(addr.page, addr.slot, hk, value=True))
        out_key[it.e] = words.to(kb, out_elem, key_pool[k_base + it.d])
        out_value[it.e] = words.to(kb, out_elem, value_pool[v_base + it.d])
    else:
        sides = scale_pages(pages, cfg)
        s_base = None
        if sides is not None:
            s_base = kb.let("sideBase", sides.row_base(addr.page, addr.slot, hk))
        for which, pool, out, side_at in (
            ("k", key_pool, out_key, 0),
            ("v", value_pool, out_value, fmt.stats),
        ):
            row = _decoded_row(kb, cfg, which, pool, k_base, it.d, side, s_base, side_at)
            out[it.e] = words.to(kb, out_elem, row)
    dispatch = walks.dispatch(count, per_row, cfg.workgroup_size, cfg.fold, blocks=False)
    what = "a BNSH output through a page table" if table else "a BSH output through a slot mapping"
    kernel = kb.build(dispatch, f"Gather paged {cfg.format.value} K/V rows into {what}.")
    rows = times(count, cfg.head_dim)
    extents: dict[str, Any] = {"key": rows, "value": rows}
    requires: dict[str, Any] = {"seq >= 1": seq >= 1}
    if table:
        batch = ceil_div(count, cfg.kv_heads * seq)
        extents |= {"seqlens_k": batch, "page_table": times(batch, max_pages)}
        requires["seq <= maxPages * page_size"] = seq <= max_pages * cfg.page_size
    else:
        extents["slot_mapping"] = ceil_div(count, cfg.kv_heads)
    extents |= pool_extents(cfg, pages_named(cfg, cfg.addressing))
    return walks.vector_extents(with_contract(kernel, extents, requires))


def _decoded_row(
    kb: KernelBuilder, cfg: PagedConfig, which: str, pool: Buffer, base: Val, d: Val,
    side: Buffer | None, s_base: Val | None, side_at: int,
) -> Val:  # fmt: skip
    """Vector ``d`` of the dense row at word ``base`` of ``pool``, decoded to f32
    (:meth:`kvdsl.nodes.formats.Format.decode`; side scales from ``side[s_base + side_at ..]``)."""

    def load(w: Val) -> Val:
        return pool[base + w]

    def stat(i: int) -> Val:
        return side[s_base + (side_at + i)]

    lanes = [
        cfg.dense.decode(kb, f"{which}{c.upper()}", load, d * 4 + n, stat, cfg.inline)
        for n, c in enumerate(LANES)
    ]
    return construct(vec(4, f32), *lanes)
