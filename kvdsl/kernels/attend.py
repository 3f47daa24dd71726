"""``attend``: decode attention of the new tokens' queries over a KV cache, split over the keys.

For sequence ``b`` of ``seqlens_k[b] + 1`` cached rows (the new tokens' rows last) and its
``queries`` new tokens, each query head ``h`` reads KV head ``h / GROUP`` and gives
``softmax(scale * q . k) v`` over the keys its token sees (:mod:`kvdsl.reference.attention`
states the meaning: causal inside the new tokens, an optional sliding ``window``, soft-capping,
one sink logit per head).

Split-K (flash-decoding): the keys are cut into ``chunks`` ranges of ``chunk`` rows (at most
``MAX_CHUNK``); workgroup ``(b, kv head, row block, chunk)`` reads its range once for a block
of at most ``ROWS`` of its KV head's ``GROUP × queries`` query rows, and writes each row's
partial: the maximum logit ``m``, the sum ``l`` of ``exp(logit - m)`` and the unnormalised output
``sum exp(logit - m) v``. With one chunk the kernel writes the output itself; otherwise
:func:`attend_merge` combines the partials in a second dispatch.

Inside a workgroup, in three steps between barriers:

1. *scores*: invocation ``t`` takes keys ``start + t``, ``start + t + WG``, ... and scores each
   against the block's queries (held in workgroup memory), into ``logits[row][key]``; its
   largest score per row goes to ``part[row][t]``;
2. *weights*: every row's maximum is read from ``part``, each invocation turns its keys' logits
   into ``exp(logit - m)`` and its sum per row into ``part``, whose total is ``l``;
3. *values*: invocation ``t`` holds vec4 ``t % HEAD_DIM_V4`` of the output of every row of the
   block, over keys ``start + t / HEAD_DIM_V4`` in steps of ``WG / HEAD_DIM_V4``: each value
   vector is loaded once; the key groups' sums are added in workgroup memory at the end.

Logits of keys a row does not see are :data:`HIDDEN`, and weigh zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    unpack2x16float,
    vec,
)
from kvdsl.ir.ops import Op
from kvdsl.kernels.config import (
    Element,
    KernelConfig,
    choice,
    contract,
    one_of,
    positive_int,
    require,
    times,
)
from kvdsl.nodes.index import flat_index, workgroup_flat
from kvdsl.nodes.window import total_tokens
from kvdsl.nodes.words import splat

#: The logit of a key a query does not see (below any real logit; ``exp`` of it less the
#: row's maximum is 0 in f32).
HIDDEN = -3.0e38
#: Query rows one workgroup holds (their outputs live in each invocation's registers).
MAX_ROWS = 8
MAX_QUERIES = 8
#: WebGPU's default workgroup memory, in bytes.
WORKGROUP_BYTES = 16384


@dataclass(frozen=True)
class AttendConfig(KernelConfig):
    """Decode attention over a contiguous BNSH cache of ``kv_heads`` × ``head_dim`` rows with
    capacity ``seq`` (a param), for ``q_heads`` query heads and up to ``max_queries`` new tokens
    a sequence; K/V stored as ``cache_type`` (f32, or f16 carried in u32 words)."""

    kv_heads: int
    head_dim: int
    q_heads: int
    max_queries: int = 1
    cache_type: Element = choice(Element.F32)
    window_size: bool = False
    softcap: bool = False
    sinks: bool = False
    mode = "attend"
    KEYS = (
        "kv_heads",
        "head_dim",
        "q_heads",
        "max_queries",
        "cache_type",
        "window_size",
        "softcap",
        "sinks",
        "workgroup_size",
        "fold",
    )

    def check_fields(self) -> None:
        positive_int("kv_heads", self.kv_heads)
        positive_int("q_heads", self.q_heads)
        positive_int("head_dim", self.head_dim, 512)
        require(self.head_dim % 4 == 0, "head_dim", self.head_dim, "a multiple of 4")
        require(
            self.q_heads % self.kv_heads == 0,
            "q_heads",
            self.q_heads,
            f"a multiple of kv_heads ({self.kv_heads})",
        )
        positive_int("max_queries", self.max_queries, MAX_QUERIES)
        one_of("cache_type", self.cache_type, (Element.F32, Element.F16))
        require(not self.window, "window", self.window, "false for attend")

    def check_schedule(self) -> None:
        d4 = self.head_dim // 4
        require(
            self.workgroup_size % d4 == 0,
            "workgroup_size",
            self.workgroup_size,
            f"a multiple of head_dim / 4 ({d4}): whole output rows per key group",
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
        queries, the invocations' partial maxima and sums and the rows' statistics leave."""
        return self._chunk_room(self.rows)

    def _chunk_room(self, rows: int) -> int:
        left = WORKGROUP_BYTES - 4 * rows * (self.head_dim + self.workgroup_size + 2)
        return left // (4 * rows)


def _cache_reader(
    kb: KernelBuilder, cfg: AttendConfig, pool: Buffer, row: Val
) -> Callable[[Val], Val]:
    """``load(i)``: vec4 ``i`` of the cache row starting at vec4 ``row``, as f32."""
    if cfg.cache_type is Element.F32:
        return lambda i: pool[row + i]

    def load(i: Val) -> Val:
        w = pool[row + i]
        return construct(vec(4, f32), unpack2x16float(w.x), unpack2x16float(w.y))

    return load


def attend(cfg: AttendConfig, name: str = "attend") -> Kernel:
    """Build the split-K decode attention kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    seqlens = kb.binding("seqlens_k", i32, "read")
    query = kb.binding("query", vec(4, f32), "read")
    cache_elem = vec(4, f32) if cfg.cache_type is Element.F32 else vec(2, u32)
    data = None if cfg.cache_type is Element.F32 else cfg.cache_type.scalar
    key = kb.binding("key", cache_elem, "read", data)
    value = kb.binding("value", cache_elem, "read", data)
    sinks = kb.binding("sinks", f32, "read") if cfg.sinks else None
    out = kb.binding("output", vec(4, f32), "read_write")
    part_o = kb.binding("partial_output", vec(4, f32), "read_write")
    part_ml = kb.binding("partial_stats", vec(2, f32), "read_write")
    wg = kb.workgroup_const("WG")
    d4 = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    group = kb.const("GROUP", u32, cfg.group)
    rows_max = kb.const("ROWS", u32, cfg.rows)
    max_chunk = kb.const("MAX_CHUNK", u32, cfg.max_chunk)
    key_groups = kb.const("KEY_GROUPS", u32, cfg.workgroup_size // (cfg.head_dim // 4))
    batch, seq = kb.param("batch"), kb.param("seq")
    queries, chunk, chunks = kb.param("queries"), kb.param("chunk"), kb.param("chunks")
    blocks = kb.param("rowBlocks")
    scale = kb.param("scale", f32)
    window = kb.param("window") if cfg.window_size else None
    cap = kb.param("softcap", f32) if cfg.softcap else None
    rows = range(cfg.rows)

    q_sh = kb.workgroup_var("qs", array(vec(4, f32), cfg.rows * (cfg.head_dim // 4)))
    logits = kb.workgroup_var("logits", array(f32, cfg.rows * cfg.max_chunk))
    part = kb.workgroup_var("part", array(f32, cfg.rows * cfg.workgroup_size))
    stat = kb.workgroup_var("stat", array(f32, 2 * cfg.rows))

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
    start = kb.let("start", c * chunk)
    end = kb.let("end", max_(start, min_(start + chunk, total)))
    slice_ = kb.let("slice", b * kv_heads + hk)

    def q_row(r: Val) -> Val:
        """Row ``r`` of the block: query head ``hk * GROUP + g``, new token ``i``
        (``row0 + r = g * queries + i``), as the index of its BNSH row."""
        g = (row0 + r) / queries
        return (b * (kv_heads * group) + hk * group + g) * queries + (row0 + r) % queries

    kb.comment("The block's query rows (rows past the block's end read as zero).")
    with kb.for_range("e", t, rows_max * d4, wg) as e:
        r = kb.let("r", e / d4)
        with kb.if_(r < nrows):
            q_sh[e] = query[q_row(r) * d4 + e % d4]
        with kb.else_():
            q_sh[e] = splat(vec(4, f32), 0.0)
    kb.barrier()

    kb.comment("1. Scores: keys start + t, start + t + WG, ...; each invocation's largest per row.")
    top = [kb.var(f"top{r}", f32, HIDDEN) for r in rows]
    with kb.for_range("j", start + t, end, wg) as j:
        k_row = _cache_reader(kb, cfg, key, (slice_ * seq + j) * d4)
        s = [kb.var(f"s{r}", f32, 0.0) for r in rows]
        with kb.for_range("i", 0, d4) as i:
            k4 = kb.let("k4", k_row(i))
            for r in rows:
                s[r].set(s[r] + call(Op.DOT, q_sh[r * d4 + i], k4))
        for r in rows:
            logit = kb.var(f"logit{r}", f32, s[r] * scale)
            if cap is not None:
                logit.set(cap * call(Op.TANH, logit / cap))
            pos = kb.let(f"pos{r}", total - queries + (row0 + r) % queries)
            seen = j <= pos
            if window is not None:
                seen = seen & (pos - j < window)
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
        l = kb.var("l", f32, 0.0)
        with kb.for_range("k", 0, wg) as k:
            l.set(l + part[t * wg + k])
        stat[rows_max + t] = l

    kb.comment("3. Values: vec4 i of every row's output over keys kg, kg + KEY_GROUPS, ...")
    i = kb.let("i", t % d4)
    kg = kb.let("kg", t / d4)
    acc = [kb.var(f"acc{r}", vec(4, f32), splat(vec(4, f32), 0.0)) for r in rows]
    with kb.for_range("j", start + kg, end, key_groups) as j:
        v4 = kb.let("v4", _cache_reader(kb, cfg, value, (slice_ * seq + j) * d4)(i))
        for r in rows:
            acc[r].set(acc[r] + v4 * logits[r * max_chunk + (j - start)])
    kb.barrier()
    kb.comment("The key groups' sums, added in workgroup memory (it reuses the logits).")
    with kb.for_range("g", 1, key_groups) as g:
        with kb.if_(kg.eq(g)):
            for r in rows:
                for n, lane in enumerate("xyzw"):
                    logits[(r * d4 + i) * 4 + n] = getattr(acc[r], lane)
        kb.barrier()
        with kb.if_(kg.eq(0)):
            for r in rows:
                at = (r * d4 + i) * 4
                acc[r].set(
                    acc[r]
                    + construct(
                        vec(4, f32), logits[at], logits[at + 1], logits[at + 2], logits[at + 3]
                    )
                )
        kb.barrier()

    kb.comment("One chunk: the output itself; else this chunk's partial (m, l, unnormalised o).")
    with kb.if_(kg.eq(0)):
        for r in rows:
            with kb.if_(r < nrows):
                orow = kb.let(f"orow{r}", q_row(r))
                m_r = kb.let(f"mr{r}", stat[r])
                l_r = kb.let(f"lr{r}", stat[r + cfg.rows])
                with kb.if_(chunks.eq(1)):
                    l = kb.var(f"l{r}", f32, l_r)
                    o = kb.var(f"o{r}", vec(4, f32), acc[r])
                    if sinks is not None:
                        sink = kb.let(f"sink{r}", sinks[orow / queries % (kv_heads * group)])
                        top_s = kb.let(f"top{r}s", max_(m_r, sink))
                        keep = kb.let(
                            f"keep{r}", select(0.0, call(Op.EXP, m_r - top_s), m_r > HIDDEN)
                        )
                        l.set(l * keep + call(Op.EXP, sink - top_s))
                        o.set(o * keep)
                    out[orow * d4 + i] = select(splat(vec(4, f32), 0.0), o / l, l > 0.0)
                with kb.else_():
                    part_o[(orow * chunks + c) * d4 + i] = acc[r]
                    with kb.if_(i.eq(0)):
                        part_ml[orow * chunks + c] = construct(vec(2, f32), m_r, l_r)

    items = times(batch, cfg.kv_heads, blocks, chunks)
    kernel = kb.build(Dispatch(items, 1, cfg.fold), "Split-K decode attention over a BNSH cache.")
    q_rows = times(batch, cfg.q_heads, queries)
    extents = {
        "seqlens_k": batch,
        "query": times(q_rows, cfg.head_dim // 4),
        "key": times(batch, cfg.kv_heads, seq, cfg.head_dim // 4),
        "value": times(batch, cfg.kv_heads, seq, cfg.head_dim // 4),
        "output": times(q_rows, cfg.head_dim // 4),
        "partial_output": times(q_rows, chunks, cfg.head_dim // 4),
        "partial_stats": times(q_rows, chunks),
    }
    if sinks is not None:
        extents["sinks"] = cfg.q_heads
    requires = {
        "queries >= 1": queries >= 1,
        f"queries <= {cfg.max_queries}": queries <= cfg.max_queries,
        "rowBlocks * ROWS >= GROUP * queries": blocks * cfg.rows >= queries * cfg.group,
        f"chunk <= {cfg.max_chunk}": chunk <= cfg.max_chunk,
        "chunk * chunks >= seq": chunk * chunks >= seq,
    }
    return contract(kernel, extents, requires)


def attend_merge(cfg: AttendConfig, name: str = "attend_merge") -> Kernel:
    """Build the merge of :func:`attend`'s partials: one invocation per output ``vec4``.

    For a row's chunks ``c`` with partials ``(m_c, l_c, o_c)`` and ``M`` the largest ``m_c``
    (and the head's sink): ``output = sum_c e^(m_c - M) o_c / (sum_c e^(m_c - M) l_c +
    e^(sink - M))``; a chunk that saw no key (``m_c`` :data:`HIDDEN`) weighs zero.
    """
    kb = KernelBuilder(name, cfg.workgroup_size)
    part_o = kb.binding("partial_output", vec(4, f32), "read")
    part_ml = kb.binding("partial_stats", vec(2, f32), "read")
    sinks = kb.binding("sinks", f32, "read") if cfg.sinks else None
    out = kb.binding("output", vec(4, f32), "read_write")
    kb.workgroup_const("WG")
    d4 = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
    batch, queries, chunks = kb.param("batch"), kb.param("queries"), kb.param("chunks")
    items = times(batch, cfg.q_heads, queries, cfg.head_dim // 4)
    e = flat_index(kb, cfg.fold, "e", bound=batch * q_heads * queries * d4)
    orow = kb.let("orow", e / d4)
    i = kb.let("i", e % d4)
    top = kb.var("top", f32, HIDDEN)
    if sinks is not None:
        sink = kb.let("sink", sinks[(orow / queries) % q_heads])
        top.set(sink)
    with kb.for_range("c", 0, chunks) as c:
        top.set(max_(top, part_ml[orow * chunks + c].x))
    l = kb.var("l", f32, 0.0)
    o = kb.var("o", vec(4, f32), splat(vec(4, f32), 0.0))
    with kb.for_range("c", 0, chunks) as c:
        ml = kb.let("ml", part_ml[orow * chunks + c])
        wgt = kb.let("w", select(0.0, call(Op.EXP, ml.x - top), ml.x > HIDDEN))
        l.set(l + ml.y * wgt)
        o.set(o + part_o[(orow * chunks + c) * d4 + i] * wgt)
    if sinks is not None:
        l.set(l + call(Op.EXP, sink - top))
    out[e] = select(splat(vec(4, f32), 0.0), o / l, l > 0.0)
    kernel = kb.build(
        Dispatch(items, cfg.workgroup_size, cfg.fold), "Merge split-K attention partials."
    )
    q_rows = times(batch, cfg.q_heads, queries)
    extents = {
        "partial_output": times(q_rows, chunks, cfg.head_dim // 4),
        "partial_stats": times(q_rows, chunks),
        "output": times(q_rows, cfg.head_dim // 4),
    }
    if sinks is not None:
        extents["sinks"] = cfg.q_heads
    return contract(kernel, extents)
