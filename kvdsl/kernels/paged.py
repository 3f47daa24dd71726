"""Paged KV caches (:mod:`kvdsl.nodes.paged`): the paged modes' configs (page geometry, the
rows' format, addressing), their pool bindings and sizes and ``index.json``'s page fields.
:mod:`kvdsl.kernels.paged_append` writes new tokens into pages,
:mod:`kvdsl.kernels.paged_read` gathers rows back from them, :mod:`kvdsl.kernels.paged_pages`
copies, compacts and slides them.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import Any

from kvdsl.ir import Buffer, KernelBuilder, f32, largest, u32
from kvdsl.ir.ops import Op
from kvdsl.ir.tree import Binary
from kvdsl.kernels.config import (
    FLOATS,
    MAX_STORAGE_BUFFERS,
    MAX_WORKGROUP,
    CacheConfig,
    Element,
    choice,
    multiple_of,
    require,
)
from kvdsl.kernels.extents import ceil_div, emax, plus, times
from kvdsl.kernels.config import format_choice
from kvdsl.kernels.plan import require_whole_rows, rows_workgroup
from kvdsl.kernels.rows import Transforms
from kvdsl.kernels.dense import QUANTISE_WORKGROUP, require_rows_fit
from kvdsl.kernels.dense_fields import ScalePlace, Scales, require_format, require_rotation
from kvdsl.nodes import formats, paged, words
from kvdsl.nodes.quantise import Quantiser, row_lanes
from kvdsl.nodes.paged import PAGE_SIZES, Addressing, PagedRows, PageLayout, Pool

#: The pool bindings: K's and V's, or the combined one; a dense format's side scales.
POOLS, COMBINED_POOL, SCALE_POOL = ("key_pages", "value_pages"), "kv_pages", "scale_pages"
LANES = ("x", "y", "z", "w")


#: How a row is stored in a page: f32 or f16 values, or a built-in dense format
#: (:data:`kvdsl.nodes.formats.FORMATS`) with its scales in the kernel; a config's ``format``
#: also takes any :class:`kvdsl.nodes.formats.Format` value.
PagedFormat = StrEnum(
    "PagedFormat", {"F32": "f32", "F16": "f16"} | {n.upper(): n for n in formats.FORMATS}
)


FLOAT_FORMATS = (PagedFormat.F32, PagedFormat.F16)
#: The workgroup size of ``paged_append`` with K RMSNorm when a config leaves it unset (whole
#: rows in a workgroup; smaller workgroups keep more barriers in flight).
KNORM_WORKGROUP = 128


@dataclass(frozen=True)
class PageFields:
    """The page fields of a config over pages (a mixin of ``paged_*``'s and ``paged_qkv``'s):
    tokens per page, the order inside a page, K's and V's pools."""

    _: KW_ONLY
    page_size: int = 16
    page_layout: PageLayout = choice(PageLayout.NHD)
    pool: Pool = choice(Pool.SEPARATE)

    def check_pages(self, fmt: formats.Format | None) -> None:
        """The page fields, and the separate pools a dense format ``fmt`` is stored in."""
        require_page_size(self.page_size)
        if fmt is not None:
            require(
                self.pool is Pool.SEPARATE,
                "pool",
                self.pool.value,
                f"'separate' for format {fmt.name!r} (the quantiser stores K and V at one index"
                " of two bindings)",
            )


@dataclass(frozen=True)
class PagedConfig(PagedRows, PageFields, Scales, CacheConfig):
    """The fields of the paged modes: the pages' geometry and the rows' format (a dense
    format's scales inline or in a side pool of the same pages)."""

    _: KW_ONLY
    format: PagedFormat = format_choice(PagedFormat.F32)
    scales: ScalePlace = choice(ScalePlace.INLINE)

    def check_fields(self) -> None:
        fmt = self.dense
        self.check_pages(fmt)
        if fmt is None:
            require(
                self.inline,
                "scales",
                self.scales.value,
                f"'inline' for format {self.format.value!r} (f32 and f16 rows have no scales)",
            )
        else:
            require_format(fmt, self.scales, self.head_dim)
        multiple_of("head_dim", self.head_dim, 4, " for the paged modes (a row moves as vec4)")
        self.refuse_window("a paged pool is bound whole; its pages are the window")

    @property
    def per_row(self) -> int:
        """Vectors (``vec4``) per row."""
        return self.head_dim // 4

    @property
    def dense(self) -> formats.Format | None:
        """The dense format's value, None for f32 and f16 rows."""
        return None if self.format in FLOAT_FORMATS else formats.format_of(self.format)

    @property
    def unit(self) -> int:
        """Host values per unit of a pool binding: 4 (a ``vec4`` of f32 or f16) or 1 (a u32
        word of a dense format)."""
        return 1 if self.dense is not None else 4

    @property
    def row_units(self) -> int:
        """Units of one row in a pool binding: ``vec4`` values, or a dense row's words."""
        fmt = self.dense
        return self.per_row if fmt is None else fmt.row_words(self.head_dim, self.inline)

    @property
    def side_words(self) -> int:
        """f32 words of one row's K and V side scales (0 inline, and for f32 and f16 rows)."""
        fmt = self.dense
        return 0 if fmt is None else 2 * fmt.side_words(self.inline)

    @property
    def page_values(self) -> int:
        """Host values between pages of a pool binding (K and V of a page in a combined pool):
        elements, or a dense format's u32 words."""
        return self.geometry.stride * self.unit

    @property
    def element(self) -> Element:
        """The pool binding's host type: f32, f16, or u32 words."""
        return Element.U32 if self.dense is not None else Element(self.format.value)

    def default_workgroup_size(self) -> int:
        return rows_workgroup(MAX_WORKGROUP, self.per_row)


@dataclass(frozen=True)
class PagedAppendConfig(Transforms, PagedConfig):
    """A ``paged_append`` variant: pages, addressing, K RMSNorm, rotary (the first ``2 *
    rotary_half`` elements of a row, or the whole head), input type."""

    addressing: Addressing = choice(Addressing.SLOT_MAPPING)
    # K rotated by the signed Walsh-Hadamard matrix over blocks of this many dimensions after
    # its norm and rotary, before a dense format quantises it (as dense_append's rotation);
    # 0: not rotated (and 0 for a format with its own rotation, ort_q4, which rotates K and V).
    rotation: int = 0
    mode = "paged_append"

    def check_fields(self) -> None:
        super().check_fields()
        self.check_transforms(norm=False)
        plain = "f32 and f16 pages are stored as they are"
        require_rotation(self.dense, self.rotation, self.head_dim, plain)
        self._require_bindings()

    def _require_bindings(self) -> None:
        """At most WebGPU's default 8 storage buffers; the error names the field to change."""
        n = _append_bindings(self)
        if n <= MAX_STORAGE_BUFFERS:
            return
        past = f"{n} storage buffers, past WebGPU's default {MAX_STORAGE_BUFFERS}"
        if self.dense is None:
            require(False, "pool", self.pool.value, f"'combined' with k_norm and rotary ({past})")
        if not self.inline and n - 1 <= MAX_STORAGE_BUFFERS:
            why = "rotary" if self.rotary else "k_norm"
            require(False, "scales", self.scales.value, f"'inline' with {why} here ({past})")
        require(
            False,
            "k_norm",
            self.k_norm,
            f"false with rotary for format {self.format.value!r} (its K and V pools are"
            f" separate: {past})",
        )

    @property
    def quantiser(self) -> Quantiser | None:
        """The dense quantiser's row program for this config, None for f32 and f16 rows."""
        fmt = self.dense
        if fmt is None:
            return None
        return Quantiser(fmt, self.inline, self.head_dim, self.workgroup_size)

    @property
    def row_lanes(self) -> int:
        """Invocations per row: a dense format's lanes (:func:`kvdsl.nodes.quantise.row_lanes`),
        else one per ``vec4``."""
        fmt = self.dense
        return self.per_row if fmt is None else row_lanes(fmt, self.head_dim)

    def default_workgroup_size(self) -> int:
        size = QUANTISE_WORKGROUP if self.dense is not None else KNORM_WORKGROUP
        if self.k_norm or self.dense is not None:
            return rows_workgroup(size, self.row_lanes)
        return super().default_workgroup_size()

    def check_schedule(self) -> None:
        if self.k_norm or self.dense is not None:
            what = "invocations of a row with k_norm or a dense format"
            require_whole_rows(self.workgroup_size, self.row_lanes, what)
        if self.dense is not None:
            require_rows_fit(self.quantiser, self.k_norm, self.rotation)


def require_page_size(page_size: Any) -> None:
    """Refuse a ``page_size`` that is not a power of two from 16 to 256."""
    ok = isinstance(page_size, int) and not isinstance(page_size, bool)
    require(
        ok and page_size in PAGE_SIZES,
        "page_size",
        page_size,
        "a power of two from 16 to 256 (tokens per page)",
    )


def _append_bindings(cfg: PagedAppendConfig) -> int:
    """The storage bindings of a ``paged_append`` kernel."""
    address = 2 if cfg.addressing is Addressing.PAGE_TABLE or cfg.rotary else 1
    pools = 1 if cfg.pool is Pool.COMBINED else 2
    side = cfg.scale_geometry is not None
    return 2 + address + cfg.k_norm + 2 * cfg.rotary + pools + side


@dataclass(frozen=True)
class PagedReadConfig(PagedConfig):
    """A ``paged_read`` variant: pages, addressing, the rows' element type (f16 rows travel as
    ``vec2<u32>`` words)."""

    addressing: Addressing = choice(Addressing.PAGE_TABLE)
    output_type: Element = choice(Element.F32, FLOATS)
    mode = "paged_read"

    def check_fields(self) -> None:
        super().check_fields()


def pool_bindings(
    kb: KernelBuilder, cfg: PagedConfig, access: str, names: tuple[str, str] = POOLS,
    combined: str = COMBINED_POOL,
) -> tuple[Buffer, Buffer]:  # fmt: skip
    """K's and V's pool bindings (one binding twice for a combined pool): ``vec4`` of f32 or
    f16 (as ``vec2<u32>``), or a dense format's u32 words."""
    if cfg.dense is not None:
        k, v = (kb.binding(n, u32, access) for n in names)
        return k, v  # the quantiser's stores declare theirs (paged_append: cache_binding)
    ty = cfg.element.scalar
    if cfg.pool is Pool.COMBINED:
        kv = words.binding(kb, combined, ty, 4, access)
        return kv, kv
    k, v = words.bindings(kb, names, ty, 4, access)
    return k, v


def scale_binding(kb: KernelBuilder, cfg: PagedConfig, access: str, name: str = SCALE_POOL):
    """The side scales' pool binding (f32), None where the scales are inline."""
    return None if cfg.scale_geometry is None else kb.binding(name, f32, access)


def addressing_extents(
    cfg: Any, batch: Any, key_seq: Any, max_pages: Any, least: Any
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """An append's addressing inputs: their least binding sizes (``seqlens_k`` and
    ``page_table``, or ``slot_mapping`` and, with rotary, ``token_positions``), what the page
    table requires of ``seqlens_k``, and the positions the rotary table must hold (at least
    ``least``)."""
    extents: dict[str, Any] = {}
    requires: dict[str, Any] = {}
    if cfg.addressing is Addressing.PAGE_TABLE:
        extents |= {"seqlens_k": batch, "page_table": times(batch, max_pages)}
        fits = Binary(Op.LE, plus(largest("seqlens_k"), 1), times(max_pages, cfg.page_size))
        requires["seqlens_k.max + 1 <= maxPages * page_size"] = fits
        return extents, requires, emax(plus(largest("seqlens_k"), 1), least)
    extents["slot_mapping"] = times(batch, key_seq)
    if cfg.rotary:
        extents["token_positions"] = times(batch, key_seq)
    return extents, requires, emax(plus(largest("token_positions"), 1), 1)


def pool_extents(
    cfg: PagedConfig, pages: Any, names: tuple[str, str] = POOLS, combined: str = COMBINED_POOL,
    scales: str = SCALE_POOL,
) -> dict[str, Any]:  # fmt: skip
    """The pool bindings' least host values for ``pages`` pages (side scales included)."""
    out = {combined: times(pages, cfg.page_values)} if cfg.pool is Pool.COMBINED else {}
    if not out:
        out = {name: times(pages, cfg.page_values) for name in names}
    if cfg.scale_geometry is not None:
        out[scales] = times(pages, cfg.scale_geometry.stride)
    return out


def scale_pages(pages: paged.Pages, cfg: PagedConfig) -> paged.Pages | None:
    """The side scales' pages beside the pool's ``pages`` (their sizes as integers)."""
    g = cfg.scale_geometry
    return None if g is None else paged.Pages(g, pages.size, g.page_units, g.stride)


def pages_named(cfg: PagedConfig, addressing: Addressing) -> Any:
    """The pages a table or slot mapping reaches: one past its largest page id."""
    if addressing is Addressing.PAGE_TABLE:
        return emax(plus(largest("page_table"), 1), 0)
    return ceil_div(plus(largest("slot_mapping"), 1), cfg.page_size)


def page_fields(cfg: Any) -> dict[str, Any]:
    """The fields a paged variant's ``index.json`` entry adds: ``pages``, the page geometry
    (tokens per page, the order inside a page, the pools, the host values and bytes of one
    page of K or V, the pool bindings' page stride in host values, and the f32 values of one
    page of ``scale_pages``, 0 without side scales); nothing for other configs."""
    if not isinstance(cfg, PagedConfig):
        return {}
    g, sides = cfg.geometry, cfg.scale_geometry
    values = g.page_units * cfg.unit
    return {
        "pages": {
            "page_size": cfg.page_size,
            "layout": cfg.page_layout.value,
            "pool": cfg.pool.value,
            "page_values": values,
            "page_bytes": values * cfg.element.scalar.size,
            "page_stride_values": cfg.page_values,
            "scale_page_values": 0 if sides is None else sides.stride,
        }
    }
