"""``attend``: decode attention of the new tokens' queries over a KV cache, split over the keys.

For sequence ``b`` of ``seqlens_k[b] + 1`` cached rows (the new tokens' rows last) and its
``queries`` new tokens, each query head ``h`` reads KV head ``h / GROUP`` and gives
``softmax(scale * q . k) v`` over the keys its token sees (:mod:`kvdsl.reference.attention`
states the meaning: causal inside the new tokens, an optional sliding ``window``, soft-capping,
one sink logit per head).

The cache is contiguous (BNSH ``[batch, kvHeads, seq, headDim]``, ``seq`` its capacity: the
buffer-sharing cache) or paged (:mod:`kvdsl.nodes.paged`: a page table and ``seqlens_k``, NHD
or HND pages, separate or combined pools); a row whose page entry is negative (a page a sliding
window released) is not seen. Q and O are BNSH ``[batch, qHeads, queries, headDim]`` or BSH
``[batch, queries, qHeads * headDim]``, f32 or f16 (carried in u32 words).

Split-K (flash-decoding): the keys are cut into ``chunks`` ranges of ``chunk`` rows (at most
``MAX_CHUNK``); workgroup ``(b, kv head, row block, chunk)`` reads its range once for a block
of at most ``ROWS`` of its KV head's ``GROUP × queries`` query rows, and writes each row's
partial: the unnormalised output ``sum exp(logit - m) v`` and, in one more vector, the maximum
logit ``m`` and the sum ``l`` of ``exp(logit - m)``. With one chunk the kernel writes the
output itself; otherwise :func:`attend_merge` combines the partials in a second dispatch.

Inside a workgroup, in three steps between barriers:

1. *scores*: invocation ``t`` takes keys ``start + t``, ``start + t + WG``, ... and scores each
   against the block's queries (held in workgroup memory), into ``logits[row][key]``; a key's
   row is loaded as straight-line lets (:data:`ROW_LOADS` units back to back) before its dot
   products, so its loads are in flight together; its largest score per row goes to
   ``part[row][t]``;
2. *weights*: every row's maximum is read from ``part``, each invocation turns its keys' logits
   into ``exp(logit - m)`` and its sum per row into ``part``, whose total is ``l``;
3. *values*: invocation ``t`` holds unit ``t % HEAD_UNITS`` of the output of every row of the
   block, over keys ``start + t / HEAD_UNITS`` in steps of ``KEY_GROUPS``, :data:`VALUE_KEYS`
   keys a trip whose value loads are issued first (keys past the end read the last key and
   weigh zero): each value unit is loaded once; the key groups' sums are added in workgroup
   memory at the end.

A unit is 16 bytes: a vec4 of f32, or eight f16 halves as ``vec4<u32>`` words (four halves as
``vec2<u32>`` where ``head_dim`` is not a multiple of 8). In a paged cache each key's row base
is kept in workgroup memory by the scores, so the values read no page table. The latency of
the cache's loads, not their count, bounds a decode: these are what keeps many in flight.

Logits of keys a row does not see are :data:`HIDDEN`, and weigh zero; a value a row does not
weigh is never multiplied in (a released page may hold anything).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import Any

from kvdsl.ir import (
    Buffer,
    Dispatch,
    Kernel,
    KernelBuilder,
    Val,
    array,
    call,
    construct,
    f32,
    i32,
    max_,
    min_,
    select,
    u32,
    vec,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.tree import Binary
from kvdsl.kernels.config import (
    FLOATS,
    emax,
    largest,
    node,
    plus,
    Element,
    KernelConfig,
    choice,
    contract,
    one_of,
    positive_int,
    require,
    times,
)
from kvdsl.kernels.paged import require_page_size
from kvdsl.nodes import paged, walks, words
from kvdsl.nodes.index import flat_index, workgroup_flat
from kvdsl.nodes.paged import PageGeometry, PageLayout, Pool
from kvdsl.nodes.window import total_tokens
from kvdsl.nodes.words import splat

#: The logit of a key a query does not see (below any real logit; ``exp`` of it less the
#: row's maximum is 0 in f32).
HIDDEN = -3.0e38
#: Query rows one workgroup holds (their outputs live in each invocation's registers).
MAX_ROWS = 8
MAX_QUERIES = 8
#: The workgroups :func:`plan` aims a dispatch at: WebGPU tells no count of compute units, and
#: this many keeps a large discrete GPU busy while leaving the merge a few partials per row.
TARGET_WORKGROUPS = 1024
#: WebGPU's default workgroup memory, in bytes.
WORKGROUP_BYTES = 16384
V4 = vec(4, f32)
#: The most cache units (16 bytes each, but for f16 rows of 4k + 4 halves) an invocation loads
#: back to back before using them when it scores a key: a whole row up to head_dim 128 f32 or
#: 256 f16; a longer row takes two such runs (a register budget).
ROW_LOADS = 32
#: Keys an invocation's value loop loads back to back each trip.
VALUE_KEYS = 8
#: Chunks the merge reads back to back each trip.
MERGE_CHUNKS = 4


class CacheLayout(StrEnum):
    """Where the cache's rows live: a contiguous BNSH cache, or pages of a pool."""

    BNSH = "bnsh"
    PAGED = "paged"


class RowLayout(StrEnum):
    """The order of Q's and O's rows: ``[batch, heads, queries, D]`` or
    ``[batch, queries, heads * D]``."""

    BNSH = "bnsh"
    BSH = "bsh"


@dataclass(frozen=True)
class AttendConfig(KernelConfig):
    """Decode attention over a cache of ``kv_heads`` × ``head_dim`` rows for ``q_heads`` query
    heads and up to ``max_queries`` new tokens a sequence: the cache's layout and element type,
    Q's and O's layouts and types, and the options (a sliding window, soft-capping, sinks)."""

    kv_heads: int
    head_dim: int
    q_heads: int
    _: KW_ONLY
    max_queries: int = 1
    cache: CacheLayout = choice(CacheLayout.BNSH)
    cache_type: Element = choice(Element.F32)
    page_size: int = 16
    page_layout: PageLayout = choice(PageLayout.NHD)
    pool: Pool = choice(Pool.SEPARATE)
    q_layout: RowLayout = choice(RowLayout.BNSH)
    q_type: Element = choice(Element.F32)
    o_layout: RowLayout = choice(RowLayout.BNSH)
    o_type: Element = choice(Element.F32)
    sliding_window: bool = False
    softcap: bool = False
    sinks: bool = False
    mode = "attend"
    KEYS = (  # fmt: skip
        "kv_heads", "head_dim", "q_heads", "max_queries", "cache", "cache_type", "page_size",
        "page_layout", "pool", "q_layout", "q_type", "o_layout", "o_type", "sliding_window",
        "softcap", "sinks", "workgroup_size", "fold",
    )

    def check_fields(self) -> None:
        positive_int("kv_heads", self.kv_heads)
        positive_int("q_heads", self.q_heads)
        positive_int("head_dim", self.head_dim, 256)
        require(self.head_dim % 4 == 0, "head_dim", self.head_dim, "a multiple of 4")
        require(
            self.q_heads % self.kv_heads == 0,
            "q_heads",
            self.q_heads,
            f"a multiple of kv_heads ({self.kv_heads})",
        )
        positive_int("max_queries", self.max_queries, MAX_QUERIES)
        one_of("cache", self.cache, CacheLayout)
        one_of("cache_type", self.cache_type, FLOATS)
        require_page_size(self.page_size)
        one_of("page_layout", self.page_layout, PageLayout)
        one_of("pool", self.pool, Pool)
        for field in ("q_layout", "o_layout"):
            one_of(field, getattr(self, field), RowLayout)
        for field in ("q_type", "o_type"):
            one_of(field, getattr(self, field), FLOATS)
        require(not self.window, "window", self.window, "false for attend")

    def check_schedule(self) -> None:
        lanes = self.head_dim // self.unit
        require(
            self.workgroup_size % lanes == 0,
            "workgroup_size",
            self.workgroup_size,
            f"a multiple of head_dim / {self.unit} ({lanes}): whole output rows per key group",
        )
        require(
            self.max_chunk >= max(self.workgroup_size, self.head_dim),
            "workgroup_size",
            self.workgroup_size,
            "small enough to leave workgroup memory for a chunk of as many keys as it has"
            " invocations (and as head_dim)",
        )

    def default_workgroup_size(self) -> int:
        return max(128, self.head_dim // 4)

    @property
    def unit(self) -> int:
        """Cache values per load: eight halves as :data:`~kvdsl.nodes.words.WORDS` (16 bytes)
        for an f16 cache whose rows divide by 8, else four (a vec4, or four halves)."""
        return 8 if self.cache_type is Element.F16 and self.head_dim % 8 == 0 else 4

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv_heads

    @property
    def rows(self) -> int:
        """Query rows a workgroup holds (a row block): at most :data:`MAX_ROWS`, and few
        enough that a chunk of ``max(workgroup_size, head_dim)`` keys fits beside them."""
        rows = min(self.group * self.max_queries, MAX_ROWS)
        while rows > 1 and self._chunk_room(rows) < max(self.workgroup_size, self.head_dim):
            rows -= 1
        return rows

    @property
    def max_chunk(self) -> int:
        """The most keys one workgroup reads: its logits fill the workgroup memory the block's
        queries, the invocations' partial maxima and sums and the rows' statistics leave
        (beside each key's row base, in a paged cache)."""
        return self._chunk_room(self.rows)

    def _chunk_room(self, rows: int) -> int:
        left = WORKGROUP_BYTES - 4 * rows * (self.head_dim + self.workgroup_size + 2)
        return left // (4 * rows + 4 * (self.cache is CacheLayout.PAGED))

    @property
    def geometry(self) -> PageGeometry:
        """A paged cache's pages, in units of :attr:`unit` values."""
        return PageGeometry(
            self.page_size, self.kv_heads, self.head_dim // self.unit, self.page_layout, self.pool
        )


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


def _cache(kb: KernelBuilder, cfg: AttendConfig, batch: Val) -> Cache:
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

    pool_values = times(_largest_page_plus_one(), cfg.geometry.stride * unit)
    extents: dict[str, Any] = {"page_table": times(batch, max_pages)}
    if cfg.pool is Pool.COMBINED:
        extents["kv_pages"] = pool_values
    else:
        extents |= {n: pool_values for n in ("key_pages", "value_pages")}
    shift = pages.units if cfg.pool is Pool.COMBINED else None
    return Cache(key, value, paged_row, shift, extents)


def _as_f32(kb: KernelBuilder, x: Val, name: str) -> list[Val]:
    """Cache unit ``x`` as ``vec4<f32>`` lanes: itself (f32), or its halves unpacked into lets
    ``name_0`` (and ``name_1`` for eight)."""
    if x.ty == words.WORDS:
        halves = (x.member("xy"), x.member("zw"))
        return [kb.let(f"{name}_{h}", words.as_f32(kb, w)) for h, w in enumerate(halves)]
    if x.ty == words.HALVES:
        return [kb.let(f"{name}_0", words.as_f32(kb, x))]
    return [x]


def _largest_page_plus_one() -> Any:
    return emax(plus(largest("page_table"), 1), 0)


def _row_index(cfg: AttendConfig, layout: RowLayout, b: Val, head: Val, qi: Val, queries: Val):
    """Query row ``(b, head, qi)``'s index in rows of ``head_dim`` in ``layout``."""
    if layout is RowLayout.BNSH:
        return (b * cfg.q_heads + head) * queries + qi
    return (b * queries + qi) * cfg.q_heads + head


def attend(cfg: AttendConfig, name: str = "attend") -> Kernel:
    """Build the split-K decode attention kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    seqlens = kb.binding("seqlens_k", i32, "read")
    query = words.binding(kb, "query", cfg.q_type.scalar, 4)
    batch = kb.param("batch")
    cache = _cache(kb, cfg, batch)
    sinks = kb.binding("sinks", f32, "read") if cfg.sinks else None
    out = words.binding(kb, "output", cfg.o_type.scalar, 4, "read_write")
    partials = kb.binding("partials", V4, "read_write")
    wg = kb.workgroup_const("WG")
    d4 = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    n_units, per_unit = cfg.head_dim // cfg.unit, cfg.unit // 4
    head_units = kb.const("HEAD_UNITS", u32, n_units)
    kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    group = kb.const("GROUP", u32, cfg.group)
    rows_max = kb.const("ROWS", u32, cfg.rows)
    max_chunk = kb.const("MAX_CHUNK", u32, cfg.max_chunk)
    key_groups = kb.const("KEY_GROUPS", u32, cfg.workgroup_size // n_units)
    queries, chunk, chunks = kb.param("queries"), kb.param("chunk"), kb.param("chunks")
    blocks = kb.param("rowBlocks")
    scale = kb.param("scale", f32)
    window = kb.param("window") if cfg.sliding_window else None
    cap = kb.param("softcap", f32) if cfg.softcap else None
    rows = range(cfg.rows)

    q_sh = kb.workgroup_var("qs", array(V4, cfg.rows * (cfg.head_dim // 4)))
    logits = kb.workgroup_var("logits", array(f32, cfg.rows * cfg.max_chunk))
    part = kb.workgroup_var("part", array(f32, cfg.rows * cfg.workgroup_size))
    stat = kb.workgroup_var("stat", array(f32, 2 * cfg.rows))
    paged_cache = cfg.cache is CacheLayout.PAGED
    row_at = kb.workgroup_var("rowAt", array(u32, cfg.max_chunk)) if paged_cache else None

    kb.comment("Workgroup (b, kv head, row block, chunk), chunk fastest.")
    w = workgroup_flat(kb, cfg.fold)
    kb.leave_if(w >= batch * kv_heads * blocks * chunks)
    c = kb.let("c", w % chunks)
    blk = kb.let("blk", (w / chunks) % blocks)
    hk = kb.let("hk", (w / (chunks * blocks)) % kv_heads)
    b = kb.let("b", w / (chunks * blocks * kv_heads))
    t = kb.lid.x
    total = total_tokens(kb, seqlens, b)
    kb.comment("A sequence shorter than its new tokens has no positions: left unwritten.")
    kb.leave_if(total < queries)
    row0 = kb.let("row0", blk * rows_max)
    nrows = kb.let("nrows", min_(rows_max, group * queries - min_(row0, group * queries)))
    first = kb.let("first", c * chunk)
    if window is None:
        start = first
    else:
        kb.comment("Keys before the window of the block's first new token are seen by no row.")
        oldest = kb.let("oldest", max_(total - queries + 1, window) - window)
        start = kb.let("start", max_(first, oldest))
    end = kb.let("end", max_(start, min_(first + chunk, total)))

    def q_row(r: Val | int, layout: RowLayout) -> Val:
        """Row ``r`` of the block (``row0 + r = g * queries + i``: query head
        ``hk * GROUP + g``, new token ``i``) as a row index of Q or O in ``layout``."""
        head = hk * group + (row0 + r) / queries
        return _row_index(cfg, layout, b, head, (row0 + r) % queries, queries)

    kb.comment("The block's query rows (rows past the block's end read as zero).")
    with kb.for_range("e", t, rows_max * d4, wg) as e:
        r = kb.let("r", e / d4)
        with kb.if_(r < nrows):
            q_sh[e] = words.as_f32(kb, query[q_row(r, cfg.q_layout) * d4 + e % d4])
        with kb.else_():
            q_sh[e] = splat(V4, 0.0)
    kb.barrier()

    kb.comment("1. Scores: keys start + t, start + t + WG, ...; each invocation's largest per row.")
    top = [kb.var(f"top{r}", f32, HIDDEN) for r in rows]
    with kb.for_range("j", start + t, end, wg) as j:
        base, missing = cache.row(b, hk, j)
        k_base = kb.let("kBase", base)
        if row_at is not None:
            row_at[j - start] = k_base
        s = [kb.var(f"s{r}", f32, 0.0) for r in rows]
        for lo in range(0, n_units, ROW_LOADS):
            kb.comment("The key row's loads, back to back; then its dot products.")
            units = range(lo, min(lo + ROW_LOADS, n_units))
            ks = [kb.let(f"k{u}", cache.key[k_base + u]) for u in units]
            for u, k in zip(units, ks):
                for h, k4 in enumerate(_as_f32(kb, k, f"k{u}")):
                    for r in rows:
                        q4 = q_sh[r * (cfg.head_dim // 4) + u * per_unit + h]
                        s[r].set(s[r] + call(Op.DOT, q4, k4))
        for r in rows:
            logit = kb.var(f"logit{r}", f32, s[r] * scale)
            if cap is not None:
                logit.set(cap * call(Op.TANH, logit / cap))
            pos = kb.let(f"pos{r}", total - queries + (row0 + r) % queries)
            seen = j <= pos
            if window is not None:
                seen = seen & (pos - j < window)
            if missing is not None:
                seen = seen & ~missing
            x = kb.let(f"x{r}", select(HIDDEN, logit, seen))
            logits[r * max_chunk + (j - start)] = x
            top[r].set(max_(top[r], x))
    for r in rows:
        part[r * wg + t] = top[r]
    kb.barrier()

    kb.comment("2. Weights: each row's maximum m; logits become exp(logit - m); their sums.")
    with kb.if_(t < rows_max):
        m = kb.var("m", f32, HIDDEN)
        with kb.for_range("k", 0, wg) as k:
            m.set(max_(m, part[t * wg + k]))
        stat[t] = m
    kb.barrier()
    for r in rows:
        m_r = kb.let(f"m{r}", stat[r])
        total_p = kb.var(f"sum{r}", f32, 0.0)
        with kb.for_range("j", start + t, end, wg) as j:
            at = kb.let("at", r * max_chunk + (j - start))
            x = kb.let("x", logits[at])
            p = kb.let("p", select(0.0, call(Op.EXP, x - m_r), x > HIDDEN))
            logits[at] = p
            total_p.set(total_p + p)
        part[r * wg + t] = total_p
    kb.barrier()
    with kb.if_(t < rows_max):
        l_all = kb.var("l", f32, 0.0)
        with kb.for_range("k", 0, wg) as k:
            l_all.set(l_all + part[t * wg + k])
        stat[rows_max + t] = l_all

    kb.comment("3. Values: unit i of every row's output over keys kg, kg + KEY_GROUPS, ...")
    i = kb.let("i", t % head_units)
    kg = kb.let("kg", t / head_units)
    zero = splat(V4, 0.0)
    acc = [[kb.var(f"acc{r}_{h}", V4, zero) for h in range(per_unit)] for r in rows]
    with kb.for_range("j", start + kg, end, key_groups * VALUE_KEYS) as j:
        kb.comment("VALUE_KEYS keys (past the end: the last key, weighing zero); loads first.")
        keys = [j] + [
            kb.let(f"j{u}", min_(j + u * key_groups, end - 1)) for u in range(1, VALUE_KEYS)
        ]
        if row_at is None:
            bases = [cache.row(b, hk, key)[0] for key in keys]
        else:
            bases = [row_at[key - start] for key in keys]
            if cache.value_shift is not None:
                bases = [base + cache.value_shift for base in bases]
        vs = [kb.let(f"v{u}", cache.value[base + i]) for u, base in enumerate(bases)]
        for u, (key, v) in enumerate(zip(keys, vs)):
            v4s = _as_f32(kb, v, f"v{u}")
            for r in rows:
                p = logits[r * max_chunk + (key - start)]
                p = kb.let(f"p{u}_{r}", p if u == 0 else select(0.0, p, j + u * key_groups < end))
                for h, v4 in enumerate(v4s):
                    acc[r][h].set(acc[r][h] + select(zero, v4 * p, p > 0.0))
    kb.barrier()
    kb.comment("The key groups' sums, added in workgroup memory (it reuses the logits).")
    lanes = [(h, n, lane) for h in range(per_unit) for n, lane in enumerate("xyzw")]
    with kb.for_range("g", 1, key_groups) as g:
        with kb.if_(kg.eq(g)):
            for r in rows:
                for h, n, lane in lanes:
                    logits[(i + r * n_units) * cfg.unit + (4 * h + n)] = getattr(acc[r][h], lane)
        kb.barrier()
        with kb.if_(kg.eq(0)):
            for r in rows:
                at = (i + r * n_units) * cfg.unit
                for h in range(per_unit):
                    sums = (logits[at + (4 * h + n)] for n in range(4))
                    acc[r][h].set(acc[r][h] + construct(V4, *sums))
        kb.barrier()

    kb.comment("One chunk: the output itself; else this chunk's partial: o, then (m, l).")
    dims = [i] if per_unit == 1 else [kb.let(f"i{h}", i * per_unit + h) for h in range(per_unit)]
    with kb.if_(kg.eq(0)):
        for r in rows:
            with kb.if_(r < nrows):
                m_r = kb.let(f"mr{r}", stat[r])
                l_r = kb.let(f"lr{r}", stat[r + cfg.rows])
                with kb.if_(chunks.eq(1)):
                    l = kb.var(f"l{r}", f32, l_r)
                    keep = None
                    if sinks is not None:
                        sink = kb.let(f"sink{r}", sinks[hk * group + (row0 + r) / queries])
                        top_s = kb.let(f"sinkTop{r}", max_(m_r, sink))
                        keep = select(0.0, call(Op.EXP, m_r - top_s), m_r > HIDDEN)
                        keep = kb.let(f"keep{r}", keep)
                        l.set(l * keep + call(Op.EXP, sink - top_s))
                    o_at = kb.let(f"oAt{r}", q_row(r, cfg.o_layout) * d4)
                    for h, dim in enumerate(dims):
                        o = acc[r][h] if keep is None else acc[r][h] * keep
                        normal = select(zero, o / l, l > 0.0)
                        out[o_at + dim] = words.to(kb, out.binding.elem, normal)
                with kb.else_():
                    at = kb.let(f"at{r}", (q_row(r, RowLayout.BNSH) * chunks + c) * (d4 + 1))
                    for h, dim in enumerate(dims):
                        partials[at + dim] = acc[r][h]
                    with kb.if_(i.eq(0)):
                        partials[at + d4] = construct(V4, m_r, l_r, 0.0, 0.0)

    items = times(batch, cfg.kv_heads, blocks, chunks)
    doc = f"Split-K decode attention over a {_cache_words(cfg)}."
    kernel = kb.build(Dispatch(items, 1, cfg.fold), doc)
    q_rows = times(batch, cfg.q_heads, queries)
    extents = {
        "seqlens_k": batch,
        "query": times(q_rows, cfg.head_dim),
        "output": times(q_rows, cfg.head_dim),
        "partials": times(q_rows, chunks, cfg.head_dim + 4),
    } | cache.extents
    if sinks is not None:
        extents["sinks"] = cfg.q_heads
    requires = {
        "queries >= 1": queries >= 1,
        f"queries <= {cfg.max_queries}": queries <= cfg.max_queries,
        f"rowBlocks * {cfg.rows} >= {cfg.group} * queries": blocks * cfg.rows
        >= queries * cfg.group,
        f"chunk <= {cfg.max_chunk}": chunk <= cfg.max_chunk,
    }
    requires["chunk * chunks >= seqlens_k.max + 1"] = Binary(
        Op.GE, node(chunk * chunks), plus(largest("seqlens_k"), 1)
    )
    return walks.vector_extents(contract(kernel, extents, requires))


def _cache_words(cfg: AttendConfig) -> str:
    if cfg.cache is CacheLayout.BNSH:
        return f"BNSH {cfg.cache_type.value} cache"
    return f"paged {cfg.page_layout.value.upper()} {cfg.cache_type.value} cache ({cfg.pool.value} pools)"


def attend_merge(cfg: AttendConfig, name: str = "attend_merge") -> Kernel:
    """Build the merge of :func:`attend`'s partials: one invocation per output ``vec4``.

    For a row's chunks ``c`` with partials ``(m_c, l_c, o_c)`` and ``M`` the largest ``m_c``
    (and the head's sink): ``output = sum_c e^(m_c - M) o_c / (sum_c e^(m_c - M) l_c +
    e^(sink - M))``; a chunk that saw no key (``m_c`` :data:`HIDDEN`) weighs zero. One pass,
    :data:`MERGE_CHUNKS` chunks a trip: the running maximum ``top`` starts at the sink (or
    :data:`HIDDEN`), and the sums so far are scaled by ``e^(top - top')`` when it grows.
    """
    kb = KernelBuilder(name, cfg.workgroup_size)
    partials = kb.binding("partials", V4, "read")
    sinks = kb.binding("sinks", f32, "read") if cfg.sinks else None
    out = words.binding(kb, "output", cfg.o_type.scalar, 4, "read_write")
    kb.workgroup_const("WG")
    d4 = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
    batch, queries, chunks = kb.param("batch"), kb.param("queries"), kb.param("chunks")
    e = flat_index(kb, cfg.fold, "e", bound=batch * q_heads * queries * d4)
    kb.comment("Output vec4 i of BNSH row (b, head, qi).")
    row = kb.let("row", e / d4)
    i = kb.let("i", e % d4)
    head = kb.let("head", (row / queries) % q_heads)
    top = kb.var("top", f32, HIDDEN)
    sink = None
    if sinks is not None:
        sink = kb.let("sink", sinks[head])
        top.set(sink)
    stride = kb.let("stride", d4 + 1)
    l = kb.var("l", f32, 0.0)
    o = kb.var("o", V4, splat(V4, 0.0))
    with kb.for_range("c", 0, chunks, MERGE_CHUNKS) as c:
        kb.comment("MERGE_CHUNKS chunks (past the last: the last, weighing zero); loads first.")
        cs = [c] + [min_(c + u, chunks - 1) for u in range(1, MERGE_CHUNKS)]
        ats = [kb.let(f"at{u}", (row * chunks + cu) * stride) for u, cu in enumerate(cs)]
        mls = [kb.let(f"ml{u}", partials[at + d4]) for u, at in enumerate(ats)]
        os = [kb.let(f"o{u}", partials[at + i]) for u, at in enumerate(ats)]
        ms = [kb.let("m0", mls[0].x)]
        for u in range(1, MERGE_CHUNKS):
            ms.append(kb.let(f"m{u}", select(HIDDEN, mls[u].x, c + u < chunks)))
        highest = ms[0]
        for m in ms[1:]:
            highest = max_(highest, m)
        new_top = kb.let("newTop", max_(top, highest))
        kb.comment("Rescale what is summed so far when a chunk's maximum is larger.")
        keep = kb.let("keep", call(Op.EXP, top - new_top))
        ws = [
            kb.let(f"w{u}", select(0.0, call(Op.EXP, m - new_top), m > HIDDEN))
            for u, m in enumerate(ms)
        ]
        l_sum, o_sum = l * keep, o * keep
        for ml, o_u, w_u in zip(mls, os, ws):
            l_sum, o_sum = l_sum + ml.y * w_u, o_sum + o_u * w_u
        l.set(l_sum)
        o.set(o_sum)
        top.set(new_top)
    if sink is not None:
        l.set(l + call(Op.EXP, sink - top))
    b, qi = row / (queries * q_heads), row % queries
    at = _row_index(cfg, cfg.o_layout, b, head, qi, queries) * d4 + i
    out[at] = words.to(kb, out.binding.elem, select(splat(V4, 0.0), o / l, l > 0.0))
    items = times(batch, cfg.q_heads, queries, cfg.head_dim // 4)
    kernel = kb.build(
        Dispatch(items, cfg.workgroup_size, cfg.fold), "Merge split-K attention partials."
    )
    q_rows = times(batch, cfg.q_heads, queries)
    extents = {
        "partials": times(q_rows, chunks, cfg.head_dim + 4),
        "output": times(q_rows, cfg.head_dim),
    }
    if sinks is not None:
        extents["sinks"] = cfg.q_heads
    return walks.vector_extents(contract(kernel, extents))


def plan(
    cfg: AttendConfig, *, batch: int, queries: int, longest: int, target: int = TARGET_WORKGROUPS
) -> dict[str, int]:
    """The dispatch params of :func:`attend` for ``batch`` sequences of at most ``longest``
    rows and ``queries`` new tokens each: ``rowBlocks``, and ``chunks`` ranges of ``chunk``
    keys. The chunks are as many as bring the workgroups to ``target``, each of at least
    ``workgroup_size`` keys (every invocation scores one) and at most ``max_chunk``."""
    blocks = -(-(cfg.group * queries) // cfg.rows)
    chunks = max(1, -(-target // (batch * cfg.kv_heads * blocks)))
    chunk = -(-max(longest, 1) // chunks)
    chunk = min(max(chunk, cfg.workgroup_size), cfg.max_chunk)
    chunks = -(-max(longest, 1) // chunk)
    return {
        "batch": batch,
        "queries": queries,
        "rowBlocks": blocks,
        "chunk": chunk,
        "chunks": chunks,
    }
