"""A mode's host contract as one record (:class:`Contract`), and the parts the records share:
the sources, rotary tables, present, dense caches and pools whose sizes several modes state.

A binding's size is ``(rows, width)``: ``rows`` an expression of the shape variables
(:mod:`kvdsl.contract.expr`) and ``width`` the host values per row (f32, f16, i32 or u32 numbers
of the host's array; a packed int4 cache row is ``head_dim / 2`` u32 words). The element count
of the binding's WGSL array is ``rows * width / values per element``
(:func:`kvdsl.contract.index.bindings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kvdsl.kernels.config import KV_SCALE, ROTARY_TABLE, KernelConfig, rotary_pairs
from kvdsl.kernels.dense import DenseConfig
from kvdsl.kernels.paged import PagedConfig
from kvdsl.kernels.quant import QuantConfig
from kvdsl.kernels.rows import RowConfig

#: binding name → (rows, host values per row)
Sizes = dict[str, tuple[str, int]]


def per_head_seq(cfg: Any) -> str:
    """A pass owns every row of each (batch, kv head): ``seq``."""
    return "seq"


@dataclass(frozen=True)
class Contract:
    """A mode's host contract, stated once.

    ``shape``: the shape variables every variant has (``positions``, the rotary table's rows,
    ``maxPages`` and a window's are added where a variant has them; ``variant_shape``, where
    given, gives a variant's own); ``meanings``: each params field's meaning in words
    (``variant_meanings``: a variant's own); ``sizes``: each binding's size for a config;
    ``params``: each params field's value as a formula of the shape variables and
    :data:`CONSTANTS` (None: a value the host chooses), by default ``count`` the rows of
    every (batch, kv head) and each other field its own shape variable; ``rows``: the rows
    per (batch, kv head) a pass owns, as a formula; ``says``: what a requirement of the mode's
    kernel keeps true, in words (:mod:`kvdsl.contract.requirements`)."""

    shape: tuple[str, ...]
    meanings: Mapping[str, str]
    sizes: Callable[[Any], Sizes]
    params: Callable[[Any], dict[str, str | None]] | None = None
    rows: Callable[[Any], str] = per_head_seq
    variant_shape: Callable[[Any], list[str]] | None = None
    variant_meanings: Callable[[Any], dict[str, str]] | None = None
    says: Callable[[str], str | None] | None = None

    def formulas(self, cfg: KernelConfig) -> dict[str, str | None]:
        """Each params field of ``cfg``'s variant (a window's aside) as a formula."""
        if self.params is not None:
            return self.params(cfg)
        own: dict[str, str | None] = {"count": f"batch * kv_heads * {self.rows(cfg)}"}
        return own | {k: k for k in self.meanings if k != "count"}

    def shape_of(self, cfg: KernelConfig) -> list[str]:
        """``cfg``'s variant's own shape variables (a page table's, rotary's, window's aside)."""
        return list(self.shape) if self.variant_shape is None else self.variant_shape(cfg)

    def meanings_of(self, cfg: KernelConfig) -> dict[str, str]:
        """What each params field of ``cfg``'s variant means (a window's aside)."""
        return dict(self.meanings) if self.variant_meanings is None else self.variant_meanings(cfg)


PER_CHANNEL = (
    "1: k_scale and v_scale (packed: kv_scale's (k, v) pairs) hold one scale per channel "
    "(kv_heads × head_dim); 0: one scale each"
)
TABLE_ENTRIES = "entries of each sequence's row of page_table"


def count_only(rows: str) -> Callable[[Any], dict[str, str | None]]:
    """The params of a mode whose only field, ``count``, is the shape variable ``rows``."""
    return lambda cfg: {"count": rows}


def region_rows(cfg: Any) -> str:
    """The rows a pass owns per head: the new tokens' (append) or the whole cache's."""
    return "keySeq" if cfg.region.value == "append" else "seq"


def table_field(cfg: Any) -> dict[str, str | None]:
    """``maxPages`` where the variant addresses pages through a page table."""
    return {"maxPages": "maxPages"} if cfg.addressing.value == "page_table" else {}


def present(rows: str, width: int) -> Sizes:
    return {"present_key": (rows, width), "present_value": (rows, width)}


def rotary(cfg: Any) -> Sizes:
    """cos_cache and sin_cache: the config's rotated pairs per row (``half``: ``rotary_half``, or
    ``head_dim / 2`` where it is unset) f32 per position; the packed ``rotary_table``
    (:class:`~kvdsl.kernels.config.Bindings`): both, ``2 * half`` f32 per position (its ``half``
    cos values, then its ``half`` sin values)."""
    half = rotary_pairs(cfg.head_dim, cfg.rotary_half)
    return {
        "cos_cache": ("positions", half),
        "sin_cache": ("positions", half),
        ROTARY_TABLE: ("positions", 2 * half),
    }


def row_sources(cfg: RowConfig) -> Sizes:
    """The bindings a row mode (build, build_quant, append_quant) may have but the present."""
    scales = f"perChannel * {cfg.hidden - 1} + 1"  # one scale per channel, or one
    return {
        "src_k": ("batch * seq", cfg.hidden),
        "src_v": ("batch * seq", cfg.hidden),
        "seqlens_k": ("batch", 1),
        "k_norm_weight": ("1", cfg.head_dim),
        "k_scale": (scales, 1),
        "v_scale": (scales, 1),
        KV_SCALE: (scales, 2),  # packed: (k, v) per entry
    } | rotary(cfg)


def quant_row_words(cfg: QuantConfig) -> int:
    """Stored words per token of a quantised cache (all heads)."""
    return cfg.kv_heads * cfg.packed


def dense_cache(
    rows: str, cfg: DenseConfig, heads: int, cache: tuple[str, ...], scales: str
) -> Sizes:
    """A dense cache of ``rows`` rows of ``heads`` heads: ``ROW_WORDS`` u32 words per (token,
    head) and, with side scales, the ``scales`` binding's ``2 * stats`` f32 per (token, head),
    K's then V's."""
    fmt = cfg.fmt
    out = {name: (rows, heads * fmt.row_words(cfg.head_dim, cfg.inline)) for name in cache}
    if not cfg.inline:
        out[scales] = (rows, heads * 2 * fmt.stats)
    return out


def pool_pages(
    cfg: PagedConfig, rows: str, names: tuple[str, str], combined: str, scales: str
) -> Sizes:
    """A paged pool's bindings: ``rows`` pages of ``page_values`` host values (K's, V's or, in
    a combined pool, both) and, with side scales, of the scale pages' f32."""
    out = {name: (rows, cfg.page_values) for name in (*names, combined)}
    sides = cfg.scale_geometry
    return out | ({} if sides is None else {scales: (rows, sides.stride)})


def family(
    modes: tuple[str, ...],
    shapes: Mapping[str, tuple[str, ...]],
    meanings: Mapping[str, Mapping[str, str]],
    sizes: Callable[[Any], Sizes],
    params: Callable[[Any], dict[str, str | None]],
    variant_shape: Callable[[Any], list[str]],
    says: Callable[[str], str | None],
    variant_meanings: Callable[[Any], dict[str, str]] | None = None,
) -> dict[str, Contract]:
    """The contracts of a family of modes whose module states them as functions of a config
    (:mod:`kvdsl.contract.attend`, :mod:`kvdsl.contract.kivi`): each mode's shape variables and
    meanings from the family's tables, the rest the family's functions."""
    own = dict(sizes=sizes, params=params, variant_shape=variant_shape, says=says)
    return {
        m: Contract(shape=shapes[m], meanings=meanings[m], variant_meanings=variant_meanings, **own)
        for m in modes
    }
