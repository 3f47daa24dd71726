"""Whole-page kernels of a paged cache (:mod:`kvdsl.nodes.paged`, :mod:`kvdsl.kernels.paged`).

``paged_copy`` (copy-on-write, vLLM's ``copy_blocks``, TVM's ``copy_single_page``): for each
``(src, dst)`` pair of ``page_pairs`` page ``dst`` of the pool becomes a copy of page ``src``,
K and V (a combined pool's page holds both); a pair with a negative id is skipped. Two pairs
with one destination race (the interpreter reports it); a destination that is another pair's
source has no order either (its copy may read the page before or after it is written): a host
splits such chains into passes.

``paged_compact`` (TVM's ``compact_kv_copy``): page ``live_pages[i]`` of the pools to page ``i``
of new pools (``compact_key``/``compact_value``, or ``compact_kv``): the live pages gathered
into a dense prefix; a negative entry is skipped.

``paged_window``: a sliding window over page tables, a table update that moves no K/V byte
(the kernel binds no pool). Sequence ``b`` keeps its last ``window`` of ``seqlens_k[b] + 1``
tokens; each entry of its row of ``page_table`` whose page lies wholly before them is released:
the entry becomes ``-1`` and the page id goes to ``freed_pages`` at the same index (every other
entry of ``freed_pages`` is ``-1``). Tokens keep their positions (and their rotation): an
append and a read through the table reach the same pages as before, and skip released ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdsl.ir import Dispatch, Kernel, KernelBuilder, i32, lit, select, u32
from kvdsl.kernels.config import (
    KernelConfig,
    Model,
    ceil_div,
    contract,
    emax,
    largest,
    plus,
    require,
    times,
)
from kvdsl.kernels.paged import PagedConfig, pool_bindings, pool_extents
from kvdsl.nodes import paged, walks
from kvdsl.nodes.index import flat_index
from kvdsl.nodes.paged import PAGE_SIZES, PageLayout, Pool
from kvdsl.nodes.window import total_tokens

COMPACT_POOLS, COMPACT_COMBINED = ("compact_key", "compact_value"), "compact_kv"


@dataclass(frozen=True)
class PagedCopyConfig(PagedConfig):
    """A ``paged_copy`` variant: the pool's pages (the order inside a page does not matter to
    a whole-page copy)."""

    mode = "paged_copy"
    KEYS = (  # fmt: skip
        "kv_heads", "head_dim", "page_size", "page_layout", "pool", "cache_type",
        "workgroup_size", "fold",
    )


@dataclass(frozen=True)
class PagedCompactConfig(PagedCopyConfig):
    """A ``paged_compact`` variant: the pools' pages."""

    mode = "paged_compact"


@dataclass(frozen=True)
class PagedWindowConfig(KernelConfig):
    """A ``paged_window`` variant: tokens per page."""

    page_size: int = 16
    mode = "paged_window"
    KEYS = ("page_size", "workgroup_size", "fold")

    def check_fields(self) -> None:
        ok = isinstance(self.page_size, int) and not isinstance(self.page_size, bool)
        require(
            ok and self.page_size in PAGE_SIZES,
            "page_size",
            self.page_size,
            "a power of two from 16 to 256 (tokens per page)",
        )
        require(not self.window, "window", self.window, "false for paged_window")


def _pages(kb: KernelBuilder, cfg: PagedConfig) -> tuple[Any, Any, Any]:
    """``PAGE_UNITS`` vectors per page of K or V: the pool's consts, and the walk's vectors per
    copied page (a combined page's K and V are one stride)."""
    pages = paged.declare(kb, cfg.geometry)
    return pages, pages.units, pages.stride


def _move(
    kb: KernelBuilder, cfg: PagedConfig, src_page: Any, dst_page: Any, d: Any, src: tuple,
    dst: tuple, stride: Any,
) -> None:  # fmt: skip
    """Vector ``d`` of a page (of a combined page's whole stride) from ``src_page`` of the
    ``src`` pools to ``dst_page`` of the ``dst`` pools, K and V."""
    if cfg.pool is Pool.COMBINED:
        dst[0][dst_page * stride + d] = src[0][src_page * stride + d]
        return
    for s, o in zip(src, dst):
        o[dst_page * stride + d] = s[src_page * stride + d]


def paged_copy(cfg: PagedCopyConfig, name: str = "paged_copy") -> Kernel:
    """Build the ``paged_copy`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    pairs = kb.binding("page_pairs", i32, "read")
    key_pool, value_pool = pool_bindings(kb, cfg, "read_write")
    _, _, stride = _pages(kb, cfg)
    count = kb.param("count")
    kb.comment("One invocation per vector of a copied page (K and V of a combined page).")
    it = walks.vectors(kb, cfg.fold, count, stride, 4)
    src = kb.let("srcPage", pairs[it.row * 2])
    dst = kb.let("dstPage", pairs[it.row * 2 + 1])
    kb.leave_if((src < 0).lor(dst < 0))
    _move(kb, cfg, src.to(u32), dst.to(u32), it.d, (key_pool, value_pool), (key_pool, value_pool),
          stride)  # fmt: skip
    dispatch = walks.dispatch(count, stride, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, "Copy whole pages of a paged cache: page dst <- page src.")
    extents: dict[str, Any] = {"page_pairs": times(count, 2)}
    extents |= pool_extents(cfg, _largest_page("page_pairs"))
    return walks.vector_extents(contract(kernel, extents))


def _largest_page(binding: str) -> Any:
    """The pages an integer binding of page ids reaches: one past its largest."""
    return emax(plus(largest(binding), 1), 0)


def paged_compact(cfg: PagedCompactConfig, name: str = "paged_compact") -> Kernel:
    """Build the ``paged_compact`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    live = kb.binding("live_pages", i32, "read")
    src = pool_bindings(kb, cfg, "read")
    dst = pool_bindings(kb, cfg, "read_write", COMPACT_POOLS, COMPACT_COMBINED)
    _, _, stride = _pages(kb, cfg)
    count = kb.param("count")
    kb.comment("One invocation per vector of a live page (K and V of a combined page).")
    it = walks.vectors(kb, cfg.fold, count, stride, 4)
    page = kb.let("livePage", live[it.row])
    kb.leave_if(page < 0)
    _move(kb, cfg, page.to(u32), it.row, it.d, src, dst, stride)
    dispatch = walks.dispatch(count, stride, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, "Gather the live pages of a paged cache into a dense prefix.")
    extents: dict[str, Any] = {"live_pages": count}
    extents |= pool_extents(cfg, _largest_page("live_pages"))
    extents |= pool_extents(cfg, count, COMPACT_POOLS, COMPACT_COMBINED)
    return walks.vector_extents(contract(kernel, extents))


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
    return contract(kernel, extents, {"maxPages >= 1": max_pages >= 1})


def catalog_variants(models: dict[str, Model]) -> dict[str, KernelConfig]:
    """Named page kernels at Llama-3.1-8B's shape: copy and compact of f32 and f16 pools,
    separate and combined; the window at page sizes 16, 64 and 256."""
    llama = models["llama31_8b"].shape
    v: dict[str, KernelConfig] = {}
    for ty in ("f32", "f16"):
        for pool in Pool:
            tag = f"{ty}_{pool.value}"
            for mode, cls in (("copy", PagedCopyConfig), ("compact", PagedCompactConfig)):
                v[f"paged_{mode}_{tag}_p16_llama31_8b"] = cls(
                    **llama, pool=pool, cache_type=ty, page_layout=PageLayout.NHD
                )
    v["paged_copy_f32_separate_p64_llama31_8b"] = PagedCopyConfig(**llama, page_size=64)
    for size in (16, 64, 256):
        v[f"paged_window_p{size}"] = PagedWindowConfig(page_size=size)
    return v
