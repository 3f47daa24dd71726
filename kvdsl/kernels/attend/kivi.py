"""KIVI's mixed cache as :func:`~kvdsl.kernels.attend.kernel.attend` reads it (``format`` kivi2
or kivi4), in :mod:`kvdsl.kernels.kivi`'s layout, as ``kivi_append`` and ``kivi_flush`` write
it: a sequence's first ``quantised = total - total % GROUP`` keys in groups (a (sequence, KV
head) part of ``kivi_cache``, or of a page of ``kivi_pages`` through ``page_table``, whose
negative entries hide their keys), the rest in the f16 residual.

The scores take :data:`~kvdsl.kernels.attend.config.KIVI_KEYS` consecutive keys a trip
(:meth:`KiviRows.score_trip`), aligned so that they share each channel's code word and stat
word: a quantised trip loads, per channel, one code word and one stat word for them all, and
splits the dot product as ``sum_c (q_c scale_c) code_c + sum_c q_c min_c``, the second term
once for the trip's keys. The values decode a unit of eight channels of a key (one code word,
one stat word, or four residual words). Residual rows are read only for keys below ``total``.
"""

from __future__ import annotations

from typing import Any

from kvdsl.kernels.extents import emax, plus, times
from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Op,
    Val,
    bool_,
    call,
    construct,
    convert,
    f32,
    i32,
    largest,
    max_,
    min_,
    u32,
    unpack2x16float,
)
from kvdsl.kernels.attend.cache import Cache, FloatRows, Row
from kvdsl.kernels.attend.config import KIVI_KEYS, V4, AttendConfig, CacheLayout

from kvdsl.kernels.kivi import PageParts, page_parts
from kvdsl.nodes.words import splat


class KiviRows(FloatRows):
    """KIVI's keys: the quantised groups in ``words`` (``kivi_cache`` or ``kivi_pages``, parts
    ``parts``) and the residual rows; :meth:`sequence` names a workgroup's slice first."""

    def __init__(
        self,
        cfg: AttendConfig,
        residual: tuple[Buffer, Buffer],
        words: Buffer,
        parts: PageParts,
        table: tuple[Buffer, Val] | None,
    ) -> None:
        super().__init__(cfg)
        self.res_k, self.res_v = residual
        self.words, self.parts, self.table = words, parts, table
        self.bits, self.group = cfg.kivi_bits, cfg.kivi_group
        self.per = 32 // cfg.kivi_bits

    def sequence(self, kb: KernelBuilder, b: Val, hk: Val, total: Val) -> None:
        """Name the workgroup's slice of the residual, its keys in groups (``quantised``) and,
        in a contiguous cache, its part of the groups."""
        self.b, self.hk = b, hk
        self.slice = kb.let("slice", b * self.cfg.kv_heads + hk)
        self.quantised = kb.let("quantised", total - total % self.group)
        if self.table is None:
            self.part = kb.let("groupsAt", self.slice * self.parts.head_words)

    def place(self, kb: KernelBuilder, key: Val, label: str) -> tuple[Val, Val, Val | None]:
        """Quantised key ``key``'s part, its index in the part and (paged) its table entry."""
        if self.table is None:
            return self.part, key, None
        table, max_pages = self.table
        entry = kb.let(f"entry{label}", table[self.b * max_pages + key / self.parts.size])
        part = kb.let(
            f"groupsAt{label}", self.parts.base(max_(entry, 0).to(u32), self.hk, self.cfg.kv_heads)
        )
        return part, kb.let(f"at{label}", key % self.parts.size), entry

    def _code(self, word: Val, shift: Val | int) -> Val:
        """The code at bit ``shift`` of ``word``, as f32."""
        return convert(f32, (word >> shift) & ((1 << self.bits) - 1))

    def score_trip(self, kb: KernelBuilder, j: Val, start: Val, end: Val, query) -> list:
        """Score keys ``j .. j + KIVI_KEYS - 1`` (``j`` a multiple of KIVI_KEYS; keys outside
        ``start .. end - 1`` read the nearest key inside, and are not ``has``) against the
        block's queries (``query(r, v)``: vec4 ``v`` of row ``r``): per key, ``(key, has, row,
        sums)`` with ``row`` its part (:class:`Row`: ``base`` the part, ``missing`` where its
        page is released) and ``sums`` the dot products per row."""
        cfg = self.cfg
        rows, d4 = range(cfg.rows), cfg.head_dim // 4
        keys, has = [], []
        for n in range(KIVI_KEYS):
            at = j + n if n else j
            has.append(kb.let(f"has{n}", (at >= start) & (at < end)))
            keys.append(kb.let(f"key{n}", min_(max_(at, start), end - 1)))
        s = [[kb.var(f"s{r}_{n}", f32, 0.0) for r in rows] for n in range(KIVI_KEYS)]
        part = kb.var("kPart", u32, 0) if self.table is not None else None
        missing = kb.var("missing", bool_, False) if self.table is not None else None
        kb.comment("The trip's keys share their code words, stats and page (or are residual).")
        with kb.if_(keys[0] < self.quantised):
            base, at, entry = self.place(kb, keys[0], "K")
            if part is not None:
                part.set(base)
                missing.set(entry < 0)
            size = self.parts.size
            code0 = kb.let("kCode0", base + at / self.per)
            stat0 = kb.let("kStat0", base + self.parts.k_stats + at / self.group)
            shifts = [
                kb.let(f"kShift{n}", key % self.per * self.bits) for n, key in enumerate(keys)
            ]
            bias = [kb.var(f"bias{r}", f32, 0.0) for r in rows]
            with kb.for_range("kv", 0, d4) as v:
                c = kb.let("kc", v * 4)
                words = [
                    kb.let(f"kw{m}", self.words[code0 + (c + m) * (size / self.per)])
                    for m in range(4)
                ]
                stats = [
                    kb.let(
                        f"kst{m}",
                        unpack2x16float(self.words[stat0 + (c + m) * (size / self.group)]),
                    )
                    for m in range(4)
                ]
                scales = kb.let("kScale", construct(V4, *(x.x for x in stats)))
                mins = kb.let("kMin", construct(V4, *(x.y for x in stats)))
                codes = [
                    kb.let(f"kq{n}", construct(V4, *(self._code(w, sh) for w in words)))
                    for n, sh in enumerate(shifts)
                ]
                for r in rows:
                    q4 = kb.let(f"q{r}", query(r, v))
                    qs = kb.let(f"qs{r}", q4 * scales)
                    bias[r].set(bias[r] + call(Op.DOT, q4, mins))
                    for n in range(KIVI_KEYS):
                        s[n][r].set(s[n][r] + call(Op.DOT, qs, codes[n]))
            for r in rows:
                for n in range(KIVI_KEYS):
                    s[n][r].set(s[n][r] + bias[r])
        with kb.else_():
            half = cfg.head_dim // 2
            bases = [
                kb.let(f"kRes{n}", (self.slice * self.group + key % self.group) * half)
                for n, key in enumerate(keys)
            ]
            with kb.for_range("rv", 0, d4) as v:
                ks = [
                    kb.let(
                        f"kr{n}",
                        _halves(kb, f"kh{n}", self.res_k, base + v * 2, 2),
                    )
                    for n, base in enumerate(bases)
                ]
                for r in rows:
                    q4 = kb.let(f"qr{r}", query(r, v))
                    for n in range(KIVI_KEYS):
                        s[n][r].set(s[n][r] + call(Op.DOT, q4, ks[n]))
        return [
            (key, h, Row(part if part is not None else self.slice, missing, None, key), sums)
            for key, h, sums in zip(keys, has, s)
        ]

    def value_load(self, kb: KernelBuilder, name: str, value: Buffer, row: Row, i: Val) -> Any:
        """Unit ``i`` (eight channels) of V's row of key ``row.key``, decoded: from its code
        word and stat word (its part ``row.base`` in a paged cache), or its residual words."""
        key = row.key
        lanes = [kb.var(f"{name}_{h}", V4, splat(V4, 0.0)) for h in range(2)]
        c = kb.let(f"{name}C", i * 8)
        with kb.if_(key < self.quantised):
            if self.table is None:
                base, at = self.part, key
            else:
                base = kb.let(f"{name}Part", row.base)
                at = kb.let(f"{name}At", key % self.parts.size)
            d = self.cfg.head_dim
            code_at = base + self.parts.v_codes + at * (d // self.per) + c / self.per
            word = kb.let(f"{name}Word", self.words[code_at])
            stat_at = base + self.parts.v_stats + at * (d // self.group) + c / self.group
            stat = kb.let(f"{name}Stat", unpack2x16float(self.words[stat_at]))
            shift = kb.let(f"{name}Shift", c % self.per * self.bits)
            for h, lane in enumerate(lanes):
                codes = (self._code(word, shift + (4 * h + m) * self.bits) for m in range(4))
                lane.set(construct(V4, *codes) * stat.x + splat(V4, stat.y))
        with kb.else_():
            half = self.cfg.head_dim // 2
            at = kb.let(f"{name}Res", (self.slice * self.group + key % self.group) * half + c / 2)
            for h, lane in enumerate(lanes):
                lane.set(_halves(kb, f"{name}h{h}", self.res_v, at + 2 * h if h else at, 2))
        return lanes

    def value_lanes(self, kb: KernelBuilder, name: str, loaded: Any) -> list[Val]:
        return list(loaded)


def _halves(kb: KernelBuilder, name: str, buf: Buffer, at: Val, n: int) -> Val:
    """Words ``at .. at + n - 1`` of ``buf`` (f16 pairs, the lower half first) as a vec4 of
    their halves (``n`` 2)."""
    pairs = [kb.let(f"{name}_{w}", unpack2x16float(buf[at + w if w else at])) for w in range(n)]
    return construct(V4, *(x for p in pairs for x in (p.x, p.y)))


def declare(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
    """Declare KIVI's bindings, consts and params; how a key's part is found."""
    residual = tuple(kb.binding(n, u32, "read") for n in ("residual_k", "residual_v"))
    d, g = cfg.head_dim, cfg.kivi_group
    per = 32 // cfg.kivi_bits
    slice_words = times(batch, cfg.kv_heads, g, d // 2)
    extents: dict[str, Any] = {"residual_k": slice_words, "residual_v": slice_words}
    if cfg.cache is CacheLayout.BNSH:
        words = kb.binding("kivi_cache", u32, "read")
        seq = kb.param("seq")
        parts = page_parts(kb, d, cfg.kivi_bits, g, seq)
        rows = KiviRows(cfg, residual, words, parts, None)
        extents["kivi_cache"] = times(batch, seq, cfg.kv_heads * 2 * (d // per + d // g))
        capacity = ("seq >= seqlens_k.max + 1", seq)
    else:
        table = kb.binding("page_table", i32, "read")
        words = kb.binding("kivi_pages", u32, "read")
        max_pages = kb.param("maxPages")
        parts = page_parts(kb, d, cfg.kivi_bits, g, cfg.page_size)
        rows = KiviRows(cfg, residual, words, parts, (table, max_pages))
        head_words = 2 * cfg.page_size * (d // per + d // g)
        pages_used = emax(plus(largest("page_table"), 1), 0)
        extents["page_table"] = times(batch, max_pages)
        extents["kivi_pages"] = times(pages_used, cfg.kv_heads * head_words)
        capacity = (f"maxPages * {cfg.page_size} >= seqlens_k.max + 1", max_pages * parts.size)

    def find(b: Val, hk: Val, j: Val, label: str = "") -> Row:
        return Row(rows.slice, None, None, j)

    def stored(base: Val, key: Val | None = None) -> Row:
        return Row(base, None, None, key)

    return Cache(words, words, rows, find, stored, None, 0, extents, capacity)
