"""The cache as :func:`~kvdsl.kernels.attend.kernel.attend` reads it: its bindings, where a
row starts, and its units as ``vec4<f32>`` lanes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvdsl.ir import Buffer, KernelBuilder, Val, i32, max_, u32
from kvdsl.kernels.attend.config import AttendConfig, CacheLayout
from kvdsl.kernels.config import emax, largest, plus, times
from kvdsl.nodes import paged, words
from kvdsl.nodes.paged import Pool


@dataclass(frozen=True)
class Cache:
    """The cache as a kernel reads it, in units of :attr:`AttendConfig.unit` values:
    ``row(b, hk, j)`` gives the first unit of K's row ``j`` of sequence ``b``'s KV head ``hk``
    and whether it is missing; V's row starts there in ``value`` (``value_shift`` units on)."""

    key: Buffer
    value: Buffer
    row: Callable[[Val, Val, Val], tuple[Val, Val | None]]
    value_shift: Val | None
    extents: dict[str, Any]


def declare(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
    """Declare the cache's bindings and consts; how rows are found."""
    ty, unit = cfg.cache_type.scalar, cfg.unit
    units = cfg.head_dim // unit
    if cfg.cache is CacheLayout.BNSH:
        key, value = words.bindings(kb, ("key", "value"), ty, unit)
        seq = kb.param("seq")
        heads = kb.const("KV_HEADS_CACHE", u32, cfg.kv_heads)

        def row(b: Val, hk: Val, j: Val) -> tuple[Val, Val | None]:
            return ((b * heads + hk) * seq + j) * units, None

        rows = times(batch, cfg.kv_heads, seq, cfg.head_dim)
        return Cache(key, value, row, None, {"key": rows, "value": rows})
    page_table = kb.binding("page_table", i32, "read")
    if cfg.pool is Pool.COMBINED:
        key = value = words.binding(kb, "kv_pages", ty, unit)
    else:
        key, value = words.bindings(kb, ("key_pages", "value_pages"), ty, unit)
    pages = paged.declare(kb, cfg.geometry)
    max_pages = kb.param("maxPages")

    def paged_row(b: Val, hk: Val, j: Val) -> tuple[Val, Val | None]:
        entry = kb.let("entry", page_table[b * max_pages + j / pages.size])
        page = max_(entry, 0).to(u32)
        return pages.row_base(page, j % pages.size, hk), entry < 0

    pool_values = times(largest_page_plus_one(), cfg.geometry.stride * unit)
    extents: dict[str, Any] = {"page_table": times(batch, max_pages)}
    if cfg.pool is Pool.COMBINED:
        extents["kv_pages"] = pool_values
    else:
        extents |= {n: pool_values for n in ("key_pages", "value_pages")}
    shift = pages.units if cfg.pool is Pool.COMBINED else None
    return Cache(key, value, paged_row, shift, extents)


def as_f32(kb: KernelBuilder, x: Val, name: str) -> list[Val]:
    """Cache unit ``x`` as ``vec4<f32>`` lanes: itself (f32), or its halves unpacked into lets
    ``name_0`` (and ``name_1`` for eight)."""
    if x.ty == words.WORDS:
        halves = (x.member("xy"), x.member("zw"))
        return [kb.let(f"{name}_{h}", words.as_f32(kb, w)) for h, w in enumerate(halves)]
    if x.ty == words.HALVES:
        return [kb.let(f"{name}_0", words.as_f32(kb, x))]
    return [x]


def largest_page_plus_one() -> Any:
    return emax(plus(largest("page_table"), 1), 0)
