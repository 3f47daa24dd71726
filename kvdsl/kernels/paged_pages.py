"""Whole-page kernels of a paged cache (:mod:`kvdsl.nodes.paged`, :mod:`kvdsl.kernels.paged`).

``paged_copy`` (copy-on-write, vLLM's ``copy_blocks``, TVM's ``copy_single_page``): for each
``(src, dst)`` pair of ``page_pairs`` page ``dst`` of the pool becomes a copy of page ``src``,
K and V (a combined pool's page holds both); a pair with a negative id is skipped. Two pairs
with one destination race (the interpreter reports it); a destination that is another pair's
source has no order either (its copy may read the page before or after it is written): a host
splits such chains into passes.

``paged_compact`` (TVM's ``compact_kv_copy``): page ``live_pages[i]`` of the pools to page ``i``
of new pools (``compact_key``/``compact_value``, or ``compact_kv``; ``compact_scales``): the
live pages gathered into a dense prefix; a negative entry is skipped.

Both move a dense format's words as they are, and its side scales (``scale_pages``) with them.

``paged_window``: a sliding window over page tables, a table update that moves no K/V byte
(the kernel binds no pool). Sequence ``b`` keeps its last ``window`` of ``seqlens_k[b] + 1``
tokens; each entry of its row of ``page_table`` whose page lies wholly before them is released:
the entry becomes ``-1`` and the page id goes to ``freed_pages`` at the same index (every other
entry of ``freed_pages`` is ``-1``). Tokens keep their positions (and their rotation): an
append and a read through the table reach the same pages as before, and skip released ones.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from kvdsl.ir import Dispatch, Kernel, KernelBuilder, i32, largest, lit, select, u32, with_contract
from kvdsl.kernels.config import KernelConfig, builds
from kvdsl.kernels.extents import ceil_div, emax, plus, times

from kvdsl.kernels.paged import (
    PagedConfig,
    pool_bindings,
    pool_extents,
    require_page_size,
    scale_binding,
)
from kvdsl.nodes import paged, walks
from kvdsl.nodes.index import flat_index
from kvdsl.nodes.paged import Pool
from kvdsl.nodes.window import total_tokens

COMPACT_POOLS, COMPACT_COMBINED = ("compact_key", "compact_value"), "compact_kv"
COMPACT_SCALES = "compact_scales"


@dataclass(frozen=True)
class PagedCopyConfig(PagedConfig):
    """A ``paged_copy`` variant: the pool's pages (the order inside a page does not matter to
    a whole-page copy)."""

    mode = "paged_copy"


@dataclass(frozen=True)
class PagedCompactConfig(PagedCopyConfig):
    """A ``paged_compact`` variant: the pools' pages."""

    mode = "paged_compact"


@dataclass(frozen=True)
class PagedWindowConfig(KernelConfig):
    """A ``paged_window`` variant: tokens per page."""

    page_size: int = 16
    mode = "paged_window"

    def check_fields(self) -> None:
        require_page_size(self.page_size)
        self.refuse_window()


def _walk(kb: KernelBuilder, cfg: PagedConfig, count: Any) -> tuple[Any, Any, Any, int]:
    """One invocation per unit of a moved page (K and V of a combined page; a dense format's
    words, and its side scales where there are more of them): the walk's item, the pool's
    page stride, the scale pages' stride (None inline) and the units per moved page."""
    pages = paged.declare(kb, cfg.geometry)
    sides = cfg.scale_geometry
    side_stride = None if sides is None else kb.const("SCALE_PAGE_STRIDE", u32, sides.stride)
    units = max(cfg.geometry.stride, 0 if sides is None else sides.stride)
    per_page = pages.stride if units == cfg.geometry.stride else side_stride
    it = walks.vectors(kb, cfg.fold, count, per_page, cfg.unit)
    return it, pages.stride, side_stride, units


def _move(
    kb: KernelBuilder, cfg: PagedConfig, src_page: Any, dst_page: Any, it: Any, src: tuple,
    dst: tuple, stride: Any, side_stride: Any,
) -> None:  # fmt: skip
    """Unit ``it.d`` of a page from ``src_page`` of the ``src`` pools (K, V, side scales) to
    ``dst_page`` of the ``dst`` pools."""
    d = it.d
    pools = [(src[0], dst[0])] if cfg.pool is Pool.COMBINED else list(zip(src[:2], dst[:2]))
    sides = cfg.scale_geometry
    guard = sides is not None and sides.stride > cfg.geometry.stride
    with kb.if_(d < stride) if guard else nullcontext():
        for s, o in pools:
            o[dst_page * stride + d] = s[src_page * stride + d]
    if sides is not None:
        with kb.if_(d < side_stride) if sides.stride < cfg.geometry.stride else nullcontext():
            dst[2][dst_page * side_stride + d] = src[2][src_page * side_stride + d]


@builds(PagedCopyConfig)
def paged_copy(cfg: PagedCopyConfig, name: str = "paged_copy") -> Kernel:
    """Build the ``paged_copy`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    pairs = kb.binding("page_pairs", i32, "read")
    key_pool, value_pool = pool_bindings(kb, cfg, "read_write")
    side = scale_binding(kb, cfg, "read_write")
    count = kb.param("count")
    kb.comment("One invocation per unit of a copied page (K and V of a combined page).")
    it, stride, side_stride, units = _walk(kb, cfg, count)
    src = kb.let("srcPage", pairs[it.row * 2])
    dst = kb.let("dstPage", pairs[it.row * 2 + 1])
    kb.leave_if((src < 0).lor(dst < 0))
    pools = (key_pool, value_pool, side)
    _move(kb, cfg, src.to(u32), dst.to(u32), it, pools, pools, stride, side_stride)
    dispatch = walks.dispatch(count, lit(units, u32), cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, "Copy whole pages of a paged cache: page dst <- page src.")
    extents: dict[str, Any] = {"page_pairs": times(count, 2)}
    extents |= pool_extents(cfg, _largest_page("page_pairs"))
    return walks.vector_extents(with_contract(kernel, extents))


def _largest_page(binding: str) -> Any:
    """The pages an integer binding of page ids reaches: one past its largest."""
    return emax(plus(largest(binding), 1), 0)


@builds(PagedCompactConfig)
def paged_compact(cfg: PagedCompactConfig, name: str = "paged_compact") -> Kernel:
    """Build the ``paged_compact`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    live = kb.binding("live_pages", i32, "read")
    src = pool_bindings(kb, cfg, "read") + (scale_binding(kb, cfg, "read"),)
    dst = pool_bindings(kb, cfg, "read_write", COMPACT_POOLS, COMPACT_COMBINED)
    dst += (scale_binding(kb, cfg, "read_write", COMPACT_SCALES),)
    count = kb.param("count")
    kb.comment("One invocation per unit of a live page (K and V of a combined page).")
    it, stride, side_stride, units = _walk(kb, cfg, count)
    page = kb.let("livePage", live[it.row])
    kb.leave_if(page < 0)
    _move(kb, cfg, page.to(u32), it.row, it, src, dst, stride, side_stride)
    dispatch = walks.dispatch(count, lit(units, u32), cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, "Gather the live pages of a paged cache into a dense prefix.")
    extents: dict[str, Any] = {"live_pages": count}
    extents |= pool_extents(cfg, _largest_page("live_pages"))
    extents |= pool_extents(cfg, count, COMPACT_POOLS, COMPACT_COMBINED, COMPACT_SCALES)
    return walks.vector_extents(with_contract(kernel, extents))


@builds(PagedWindowConfig)
def paged_window(cfg: PagedWindowConfig, name: str = "paged_window") -> Kernel:
    """Build the ``paged_window`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    seqlens = kb.binding("seqlens_k", i32, "read")
    table = kb.binding("page_table", i32, "read_write")
    freed = kb.binding("freed_pages", i32, "read_write")
    size = kb.const("PAGE_SIZE", u32, cfg.page_size)
    count, max_pages, window = kb.param("count"), kb.param("maxPages"), kb.param("window")
    kb.comment("One invocation per page-table entry (b, i).")
    i = flat_index(kb, cfg.fold, "i", bound=count)
    b = kb.let("b", i / max_pages)
    total = total_tokens(kb, seqlens, b)
    kb.comment("The window keeps positions [first, total); page i holds [i, i + 1) * PAGE_SIZE.")
    first = kb.let("first", select(lit(0, u32), total - window, total > window))
    gone = kb.let("gone", (i % max_pages + 1) * size <= first)
    old = kb.let("old", table[i])
    freed[i] = select(lit(-1, i32), old, gone)
    table[i] = select(old, lit(-1, i32), gone)
    dispatch = Dispatch(count.node, cfg.workgroup_size, cfg.fold)
    kernel = kb.build(dispatch, "Slide a window over paged sequences: release whole pages.")
    extents = {"seqlens_k": ceil_div(count, max_pages), "page_table": count, "freed_pages": count}
    return with_contract(kernel, extents, {"maxPages >= 1": max_pages >= 1})
