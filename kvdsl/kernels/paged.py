"""Paged KV caches (:mod:`kvdsl.nodes.paged`): the paged modes' configs, and ``paged_append``,
which writes new tokens into pages; :mod:`kvdsl.kernels.paged_read` gathers rows back from
them, :mod:`kvdsl.kernels.paged_pages` copies, compacts and slides them.

``paged_append``: new BSH K/V (``src_k``, ``src_v``: ``keySeq`` tokens per batch; token ``(b,
t)`` is token ``b * keySeq + t`` of a slot mapping) go to their pages, K RMS-normed
(``k_norm``) and NeoX-rotated at the token's position (``rotary``), stored as ``format``:
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
and the invocations leave after the barrier, before any store.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from enum import StrEnum

from kvdsl.ir import (
    Buffer,
    Kernel,
    KernelBuilder,
    Val,
    convert,
    f32,
    i32,
    inverse_sqrt,
    max_,
    min_,
    u32,
    vec,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.tree import Binary, Member, Name
from kvdsl.kernels.build import FlatRow, RowInputs, flat_k, flat_k_loads
from kvdsl.kernels.config import (
    FLOATS,
    MAX_STORAGE_BUFFERS,
    MAX_WORKGROUP,
    ROTARY_TABLES,
    CacheConfig,
    Element,
    Model,
    ceil_div,
    choice,
    contract,
    emax,
    flag,
    largest,
    one_of,
    plus,
    require,
    require_rotary,
    times,
)
from kvdsl.kernels.dense import MAX_WORKGROUP_BYTES, QUANTISE_WORKGROUP, ScalePlace
from kvdsl.kernels.dense import _transform_k as transform_k
from kvdsl.nodes import formats, paged, walks, words
from kvdsl.nodes.quantise import Destination, Quantiser, RowPlace, cache_binding, quantise_rows
from kvdsl.nodes.quantise import row_lanes
from kvdsl.nodes.index import bsh, split_rows
from kvdsl.nodes.paged import PAGE_SIZES, Addressing, PageGeometry, PageLayout, Pool
from kvdsl.nodes.rmsnorm import row_sum_of_squares
from kvdsl.nodes.rotary import Rotation, rotate
from kvdsl.nodes.window import total_tokens

#: The pool bindings: K's and V's, or the combined one; a dense format's side scales.
POOLS, COMBINED_POOL, SCALE_POOL = ("key_pages", "value_pages"), "kv_pages", "scale_pages"
LANES = ("x", "y", "z", "w")


class PagedFormat(StrEnum):
    """How a row is stored in a page: f32 or f16 values, or a dense format
    (:data:`kvdsl.nodes.formats.FORMATS`) with its scales in the kernel."""

    F32 = "f32"
    F16 = "f16"
    INT8 = "int8"
    INT4 = "int4"
    INT4_ASYM = "int4_asym"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"


FLOAT_FORMATS = (PagedFormat.F32, PagedFormat.F16)
#: The workgroup size of ``paged_append`` with K RMSNorm when a config leaves it unset (whole
#: rows in a workgroup; smaller workgroups keep more barriers in flight).
KNORM_WORKGROUP = 128


@dataclass(frozen=True)
class PagedConfig(CacheConfig):
    """The fields of the paged modes: the pages' geometry and the rows' format (a dense
    format's scales inline or in a side pool of the same pages)."""

    _: KW_ONLY
    page_size: int = 16
    page_layout: PageLayout = choice(PageLayout.NHD)
    pool: Pool = choice(Pool.SEPARATE)
    format: PagedFormat = choice(PagedFormat.F32)
    scales: ScalePlace = choice(ScalePlace.INLINE)

    def check_fields(self) -> None:
        ok = isinstance(self.page_size, int) and not isinstance(self.page_size, bool)
        require(
            ok and self.page_size in PAGE_SIZES,
            "page_size",
            self.page_size,
            "a power of two from 16 to 256 (tokens per page)",
        )
        one_of("page_layout", self.page_layout, PageLayout)
        one_of("pool", self.pool, Pool)
        one_of("format", self.format, PagedFormat)
        one_of("scales", self.scales, ScalePlace)
        fmt = self.dense
        if fmt is None:
            require(
                self.inline,
                "scales",
                self.scales.value,
                f"'inline' for format {self.format.value!r} (f32 and f16 rows have no scales)",
            )
        else:
            require(
                self.pool is Pool.SEPARATE,
                "pool",
                self.pool.value,
                f"'separate' for format {fmt.name!r} (the quantiser stores K and V at one index"
                " of two bindings)",
            )
            require(
                not (fmt.ggml and not self.inline),
                "scales",
                self.scales.value,
                f"'inline' for {fmt.name} (ggml's f16 scales sit inside its blocks)",
            )
            multiple = fmt.elements_multiple()
            require(
                self.head_dim % multiple == 0,
                "head_dim",
                self.head_dim,
                f"a multiple of {multiple} for format {fmt.name!r}",
            )
        require(
            self.head_dim % 4 == 0,
            "head_dim",
            self.head_dim,
            "a multiple of 4 for the paged modes (a row moves as vec4)",
        )
        require(
            not self.window,
            "window",
            self.window,
            f"false for {self.mode} (a paged pool is bound whole; its pages are the window)",
        )

    @property
    def per_row(self) -> int:
        """Vectors (``vec4``) per row."""
        return self.head_dim // 4

    @property
    def dense(self) -> formats.Format | None:
        """The dense format's node description, None for f32 and f16 rows."""
        return None if self.format in FLOAT_FORMATS else formats.FORMATS[self.format.value]

    @property
    def inline(self) -> bool:
        """Whether a dense row's scale is stored inline (always, for f32 and f16 rows)."""
        return self.scales is ScalePlace.INLINE

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
    def geometry(self) -> PageGeometry:
        """The pages in the pool binding's units."""
        return PageGeometry(
            self.page_size, self.kv_heads, self.row_units, self.page_layout, self.pool
        )

    @property
    def scale_geometry(self) -> PageGeometry | None:
        """The side scales' pages (``scale_pages``: per row K's stats then V's, f32), None
        where the scales are inline."""
        fmt = self.dense
        if fmt is None or self.inline:
            return None
        return PageGeometry(
            self.page_size, self.kv_heads, 2 * fmt.stats, self.page_layout, Pool.SEPARATE
        )

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
        return MAX_WORKGROUP - MAX_WORKGROUP % self.per_row or self.per_row


@dataclass(frozen=True)
class PagedAppendConfig(PagedConfig):
    """A ``paged_append`` variant: pages, addressing, K RMSNorm, rotary, input type."""

    addressing: Addressing = choice(Addressing.SLOT_MAPPING)
    k_norm: bool = False
    rotary: bool = False
    eps: float = 1e-6
    input_type: Element = choice(Element.F32)
    # Taken so that a partial rotary is refused by name; never published (always unset).
    rotary_half: int | None = None
    mode = "paged_append"
    KEYS = (  # fmt: skip
        "kv_heads", "head_dim", "page_size", "page_layout", "pool", "addressing", "format",
        "scales", "k_norm", "rotary", "rotary_half", "eps", "input_type", "workgroup_size", "fold",
    )

    def check_fields(self) -> None:
        super().check_fields()
        one_of("addressing", self.addressing, Addressing)
        flag("k_norm", self.k_norm)
        require_rotary(self.rotary, self.head_dim)
        require(
            self.rotary_half is None,
            "rotary_half",
            self.rotary_half,
            "unset (None): paged_append rotates the whole head",
        )
        if self.rotary:
            require(
                self.head_dim % 8 == 0,
                "head_dim",
                self.head_dim,
                "a multiple of 8 with rotary (a vec4 lies in one half of the row)",
            )
        one_of("input_type", self.input_type, FLOATS)
        self._require_bindings()
        if self.k_norm:
            _require_eps(self.eps)

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
        lanes = self.row_lanes
        if self.k_norm or self.dense is not None:
            return size - size % lanes or lanes
        return super().default_workgroup_size()

    def check_schedule(self) -> None:
        lanes = self.row_lanes
        if self.k_norm or self.dense is not None:
            require(
                self.workgroup_size % lanes == 0,
                "workgroup_size",
                self.workgroup_size,
                f"a multiple of the {lanes} invocations of a row with k_norm or a dense format"
                " (rows are reduced whole inside a workgroup)",
            )
        if self.dense is not None:
            need = self.quantiser.workgroup_bytes() + 4 * self.workgroup_size * self.k_norm
            require(
                need <= MAX_WORKGROUP_BYTES,
                "workgroup_size",
                self.workgroup_size,
                f"one whose rows fit WebGPU's {MAX_WORKGROUP_BYTES} bytes of workgroup memory",
            )


def _require_eps(eps: Any) -> None:
    ok = isinstance(eps, (int, float)) and not isinstance(eps, bool)
    ok = ok and 2.0**-126 <= eps <= 3.4e38
    require(ok, "eps", eps, "a number > 0 that is a normal f32 (1.2e-38 .. 3.4e38)")


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
    output_type: Element = choice(Element.F32)
    mode = "paged_read"
    KEYS = (  # fmt: skip
        "kv_heads", "head_dim", "page_size", "page_layout", "pool", "addressing", "format",
        "scales", "output_type", "workgroup_size", "fold",
    )

    def check_fields(self) -> None:
        super().check_fields()
        one_of("addressing", self.addressing, Addressing)
        one_of("output_type", self.output_type, FLOATS)


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


def _inputs(kb: KernelBuilder, cfg: PagedAppendConfig) -> dict[str, Buffer | None]:
    """``paged_append``'s input bindings, in order: the sources, the addressing's, the K-norm
    weight and the rotary tables (None where the config has none)."""
    table = cfg.addressing is Addressing.PAGE_TABLE
    ins: dict[str, Buffer | None] = dict.fromkeys(
        ("seqlens_k", "page_table", "slot_mapping", "token_positions", "k_norm_weight")
    )
    ins["src_k"], ins["src_v"] = words.bindings(kb, ("src_k", "src_v"), cfg.input_type.scalar, 4)
    if table:
        ins["seqlens_k"] = kb.binding("seqlens_k", i32, "read")
        ins["page_table"] = kb.binding("page_table", i32, "read")
    else:
        ins["slot_mapping"] = kb.binding("slot_mapping", i32, "read")
        if cfg.rotary:
            ins["token_positions"] = kb.binding("token_positions", i32, "read")
    if cfg.k_norm:
        ins["k_norm_weight"] = words.binding(kb, "k_norm_weight", f32, 4)
    ins["cos_cache"] = ins["sin_cache"] = None
    if cfg.rotary:
        ins["cos_cache"], ins["sin_cache"] = words.bindings(kb, ROTARY_TABLES, f32, 4)
    return ins


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
    """Row ``row`` of the new tokens (BNSH order) and where it sits in its sequence."""
    heads = walks.named(kb, "KV_HEADS", 1)
    b, hk, t = split_rows(kb, row, heads, key_seq)
    hidden, per_row = walks.named(kb, "KV_HIDDEN", 4), walks.named(kb, "HEAD_DIM", 4)
    src_base = kb.let("srcBase", bsh(b, t, hk, key_seq, hidden, per_row))
    token = kb.let("token", b * key_seq + t)
    pos = past = late = None
    if cfg.addressing is Addressing.PAGE_TABLE:
        total = total_tokens(kb, ins["seqlens_k"], b)
        fresh = kb.let("fresh", min_(key_seq, total))
        # fresh <= total: no wrap.
        past = kb.let("past", total - fresh)
        kb.comment("Tokens t >= fresh are right padding, skipped; the position is clamped into")
        kb.comment("the sequence so that every load stays in range.")
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


def paged_append(cfg: PagedAppendConfig, name: str = "paged_append") -> Kernel:
    """Build the ``paged_append`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    ins = _inputs(kb, cfg)
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
    half = kb.const("HALF_V4", u32, cfg.head_dim // 8) if cfg.rotary else None
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.k_norm else None
    pages = paged.declare(kb, cfg.geometry)
    count, key_seq = kb.param("count"), kb.param("keySeq")
    table = cfg.addressing is Addressing.PAGE_TABLE
    if table:
        kb.param("maxPages")
    src_k, src_v, weight = ins["src_k"], ins["src_v"], ins["k_norm_weight"]
    cos, sin = ins["cos_cache"], ins["sin_cache"]

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
        if cfg.k_norm or cfg.rotary:
            inv_rms = None
            if cfg.k_norm:
                kb.comment("K RMSNorm: the row's sum of squares, reduced in workgroup memory.")
                ms = row_sum_of_squares(kb, tuple(k), it.d, lanes, cfg.workgroup_size, q.lanes)
                inv_rms = kb.let("invRms", inverse_sqrt(ms / convert(f32, head_dim) + eps))
            rot = Rotation(cos, sin, tok.pos, half) if cfg.rotary else None
            k = transform_k(kb, k, (src_k, tok.src_base, q), weight, rot, inv_rms, it.d)
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
            row = FlatRow(it, tok.b, tok.hk, tok.t, tok.src_base, per_row, half, None, k_own)
            inputs = RowInputs(src_k, src_v, ins["seqlens_k"], weight, cos, sin)
            loads = flat_k_loads(kb, row, inputs, lambda: tok.pos)
            v = kb.let("v", src_v[tok.src_base + it.d])
            kb.comment("K RMSNorm: the row's sum of squares, reduced in workgroup memory.")
            ms = row_sum_of_squares(kb, k_own, it.d, per_row, cfg.workgroup_size, cfg.per_row)
            inv_rms = kb.let("invRms", inverse_sqrt(ms / convert(f32, head_dim) + eps))
            k = flat_k(kb, row, loads, inv_rms)
            kb.leave_if(done if tok.late is None else done.lor(tok.late))
        else:
            if cfg.rotary:
                rot = Rotation(cos, sin, tok.pos, half)
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
    return walks.vector_extents(contract(kernel, *_append_contract(cfg, count, key_seq)))


def _append_contract(cfg: PagedAppendConfig, count: Val, key_seq: Val) -> tuple[dict, dict]:
    """``paged_append``'s least binding sizes and requirements."""
    table = cfg.addressing is Addressing.PAGE_TABLE
    batch = ceil_div(count, cfg.kv_heads * key_seq)
    src = times(batch, key_seq, cfg.hidden)
    extents: dict[str, Any] = {"src_k": src, "src_v": src}
    requires: dict[str, Any] = {"keySeq >= 1": key_seq >= 1}
    if table:
        max_pages = Member(Name("params"), "maxPages")
        extents |= {"seqlens_k": batch, "page_table": times(batch, max_pages)}
        fits = Binary(Op.LE, plus(largest("seqlens_k"), 1), times(max_pages, cfg.page_size))
        requires["seqlens_k.max + 1 <= maxPages * page_size"] = fits
        positions = emax(plus(largest("seqlens_k"), 1), 1)
    else:
        extents["slot_mapping"] = times(batch, key_seq)
        positions = emax(plus(largest("token_positions"), 1), 1)
        if cfg.rotary:
            extents["token_positions"] = times(batch, key_seq)
    if cfg.k_norm:
        extents["k_norm_weight"] = cfg.head_dim
    if cfg.rotary:
        extents |= {t_: times(positions, cfg.head_dim // 2) for t_ in ROTARY_TABLES}
    extents |= pool_extents(cfg, pages_named(cfg, cfg.addressing))
    return extents, requires


def _f32x4(kb: KernelBuilder, x: Val) -> Val:
    """``x`` in f32 lanes (itself when it already is)."""
    return x if x.ty == vec(4, f32) else words.as_f32(kb, x)


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


def catalog_variants(models: dict[str, Model]) -> dict[str, PagedConfig]:
    """Named paged appends and reads at Llama-3.1-8B's shape (8 × 128): page sizes 16 and 64,
    NHD and HND, separate and combined pools, both addressings, f32 and f16 pools, the dense
    formats (scales inline and in scale_pages), rotary and (Qwen3's shape) K RMSNorm."""
    llama, qwen3 = models["llama31_8b"].shape, models["qwen3_06b"].shape
    f16 = {"format": PagedFormat.F16}
    v: dict[str, PagedConfig] = {}
    for size in (16, 64):
        for lay in PageLayout:
            tag = f"p{size}_{lay.value}"
            geo = {"page_size": size, "page_layout": lay}
            for a in Addressing:
                at = {"addressing": a}
                v[f"paged_append_{a.value}_{tag}_llama31_8b"] = PagedAppendConfig(
                    **llama, **geo, **at
                )
                v[f"paged_read_{a.value}_{tag}_llama31_8b"] = PagedReadConfig(**llama, **geo, **at)
            v[f"paged_append_rotary_f16_{tag}_llama31_8b"] = PagedAppendConfig(
                **llama, **geo, rotary=True, **f16
            )
    tvm = {"page_size": 16, "page_layout": PageLayout.HND, "pool": Pool.COMBINED}
    v["paged_append_rotary_tvm_f16_llama31_8b"] = PagedAppendConfig(
        **llama, **tvm, rotary=True, **f16
    )
    v["paged_read_tvm_f16_llama31_8b"] = PagedReadConfig(
        **llama, **tvm, **f16, output_type=Element.F16
    )
    v["paged_append_page_table_rotary_p64_hnd_llama31_8b"] = PagedAppendConfig(
        **llama, page_size=64, page_layout=PageLayout.HND, addressing=Addressing.PAGE_TABLE,
        rotary=True,
    )  # fmt: skip
    v["paged_append_knorm_rotary_combined_qwen3_06b"] = PagedAppendConfig(
        **qwen3, pool=Pool.COMBINED, addressing=Addressing.PAGE_TABLE, k_norm=True, rotary=True
    )
    v["paged_append_f16_in_p16_nhd_llama31_8b"] = PagedAppendConfig(
        **llama, input_type=Element.F16, **f16
    )
    # Dense formats in pages, their scales inline or in scale_pages.
    table, side = {"addressing": Addressing.PAGE_TABLE}, {"scales": ScalePlace.SIDE}
    hnd, p64 = {"page_layout": PageLayout.HND}, {"page_size": 64}
    v["paged_append_int8_side_page_table_p16_nhd_llama31_8b"] = PagedAppendConfig(
        **llama, format=PagedFormat.INT8, **side, **table
    )
    v["paged_append_rotary_q4_0_p16_hnd_llama31_8b"] = PagedAppendConfig(
        **llama, format=PagedFormat.Q4_0, rotary=True, **hnd
    )
    v["paged_append_rotary_int4_page_table_p64_nhd_llama31_8b"] = PagedAppendConfig(
        **llama, format=PagedFormat.INT4, rotary=True, **table, **p64
    )
    v["paged_append_rotary_q8_0_page_table_p16_nhd_llama31_8b"] = PagedAppendConfig(
        **llama, format=PagedFormat.Q8_0, rotary=True, **table
    )
    v["paged_append_knorm_int4_asym_side_page_table_qwen3_06b"] = PagedAppendConfig(
        **qwen3, format=PagedFormat.INT4_ASYM, k_norm=True, **side, **table
    )
    v["paged_read_int8_side_page_table_p16_nhd_llama31_8b"] = PagedReadConfig(
        **llama, format=PagedFormat.INT8, **side
    )
    v["paged_read_q8_0_slot_mapping_p16_hnd_llama31_8b"] = PagedReadConfig(
        **llama, format=PagedFormat.Q8_0, addressing=Addressing.SLOT_MAPPING, **hnd
    )
    v["paged_read_int4_asym_side_p64_hnd_f16_llama31_8b"] = PagedReadConfig(
        **llama, format=PagedFormat.INT4_ASYM, **side, **hnd, **p64, output_type=Element.F16
    )
    return v
