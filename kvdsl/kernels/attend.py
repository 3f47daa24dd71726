"""``attend``: decode attention of the new tokens' queries over a KV cache, split over the keys.

For sequence ``b`` of ``seqlens_k[b] + 1`` cached rows (the new tokens' rows last) and its
``queries`` new tokens, each query head ``h`` reads KV head ``h / GROUP`` and gives
``softmax(scale * q . k) v`` over the keys its token sees (:mod:`kvdsl.reference.attention`
states the meaning: causal inside the new tokens, an optional sliding ``window``, soft-capping,
one sink logit per head).

Split-K (flash-decoding): the keys are cut into ``chunks`` ranges of ``chunk`` rows; workgroup
``(b, kv head, row block, chunk)`` reads its range once for the ``GROUP × queries`` query rows
of its KV head (a row block of at most ``ROWS`` of them), and writes each row's partial: the
running maximum ``m``, the sum ``l`` of ``exp(logit - m)`` and the unnormalised output
``sum exp(logit - m) v``. With one chunk the kernel writes the output itself; otherwise
:func:`attend_merge` combines the partials in a second dispatch.

Inside a workgroup the range is read in tiles of ``WG`` keys: invocation ``t`` scores key
``t`` of the tile against the row block's queries (held in workgroup memory), one invocation
per row folds the tile into the row's running maximum and sum, and every invocation then adds
its share of ``(row, vec4 of dims)`` outputs over the tile's values. Logits of keys a row does
not see are :data:`HIDDEN`, and weigh zero.
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
    convert,
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
    ConfigError,
    Element,
    KernelConfig,
    ceil_div,
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
#: running maximum is 0 in f32).
HIDDEN = -3.0e38
#: Workgroup memory a row block's queries may take (of WebGPU's 16 KiB), in bytes.
QUERY_BYTES = 8192
MAX_QUERIES = 8


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
        positive_int("head_dim", self.head_dim, 1024)
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

    def default_workgroup_size(self) -> int:
        return 64

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv_heads

    @property
    def rows(self) -> int:
        """Query rows a workgroup holds: all of a KV head's, or as many as fit
        :data:`QUERY_BYTES`."""
        fit = QUERY_BYTES // (4 * self.head_dim)
        if fit < 1:
            raise ConfigError(f"head_dim {self.head_dim}: a query row past {QUERY_BYTES} bytes")
        return min(self.group * self.max_queries, fit)


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
    batch, seq = kb.param("batch"), kb.param("seq")
    queries, chunk, chunks = kb.param("queries"), kb.param("chunk"), kb.param("chunks")
    blocks = kb.param("rowBlocks")
    scale = kb.param("scale", f32)
    window = kb.param("window") if cfg.window_size else None
    cap = kb.param("softcap", f32) if cfg.softcap else None

    q_sh = kb.workgroup_var("qs", array(vec(4, f32), cfg.rows * (cfg.head_dim // 4)))
    p_sh = kb.workgroup_var("ps", array(f32, cfg.rows * cfg.workgroup_size))
    m_sh = kb.workgroup_var("ms", array(f32, cfg.rows))
    l_sh = kb.workgroup_var("ls", array(f32, cfg.rows))
    a_sh = kb.workgroup_var("alphas", array(f32, cfg.rows))

    kb.comment("Workgroup (b, kv head, row block, chunk), chunk fastest.")
    w = workgroup_flat(kb, cfg.fold)
    kb.leave_if(w >= batch * kv_heads * blocks * chunks)
    c = kb.let("c", w % chunks)
    blk = kb.let("blk", (w / chunks) % blocks)
    hk = kb.let("hk", (w / (chunks * blocks)) % kv_heads)
    b = kb.let("b", w / (chunks * blocks * kv_heads))
    t = kb.lid.x
    total = total_tokens(kb, seqlens, b)
    rows_all = kb.let("rowsAll", group * queries)
    row0 = kb.let("row0", blk * rows_max)
    nrows = kb.let("nrows", min_(rows_max, rows_all - min_(row0, rows_all)))
    start = kb.let("start", c * chunk)
    end = kb.let("end", min_(start + chunk, total))
    kb.comment("A sequence shorter than its new tokens has no positions: left unwritten.")
    kb.leave_if(total < queries)

    kb.comment(
        "Row r of the block: query head hk * GROUP + g, new token i (r0 + r = g * queries + i)."
    )
    with kb.for_range("e", t, nrows * d4, wg) as e:
        r = e / d4
        g = (row0 + r) / queries
        qi = (row0 + r) % queries
        head = hk * group + g
        q_sh[e] = query[((b * (kv_heads * group) + head) * queries + qi) * d4 + e % d4]
    with kb.if_(t < nrows):
        m_sh[t] = HIDDEN
        l_sh[t] = 0.0
    kb.barrier()

    acc_n = -(-(cfg.rows * (cfg.head_dim // 4)) // cfg.workgroup_size)
    acc = kb.var("acc", array(vec(4, f32), acc_n))
    with kb.for_range("n", 0, acc_n) as n:
        acc[n] = splat(vec(4, f32), 0.0)

    slice_ = kb.let("slice", b * kv_heads + hk)
    with kb.for_range("tile", start, end, wg) as tile:
        j = kb.let("j", tile + t)
        kb.comment("Score key j of the tile against each row of the block.")
        with kb.if_(j < end):
            k_row = _cache_reader(kb, cfg, key, (slice_ * seq + j) * d4)
            with kb.for_range("r", 0, nrows) as r:
                s = kb.var("s", f32, 0.0)
                with kb.for_range("i", 0, d4) as i:
                    s.set(s + call(Op.DOT, q_sh[r * d4 + i], k_row(i)))
                logit = kb.var("logit", f32, s * scale)
                if cap is not None:
                    logit.set(cap * call(Op.TANH, logit / cap))
                qi = (row0 + r) % queries
                pos = kb.let("pos", total - queries + qi)
                seen = j <= pos
                if window is not None:
                    seen = seen & (pos - j < window)
                p_sh[r * wg + t] = select(HIDDEN, logit, seen)
        with kb.else_():
            with kb.for_range("r", 0, nrows) as r:
                p_sh[r * wg + t] = HIDDEN
        kb.barrier()
        kb.comment("Fold the tile into each row's running maximum and sum; logits become weights.")
        with kb.if_(t < nrows):
            m_old = kb.let("mOld", m_sh[t])
            m_new = kb.var("mNew", f32, m_old)
            with kb.for_range("k", 0, wg) as k:
                m_new.set(max_(m_new, p_sh[t * wg + k]))
            total_p = kb.var("sum", f32, 0.0)
            with kb.for_range("k", 0, wg) as k:
                x = kb.let("x", p_sh[t * wg + k])
                p = kb.let("p", select(0.0, call(Op.EXP, x - m_new), x > HIDDEN))
                p_sh[t * wg + k] = p
                total_p.set(total_p + p)
            alpha = kb.let("alpha", select(1.0, call(Op.EXP, m_old - m_new), m_old > HIDDEN))
            a_sh[t] = alpha
            m_sh[t] = m_new
            l_sh[t] = l_sh[t] * alpha + total_p
        kb.barrier()
        kb.comment(
            "Outputs (row, vec4 of dims) e = t + n * WG: rescale, then add the tile's values."
        )
        with kb.for_range("n", 0, acc_n) as n:
            e = kb.let("e", t + n * wg)
            with kb.if_(e < nrows * d4):
                r = kb.let("r", e / d4)
                i = kb.let("i", e % d4)
                sum_v = kb.var("sumV", vec(4, f32), acc[n] * a_sh[r])
                last = kb.let("last", min_(wg, end - tile))
                with kb.for_range("k", 0, last) as k:
                    v_row = _cache_reader(kb, cfg, value, (slice_ * seq + tile + k) * d4)
                    sum_v.set(sum_v + v_row(i) * p_sh[r * wg + k])
                acc[n] = sum_v
        kb.barrier()

    kb.comment("One chunk: the output itself; else this chunk's partial (m, l, unnormalised o).")
    with kb.for_range("n", 0, acc_n) as n:
        e = kb.let("e", t + n * wg)
        with kb.if_(e < nrows * d4):
            r = kb.let("r", e / d4)
            i = kb.let("i", e % d4)
            g = (row0 + r) / queries
            qi = (row0 + r) % queries
            head = kb.let("head", hk * group + g)
            orow = kb.let("orow", (b * (kv_heads * group) + head) * queries + qi)
            with kb.if_(chunks.eq(1)):
                m = kb.let("m", m_sh[r])
                l = kb.var("l", f32, l_sh[r])
                o = kb.var("o", vec(4, f32), acc[n])
                if sinks is not None:
                    sink = kb.let("sink", sinks[head])
                    top = kb.let("top", max_(m, sink))
                    keep = kb.let("keep", select(0.0, call(Op.EXP, m - top), m > HIDDEN))
                    l.set(l * keep + call(Op.EXP, sink - top))
                    o.set(o * keep)
                out[orow * d4 + i] = select(splat(vec(4, f32), 0.0), o / l, l > 0.0)
            with kb.else_():
                part_o[(orow * chunks + c) * d4 + i] = acc[n]
                with kb.if_(i.eq(0)):
                    part_ml[orow * chunks + c] = construct(vec(2, f32), m_sh[r], l_sh[r])

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
        "rowBlocks = ceil(GROUP * queries / ROWS)": blocks.eq(
            ceil_div_val(group * queries, rows_max)
        ),
        "chunk * chunks >= seq": chunk * chunks >= seq,
    }
    return contract(kernel, extents, requires)


def ceil_div_val(a: Val, b: Val) -> Val:
    """``(a + b - 1) / b`` as a value."""
    return (a + b - 1) / b


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
