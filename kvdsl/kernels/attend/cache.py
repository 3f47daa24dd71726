"""The cache as :func:`~kvdsl.kernels.attend.kernel.attend` reads it: its bindings, where a key's
row starts (:class:`Row`), and its values as ``vec4<f32>`` lanes, from one of three kinds of rows:

- :class:`FloatRows`: f32 or f16 in 16-byte units (a ``vec4<f32>``, or eight halves as
  ``vec4<u32>`` words; four halves as ``vec2<u32>`` where ``head_dim`` is not a multiple of 8);
- :class:`FormatRows`: a format's ``ROW_WORDS`` u32 words (:mod:`kvdsl.nodes.formats`), decoded
  in registers four values at a time by the format's own
  :meth:`~kvdsl.nodes.formats.Format.decode4`, its scales inline or in a side binding;
- :class:`TemplateRows`: the template's int8 (one i32 a value, as ``vec4<i32>``) or int4 (two
  nibbles a u32 word, low first, ``q + 8``), whose scales (per channel or per tensor, in
  ``kv_scale``) are the same for every key: K's multiply the queries once, V's the output.

KIVI's cache, whose K is stored per channel across the keys, is the fourth kind
(:class:`kvdsl.kernels.attend.kivi.KiviRows`, declared by :func:`kvdsl.kernels.attend.kivi.declare`).

The bindings are the writers' layouts: ``key`` and ``value`` rows ``((b * kvHeads + hk) * seq +
t)`` of a contiguous cache, as ``dense_append``, ``qkv`` and ``append_quant`` write them, with
``scales`` holding ``dense_append``'s ``present_scales`` (per row K's scale words then V's); or
``paged_append``'s pools (``key_pages`` and ``value_pages``, or ``kv_pages``) and
``scale_pages`` (per row K's then V's, in pages of the pool's layout).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Op,
    Val,
    construct,
    convert,
    f32,
    i32,
    largest,
    lit,
    max_,
    select,
    u32,
    vec,
)
from kvdsl.ir.tree import Binary, Call, Lit
from kvdsl.kernels.attend.config import ROW_LOADS, V4, AttendConfig, CacheLayout
from kvdsl.kernels.config import KV_SCALE
from kvdsl.kernels.extents import emax, node, plus, times
from kvdsl.nodes import paged, words
from kvdsl.nodes.formats import Format
from kvdsl.nodes.paged import Pool
from kvdsl.nodes.words import splat


@dataclass(frozen=True)
class Row:
    """A cache row: ``base``, its first unit in its binding; ``missing``, true where it is not
    there (a page a sliding window released; None: always there); ``side``, the first f32 of
    its scale words in the side binding (None without side scales); ``key``, its key where the
    reader needs it (KIVI's: :mod:`kvdsl.kernels.attend.kivi`)."""

    base: Val
    missing: Val | None = None
    side: Val | None = None
    key: Val | None = None


class FloatRows:
    """f32 or f16 rows in units of :attr:`AttendConfig.unit` values (:func:`as_f32`)."""

    def __init__(self, cfg: AttendConfig) -> None:
        self.cfg = cfg

    def key_runs(
        self, kb: KernelBuilder, key: Buffer, row: Row, name: str = "k", loads: int = ROW_LOADS
    ) -> Iterator[list]:
        """K's row as runs of ``(vector index, vec4<f32>)``, each run's units loaded back to
        back (at most ``loads``) before its first use; its lets named from ``name``."""
        n_units, per_unit = self.cfg.head_dim // self.cfg.unit, self.cfg.unit // 4
        for lo in range(0, n_units, loads):
            units = range(lo, min(lo + loads, n_units))
            ks = [kb.let(f"{name}{u}", key[row.base + u]) for u in units]
            yield [
                (u * per_unit + h, k4)
                for u, k in zip(units, ks)
                for h, k4 in enumerate(self.lanes(kb, k, f"{name}{u}"))
            ]

    def value_load(self, kb: KernelBuilder, name: str, value: Buffer, row: Row, i: Val) -> Any:
        """Unit ``i`` of V's row, loaded."""
        return kb.let(name, value[row.base + i])

    def value_lanes(self, kb: KernelBuilder, name: str, loaded: Any) -> list[Val]:
        """A loaded unit's ``unit / 4`` vec4s."""
        return self.lanes(kb, loaded, name)

    def lanes(self, kb: KernelBuilder, x: Val, name: str) -> list[Val]:
        """Unit ``x`` as ``vec4<f32>`` lanes (:func:`as_f32`)."""
        return as_f32(kb, x, name)

    def query_scale(self, kb: KernelBuilder, hk: Val, v: Val) -> Val | None:
        """The factor of vector ``v`` of KV head ``hk``'s queries (None: none)."""
        return None

    def output_scale(self, kb: KernelBuilder, hk: Val, v: Val, name: str) -> Val | None:
        """The factor of vector ``v`` of KV head ``hk``'s output rows, named ``name`` (None:
        none)."""
        return None


class TemplateRows(FloatRows):
    """The template's int8 (a unit: ``vec4<i32>``) or int4 (a unit: four or two u32 words of
    two nibbles each) with the ``(k, v)`` scale entries of ``kv_scale``, per channel
    (``hk * HEAD_DIM + d``) or per tensor (entry 0) as ``params.perChannel`` says."""

    def __init__(self, cfg: AttendConfig, scales: Buffer, per_channel: Val) -> None:
        super().__init__(cfg)
        self.scales, self.per_channel = scales, per_channel

    def lanes(self, kb: KernelBuilder, x: Val, name: str) -> list[Val]:
        if self.cfg.template_bits == 8:
            return [convert(V4, x)]
        n = x.ty.n
        lo = kb.let(
            f"{name}Lo", convert(vec(n, f32), x & splat(x.ty, 0xF)) - splat(vec(n, f32), 8.0)
        )
        hi = kb.let(
            f"{name}Hi",
            convert(vec(n, f32), (x >> splat(x.ty, 4)) & splat(x.ty, 0xF))
            - splat(vec(n, f32), 8.0),
        )
        parts = "xyzw"[:n]
        return [
            construct(V4, lo.member(a), hi.member(a), lo.member(b), hi.member(b))
            for a, b in zip(parts[::2], parts[1::2])
        ]

    def _scales(self, kb: KernelBuilder, name: str, hk: Val, v: Val, lane: str) -> Val:
        head_dim = self.cfg.head_dim
        first = kb.let(f"{name}At", select(0, hk * head_dim + v * 4, self.per_channel))
        step = kb.let(f"{name}Step", select(lit(0, u32), lit(1, u32), self.per_channel))
        entries = [self.scales[first + step * n if n else first] for n in range(4)]
        return kb.let(name, construct(V4, *(e.member(lane) for e in entries)))

    def query_scale(self, kb: KernelBuilder, hk: Val, v: Val) -> Val | None:
        return self._scales(kb, "kScale", hk, v, "x")

    def output_scale(self, kb: KernelBuilder, hk: Val, v: Val, name: str) -> Val | None:
        return self._scales(kb, name, hk, v, "y")


def _once(kb: KernelBuilder, buf: Buffer, base: Val, name: str) -> Callable[[Val | int], Val]:
    """``buf[base + w]``: at a place ``w`` known when the kernel is built, loaded once into a let
    named ``name`` and ``w`` (a row's words and scale words, where a format first needs them)."""
    lets: dict[int, Val] = {}

    def load(w: Val | int) -> Val:
        if not isinstance(w, int):
            return buf[base + w]
        if w not in lets:
            lets[w] = kb.let(f"{name}{w}", buf[base + w])
        return lets[w]

    return load


class FormatRows(FloatRows):
    """A format's rows of u32 words (``side``: the side scales' binding, None inline)."""

    def __init__(self, cfg: AttendConfig, fmt: Format, side: Buffer | None) -> None:
        super().__init__(cfg)
        self.fmt, self.side = fmt, side

    def key_runs(
        self, kb: KernelBuilder, key: Buffer, row: Row, name: str = "k", loads: int = ROW_LOADS
    ) -> Iterator[list]:
        """K's row decoded a vec4 at a time, each word and scale word loaded once, where the
        format first needs it (``loads`` vectors a run); its lets named from ``name``."""
        load = _once(kb, key, row.base, f"{name}w")
        stat = _once(kb, self.side, row.side, f"{name}s")
        n = self.cfg.head_dim // 4
        for lo in range(0, n, loads):
            yield [
                (v, self.fmt.decode4(kb, f"{name}{v}", load, 4 * v, stat, self.cfg.inline))
                for v in range(lo, min(lo + loads, n))
            ]

    def value_load(self, kb: KernelBuilder, name: str, value: Buffer, row: Row, i: Val) -> Any:
        """V's row (its base and side scales' named) and unit ``i``, decoded where they are
        used (:meth:`value_lanes`)."""
        side = None if row.side is None else kb.let(f"{name}Side", row.side)
        return value, Row(kb.let(f"{name}Base", row.base), None, side), i

    def value_lanes(self, kb: KernelBuilder, name: str, loaded: Any) -> list[Val]:
        value, row, i = loaded
        unit = self.cfg.unit
        load = _once(kb, value, row.base, f"{name}Word")
        stat = _once(kb, self.side, row.side, f"{name}Stat")
        first = kb.let(f"{name}E", i * unit)
        return [
            self.fmt.decode4(
                kb, f"{name}_{h}", load, first + 4 * h if h else first, stat, self.cfg.inline
            )
            for h in range(unit // 4)
        ]


@dataclass(frozen=True)
class Cache:
    """The cache's bindings (``key`` and ``value``, one binding for a combined pool), its
    :attr:`rows` reader and its bindings' least sizes; :meth:`key_row` and :meth:`value_row`
    find rows."""

    key: Buffer
    value: Buffer
    rows: FloatRows
    find: Any  # (b, hk, j, label) -> Row of K
    stored: Any  # (K's base kept in workgroup memory, key) -> Row of K (paged), or None
    value_shift: Val | None
    stats: int
    extents: dict[str, Any]
    #: The rows a sequence may hold: ``seq`` (contiguous) or ``maxPages × page_size`` (paged),
    #: with its words in the kernel's requirements.
    capacity: tuple[str, Val] | None = None

    def key_row(self, b: Val, hk: Val, j: Val, label: str = "") -> Row:
        """K's row ``j`` of sequence ``b``'s KV head ``hk`` (any lets it needs named with
        ``label``)."""
        return self.find(b, hk, j, label)

    def value_row(self, k_row: Row) -> Row:
        """V's row beside K's row ``k_row``: the same index (the next page of a combined pool),
        its scale words after K's."""
        base = k_row.base if self.value_shift is None else k_row.base + self.value_shift
        side = None if k_row.side is None else k_row.side + self.stats
        return Row(base, k_row.missing, side, k_row.key)


def declare(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
    """Declare the cache's bindings, consts and params; how rows are found."""
    if cfg.cache is CacheLayout.BNSH:
        return _contiguous(kb, cfg, batch)
    return _paged(kb, cfg, batch)


def _elements(kb: KernelBuilder, cfg: AttendConfig, names: tuple[str, ...]) -> tuple[Buffer, ...]:
    """The cache bindings ``names`` of ``cfg``'s element: f32 or f16 units, a format's u32
    words, the template's ``vec4<i32>`` or words of nibbles."""
    if cfg.fmt is not None:
        return tuple(kb.binding(n, u32, "read") for n in names)
    bits = cfg.template_bits
    if bits == 8:
        return tuple(kb.binding(n, vec(4, i32), "read") for n in names)
    if bits == 4:
        return tuple(kb.binding(n, vec(cfg.unit // 2, u32), "read") for n in names)
    return words.bindings(kb, names, cfg.cache_type.scalar, cfg.unit)


def _reader(kb: KernelBuilder, cfg: AttendConfig, side: str) -> FloatRows:
    """The rows' reader, declaring the scales' binding (``side`` names a format's)."""
    if cfg.template_bits is not None:
        scales = kb.binding(KV_SCALE, vec(2, f32), "read")
        return TemplateRows(cfg, scales, kb.param("perChannel").ne(0))
    if cfg.fmt is not None:
        binding = kb.binding(side, f32, "read") if cfg.side_words else None
        return FormatRows(cfg, cfg.fmt, binding)
    return FloatRows(cfg)


def _host_values(cfg: AttendConfig) -> int:
    """Host values of a binding unit: a format's word is one u32; the template's int4 unit
    holds ``unit / 2`` words."""
    if cfg.fmt is not None:
        return 1
    return cfg.unit // 2 if cfg.template_bits == 4 else cfg.unit


def _contiguous(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
    key, value = _elements(kb, cfg, ("key", "value"))
    rows = _reader(kb, cfg, "scales")
    seq = kb.param("seq")
    heads = kb.const("KV_HEADS_CACHE", u32, cfg.kv_heads)
    row_units = cfg.row_units
    if cfg.fmt is not None:
        row_units = kb.const("ROW_WORDS", u32, row_units)
    side = cfg.side_words

    def find(b: Val, hk: Val, j: Val, label: str = "") -> Row:
        r = (b * heads + hk) * seq + j
        return Row(r * row_units, None, r * side if side else None)

    per_row = times(batch, cfg.kv_heads, seq)
    values = times(per_row, cfg.row_units * _host_values(cfg))
    extents: dict[str, Any] = {"key": values, "value": values}
    if side:
        extents["scales"] = times(per_row, side)
    if cfg.template_bits is not None:
        on = Binary(Op.NE, node(kb.param("perChannel")), Lit(0, u32))
        entries = Call(Op.SELECT, (Lit(1, u32), Lit(cfg.kv_heads * cfg.head_dim, u32), on))
        extents[KV_SCALE] = times(entries, 2)
    capacity = ("seq >= seqlens_k.max + 1", seq)
    return Cache(key, value, rows, find, None, None, side // 2, extents, capacity)


def _paged(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
    page_table = kb.binding("page_table", i32, "read")
    if cfg.pool is Pool.COMBINED:
        (key,) = _elements(kb, cfg, ("kv_pages",))
        value = key
    else:
        key, value = _elements(kb, cfg, ("key_pages", "value_pages"))
    rows = _reader(kb, cfg, "scale_pages")
    pages = paged.declare(kb, cfg.geometry)
    max_pages = kb.param("maxPages")
    sides = cfg.scale_geometry
    side_pages = (
        None if sides is None else paged.Pages(sides, pages.size, sides.page_units, sides.stride)
    )

    def find(b: Val, hk: Val, j: Val, label: str = "") -> Row:
        entry = kb.let(f"entry{label}", page_table[b * max_pages + j / pages.size])
        page = max_(entry, 0).to(u32)
        slot = j % pages.size
        side = None if side_pages is None else side_pages.row_base(page, slot, hk)
        return Row(pages.row_base(page, slot, hk), entry < 0, side)

    def stored(base: Val, key: Val | None = None) -> Row:
        """K's row from its base: its side scales at the same row of the scale pages."""
        if side_pages is None:
            return Row(base)
        n = base / cfg.row_units
        if cfg.pool is Pool.COMBINED:
            # n counts K's and V's pages: page p's K rows are n in [2p * PH, (2p + 1) * PH).
            per_page = cfg.page_size * cfg.kv_heads
            n = n - (n / (2 * per_page)) * per_page
        return Row(base, None, n * cfg.side_words)

    pages_used = emax(plus(largest("page_table"), 1), 0)
    pool_values = times(pages_used, cfg.geometry.stride * _host_values(cfg))
    extents: dict[str, Any] = {"page_table": times(batch, max_pages)}
    if cfg.pool is Pool.COMBINED:
        extents["kv_pages"] = pool_values
    else:
        extents |= {n: pool_values for n in ("key_pages", "value_pages")}
    if sides is not None:
        extents["scale_pages"] = times(pages_used, sides.stride)
    shift = pages.units if cfg.pool is Pool.COMBINED else None
    capacity = (f"maxPages * {cfg.page_size} >= seqlens_k.max + 1", max_pages * pages.size)
    return Cache(key, value, rows, find, stored, shift, cfg.side_words // 2, extents, capacity)


def as_f32(kb: KernelBuilder, x: Val, name: str) -> list[Val]:
    """Cache unit ``x`` as ``vec4<f32>`` lanes: itself (f32), or its halves unpacked into lets
    ``name_0`` (and ``name_1`` for eight)."""
    if x.ty == words.WORDS:
        halves = (x.member("xy"), x.member("zw"))
        return [kb.let(f"{name}_{h}", words.as_f32(kb, w)) for h, w in enumerate(halves)]
    if x.ty == words.HALVES:
        return [kb.let(f"{name}_0", words.as_f32(kb, x))]
    return [x]
