"""The paged layout: a KV cache kept in fixed-size pages of a pool, reached through a table.

**Geometry** (:class:`PageGeometry`). A page holds ``page_size`` tokens (a power of two, 16 to
256) of every KV head. Inside a page a row ``(slot, head)`` of ``row`` units (elements, vectors
or u32 words: whatever the pool binding holds per row) sits at

- ``NHD`` (vLLM, ORT, FlashInfer's default): ``(slot * kvHeads + head) * row``;
- ``HND`` (TVM/MLC, FlashInfer's other): ``(head * pageSize + slot) * row``.

K and V live in two pools (``separate``: ``[pages, page]`` each) or in one (``combined``, TVM's
``[pages, 2, page]``: page ``p``'s K at ``2p``, its V at ``2p + 1`` pages of units). A pool
binding's page stride is :attr:`PageGeometry.stride` units; a row's base is
``page * stride + (V ? page_units : 0) + in-page offset``.

**Addressing** (:class:`Addressing`): how a token finds its page.

- ``slot_mapping`` (vLLM ``reshape_and_cache_flash``, TVM ``position_map``): one i32 per token,
  ``slot = page * pageSize + offset``; a negative slot skips the token (:func:`slot_address`).
- ``page_table`` (FlashInfer, ORT): per sequence a row of ``maxPages`` i32 page ids; the token at
  position ``p`` of sequence ``b`` lives in page ``page_table[b * maxPages + p / pageSize]`` at
  offset ``p % pageSize``; a negative entry is a page that is not there (never allocated, or
  released by a sliding window): its tokens are skipped (:func:`table_address`).

Neither checks a page id against the pool: a host's table that names a page past the pool is an
out-of-bounds access, and two tokens of one dispatch mapped to one slot are a race; the
interpreter reports both (:mod:`kvdsl.interp`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kvdsl.ir import Buffer, KernelBuilder, Val, max_, min_, u32
from kvdsl.nodes.window import total_tokens

#: The page sizes a paged cache may have: powers of two in this range.
PAGE_SIZES = tuple(2**k for k in range(4, 9))


class PageLayout(StrEnum):
    """The order of a page's rows: token-major (``nhd``) or head-major (``hnd``)."""

    NHD = "nhd"
    HND = "hnd"

    def inside(self, slot, head, kv_heads, page_size, row):
        """Row ``(slot, head)``'s first unit inside a page of ``page_size`` tokens of
        ``kv_heads`` rows of ``row`` units: plain integers, or IR values in a kernel."""
        if self is PageLayout.NHD:
            return (slot * kv_heads + head) * row
        return (head * page_size + slot) * row


class Pool(StrEnum):
    """Where K and V pages live: two pools, or one pool of ``[pages, 2, page]``."""

    SEPARATE = "separate"
    COMBINED = "combined"


class Addressing(StrEnum):
    """How a token finds its page: a slot per token, or a page table per sequence."""

    SLOT_MAPPING = "slot_mapping"
    PAGE_TABLE = "page_table"


@dataclass(frozen=True)
class PageGeometry:
    """A pool's pages: ``page_size`` tokens of ``kv_heads`` rows of ``row`` units each, in
    ``layout`` order; ``pool`` says whether K and V share the binding."""

    page_size: int
    kv_heads: int
    row: int
    layout: PageLayout
    pool: Pool

    @property
    def page_units(self) -> int:
        """The units of one page of K (or of V)."""
        return self.page_size * self.kv_heads * self.row

    @property
    def stride(self) -> int:
        """The units between pages of a pool binding (a combined page holds K and V)."""
        return self.page_units * (2 if self.pool is Pool.COMBINED else 1)

    def offset(self, slot: int, head: int) -> int:
        """Row ``(slot, head)``'s first unit inside a page (plain integers)."""
        return self.layout.inside(slot, head, self.kv_heads, self.page_size, self.row)


class PagedRows:
    """A paged pool's shape: a mixin of the configs over one, which declare ``page_size``,
    ``kv_heads``, ``page_layout`` and ``pool`` and give ``row_units`` (a row's units in a pool
    binding) and ``side_words`` (a row's K and V side scales, f32; 0 inline)."""

    page_size: int
    kv_heads: int
    page_layout: PageLayout
    pool: Pool
    row_units: int
    side_words: int

    @property
    def geometry(self) -> PageGeometry:
        """The pages in the pool binding's units."""
        layout, pool = self.page_layout, self.pool
        return PageGeometry(self.page_size, self.kv_heads, self.row_units, layout, pool)

    @property
    def scale_geometry(self) -> PageGeometry | None:
        """The side scales' pages (``scale_pages``: per row K's scale words then V's, f32, in
        pages of the pool's layout, never combined), None without side scales."""
        if self.side_words == 0:
            return None
        layout = self.page_layout
        return PageGeometry(self.page_size, self.kv_heads, self.side_words, layout, Pool.SEPARATE)


@dataclass(frozen=True)
class Pages:
    """A geometry's consts in a kernel: ``PAGE_SIZE``, ``PAGE_UNITS`` and ``PAGE_STRIDE``."""

    geometry: PageGeometry
    size: Val
    units: Val
    stride: Val

    def row_base(self, page: Val, slot: Val, head: Val, value: bool = False) -> Val:
        """The first unit of row ``(slot, head)`` of page ``page`` in its pool binding: K's,
        or with ``value`` V's (in a combined pool, the page's second half)."""
        g = self.geometry
        inside = g.layout.inside(slot, head, g.kv_heads, self.size, g.row)
        base = page * self.stride
        if value and g.pool is Pool.COMBINED:
            base = base + self.units
        return base + inside


def declare(kb: KernelBuilder, geometry: PageGeometry) -> Pages:
    """Declare the geometry's consts in ``kb``."""
    size = kb.const("PAGE_SIZE", u32, geometry.page_size)
    units = kb.const("PAGE_UNITS", u32, geometry.page_units)
    stride = kb.const("PAGE_STRIDE", u32, geometry.stride)
    return Pages(geometry, size, units, stride)


@dataclass(frozen=True)
class Address:
    """Where a token goes: ``page`` and ``slot`` (its offset in the page), and ``skip``, true
    where it has no place (a negative slot or page id)."""

    page: Val
    slot: Val
    skip: Val


def slot_address(kb: KernelBuilder, pages: Pages, slot_mapping: Buffer, token: Val) -> Address:
    """Token ``token``'s place through ``slot_mapping`` (``slot = page * PAGE_SIZE + offset``,
    negative: skipped)."""
    raw = kb.let("slot", slot_mapping[token])
    s = kb.let("slotU", max_(raw, 0).to(u32))
    page = kb.let("page", s / pages.size)
    return Address(page, kb.let("inPage", s % pages.size), raw < 0)


def table_address(
    kb: KernelBuilder, pages: Pages, page_table: Buffer, b: Val, max_pages: Val, pos: Val
) -> Address:
    """Position ``pos`` of sequence ``b`` through its row of ``max_pages`` entries of
    ``page_table`` (a negative entry: skipped)."""
    entry = kb.let("entry", page_table[b * max_pages + pos / pages.size])
    page = kb.let("page", max_(entry, 0).to(u32))
    return Address(page, kb.let("inPage", pos % pages.size), entry < 0)


@dataclass(frozen=True)
class Step:
    """A page-table append's sequence after the step: ``past`` tokens before it, ``fresh``
    new ones (``min(keySeq, seqlens_k[b] + 1)``): new token ``t < fresh`` sits at position
    ``past + t``; tokens ``t >= fresh`` are right padding."""

    past: Val
    fresh: Val


def table_step(kb: KernelBuilder, seqlens_k: Buffer, b: Val, key_seq: Val) -> Step:
    """Sequence ``b``'s step: ``total = seqlens_k[b] + 1`` tokens after it (negative: none),
    the last ``fresh = min(keySeq, total)`` of them new."""
    total = total_tokens(kb, seqlens_k, b)
    fresh = kb.let("fresh", min_(key_seq, total))
    # fresh <= total: no wrap.
    return Step(kb.let("past", total - fresh), fresh)
