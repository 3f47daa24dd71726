"""``attend``'s kernel: split-K decode attention of a block of query rows over a chunk of keys
(the package docstring, :mod:`kvdsl.kernels.attend`, states the algorithm)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from kvdsl.kernels.config import builds
from kvdsl.kernels.extents import node, plus, times
from kvdsl.ir import (
    Dispatch,
    Kernel,
    KernelBuilder,
    Val,
    array,
    call,
    construct,
    f32,
    i32,
    largest,
    max_,
    min_,
    select,
    u32,
    with_contract,
)
from kvdsl.ir.ops import Op
from kvdsl.ir.tree import Binary
from kvdsl.kernels.attend import cache as caches
from kvdsl.kernels.attend import kivi
from kvdsl.kernels.attend.config import (
    HIDDEN,
    KIVI_KEYS,
    ROW_LOADS,
    SCORE_KEYS,
    V4,
    VALUE_KEYS,
    AttendConfig,
    CacheLayout,
    RowLayout,
)

from kvdsl.nodes import rotation, walks, words
from kvdsl.nodes.index import workgroup_flat
from kvdsl.nodes.window import total_tokens
from kvdsl.nodes.words import splat


def row_index(cfg: AttendConfig, layout: RowLayout, b: Val, head: Val, qi: Val, queries: Val):
    """Query row ``(b, head, qi)``'s index in rows of ``head_dim`` in ``layout``."""
    if layout is RowLayout.BNSH:
        return (b * cfg.q_heads + head) * queries + qi
    return (b * queries + qi) * cfg.q_heads + head


@builds(AttendConfig)
def attend(cfg: AttendConfig, name: str = "attend") -> Kernel:
    """Build the split-K decode attention kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    seqlens = kb.binding("seqlens_k", i32, "read")
    query = words.binding(kb, "query", cfg.q_type.scalar, 4)
    batch = kb.param("batch")
    cache = (kivi if cfg.kivi_bits is not None else caches).declare(kb, cfg, batch)
    own_rows = cache.rows if isinstance(cache.rows, kivi.KiviRows) else None
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
    if own_rows is not None:
        own_rows.sequence(kb, b, hk, total)
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
        return row_index(cfg, layout, b, head, (row0 + r) % queries, queries)

    kb.comment("The block's query rows (rows past the block's end read as zero).")
    with kb.for_range("e", t, rows_max * d4, wg) as e:
        r = kb.let("r", e / d4)
        with kb.if_(r < nrows):
            q4 = words.as_f32(kb, query[q_row(r, cfg.q_layout) * d4 + e % d4])
            k_scale = cache.rows.query_scale(kb, hk, e % d4)
            if cfg.rotation:
                q4 = rotation.load4(kb, q4, e % d4, cfg.rotation)
            q_sh[e] = q4 if k_scale is None else q4 * k_scale
        with kb.else_():
            q_sh[e] = splat(V4, 0.0)
    kb.barrier()
    if cfg.rotation:
        kb.comment(f"Q rotated as the cache's K rows were (blocks of {cfg.rotation}).")
        rotation.stages(kb, q_sh, cfg.rows, cfg.head_dim // 4, cfg.rotation, t, wg)
    own = cfg.fmt if cfg.fmt is not None and cfg.fmt.rotated else None
    if own is not None:
        kb.comment(f"Q in the basis of {own.name}'s K and V rows.")
        own.rotate_shared(kb, q_sh, cfg.rows, cfg.head_dim // 4, t, wg)

    if own_rows is None:
        kb.comment(
            f"1. Scores: keys start + t, start + t + WG, ..., {SCORE_KEYS} a trip (each query "
            "vector read once for them); each invocation's largest per row."
        )
    else:
        kb.comment(
            f"1. Scores: keys {KIVI_KEYS} t, ..., {KIVI_KEYS} t + {KIVI_KEYS - 1} from the "
            f"multiple of {KIVI_KEYS} below start, then WG * {KIVI_KEYS} on (sharing each "
            "channel's code word and stats); each invocation's largest per row."
        )
    top = [kb.var(f"top{r}", f32, HIDDEN) for r in rows]

    def logits_of(key: Val, has: Val | None, missing: Val | None, sums, suffix: str) -> None:
        """Key ``key``'s logit for each row (``sums``: its dot products), HIDDEN where the row
        does not see it, into ``logits`` (where ``has``) and the rows' maxima."""
        for r in rows:
            logit = kb.var(f"logit{r}" + suffix, f32, sums[r] * scale)
            if cap is not None:
                logit.set(cap * call(Op.TANH, logit / cap))
            pos = kb.let(f"pos{r}" + suffix, total - queries + (row0 + r) % queries)
            seen = key <= pos
            if window is not None:
                seen = seen & (pos - key < window)
            if missing is not None:
                seen = seen & ~missing
            if has is not None:
                seen = seen & has
            x = kb.let(f"x{r}" + suffix, select(HIDDEN, logit, seen))
            with _when(kb, has):
                logits[r * max_chunk + (key - start)] = x
            top[r].set(max_(top[r], x))

    if own_rows is not None:
        block0 = kb.let("block0", start - start % KIVI_KEYS)
        with kb.for_range("j", block0 + t * KIVI_KEYS, end, wg * KIVI_KEYS) as j:

            def q_at(r: int, v: Val) -> Val:
                return q_sh[r * (cfg.head_dim // 4) + v]

            trip = own_rows.score_trip(kb, j, start, end, q_at)
            for n, (key, has, k_row, sums) in enumerate(trip):
                if row_at is not None:
                    with _when(kb, has):
                        row_at[key - start] = k_row.base
                logits_of(key, has, k_row.missing, sums, f"_{n}")
    else:
        _scores(kb, cfg, cache, b, hk, start, end, t, wg, q_sh, row_at, logits_of)
    for r in rows:
        part[r * wg + t] = top[r]
    kb.barrier()

    kb.comment("2. Weights: each row's maximum m; logits become exp(logit - m); their sums.")
    _reduce_rows(kb, cfg, part, stat, 0, t, max_)
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
    _reduce_rows(kb, cfg, part, stat, cfg.rows, t, lambda a, b: a + b)

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
            k_rows = [cache.key_row(b, hk, key) for key in keys]
        else:
            k_rows = [cache.stored(row_at[key - start], key) for key in keys]
        vs = [
            cache.rows.value_load(kb, f"v{u}", cache.value, cache.value_row(k_row), i)
            for u, k_row in enumerate(k_rows)
        ]
        kb.comment(
            "A key no row weighs is never read into the sums (a released page may hold NaN)."
        )
        for u, (key, v) in enumerate(zip(keys, vs)):
            ps = []
            for r in rows:
                p = logits[r * max_chunk + (key - start)]
                p = p if u == 0 else select(0.0, p, j + u * key_groups < end)
                ps.append(kb.let(f"p{u}_{r}", p))
            weighed = ps[0]
            for p in ps[1:]:
                weighed = max_(weighed, p)
            weighed = kb.let(f"weighed{u}", weighed > 0.0)
            v4s = [
                kb.let(f"w{u}_{h}", select(zero, v4, weighed))
                for h, v4 in enumerate(cache.rows.value_lanes(kb, f"v{u}", v))
            ]
            for r, p in zip(rows, ps):
                for h, v4 in enumerate(v4s):
                    acc[r][h].set(acc[r][h] + v4 * p)
    kb.barrier()
    _sum_key_groups(kb, cfg, logits, acc, i, kg)
    if own is not None:
        _rotate_back(kb, cfg, own, q_sh, acc, i, kg, t, wg)

    kb.comment("One chunk: the output itself; else this chunk's partial: o, then (m, l).")
    dims = [i] if per_unit == 1 else [kb.let(f"i{h}", i * per_unit + h) for h in range(per_unit)]
    with kb.if_(kg.eq(0)):
        v_scales = [
            cache.rows.output_scale(kb, hk, dim, f"vScale{h}") for h, dim in enumerate(dims)
        ]

        def summed(r: int, h: int) -> Val:
            """Row ``r``'s sums of vector ``h`` (times V's scales where the rows have one)."""
            return acc[r][h] if v_scales[h] is None else acc[r][h] * v_scales[h]

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
                        o = summed(r, h) if keep is None else summed(r, h) * keep
                        normal = select(zero, o / l, l > 0.0)
                        out[o_at + dim] = words.to(kb, out.binding.elem, normal)
                with kb.else_():
                    at = kb.let(f"at{r}", (q_row(r, RowLayout.BNSH) * chunks + c) * (d4 + 1))
                    for h, dim in enumerate(dims):
                        partials[at + dim] = summed(r, h)
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
    if cache.capacity is not None:  # rows past it would be another head's or sequence's
        said, rows = cache.capacity
        requires[said] = Binary(Op.GE, node(rows), plus(largest("seqlens_k"), 1))
    return walks.vector_extents(with_contract(kernel, extents, requires))


def _scores(kb, cfg: AttendConfig, cache, b, hk, start, end, t, wg, q_sh, row_at, logits_of):
    """The scores' loop over a cache of rows: keys ``start + t``, ``start + t + WG``, ...,
    :data:`SCORE_KEYS` a trip, each key's row loaded in runs (:meth:`FloatRows.key_runs`)
    before the dot products; ``logits_of`` takes each key's sums."""
    rows = range(cfg.rows)
    with kb.for_range("j", start + t, end, wg * SCORE_KEYS) as j:
        keys: list[tuple[Val, Val | None]] = [(j, None)]
        for n in range(1, SCORE_KEYS):
            has = kb.let(f"has{n}", j + n * wg < end)
            keys.append((kb.let(f"j{n}", min_(j + n * wg, end - 1)), has))
        labels = ["k"] + [f"k{chr(ord('a') + n)}" for n in range(1, SCORE_KEYS)]
        k_rows = []
        for (key, has), label in zip(keys, labels):
            k_row = cache.key_row(b, hk, key, label[1:])
            side = None if k_row.side is None else kb.let(f"{label}Side", k_row.side)
            k_row = caches.Row(kb.let(f"{label}Base", k_row.base), k_row.missing, side)
            if row_at is not None:
                with _when(kb, has):
                    row_at[key - start] = k_row.base
            k_rows.append(k_row)
        s = [[kb.var(f"s{r}" + label[1:], f32, 0.0) for r in rows] for label in labels]
        kb.comment("The key rows' loads, a run of each back to back; then their dot products.")
        runs = [
            cache.rows.key_runs(kb, cache.key, k_row, label, ROW_LOADS // SCORE_KEYS)
            for k_row, label in zip(k_rows, labels)
        ]
        for trip_runs in zip(*runs):
            for vectors in zip(*trip_runs):
                v = vectors[0][0]
                for r in rows:
                    q4 = q_sh[r * (cfg.head_dim // 4) + v]
                    if SCORE_KEYS > 1:
                        q4 = kb.let(f"qv{r}_{v}", q4)
                    for n, (_, k4) in enumerate(vectors):
                        s[n][r].set(s[n][r] + call(Op.DOT, q4, k4))
        for (key, has), k_row, label, sums in zip(keys, k_rows, labels, s):
            logits_of(key, has, k_row.missing, sums, label[1:])


def _when(kb: KernelBuilder, cond: Val | None) -> AbstractContextManager[None]:
    """``if (cond)`` around what follows, or nothing where ``cond`` is None (always)."""
    return nullcontext() if cond is None else kb.if_(cond)


def _reduce_rows(
    kb: KernelBuilder, cfg: AttendConfig, part, stat, at: int, t: Val, combine
) -> None:
    """Each row's ``combine`` of its ``WG`` entries of ``part`` into ``stat[at + row]``, in two
    levels: ``LANES`` invocations a row each combine every ``LANES``-th entry into the first of
    them, then one invocation a row combines those (``WG / LANES + LANES`` steps and two
    barriers, where one invocation a row took WG steps; a tree of log2(WG) barriers costs
    llvmpipe, which compiles each barrier as a coroutine split, far more to build)."""
    wg = cfg.workgroup_size
    lanes = _lanes(wg, cfg.rows)
    with kb.if_(t < cfg.rows * lanes):
        r, lane = t / lanes, t % lanes
        first = kb.let(f"first{at}", part[r * wg + lane])
        both = kb.var(f"both{at}", f32, first)
        with kb.for_range(f"e{at}", lane + lanes, wg, lanes) as e:
            both.set(combine(both, part[r * wg + e]))
        part[r * wg + lane] = both
    kb.barrier()
    with kb.if_(t < cfg.rows):
        last = kb.var(f"last{at}", f32, part[t * wg])
        with kb.for_range(f"n{at}", 1, lanes) as n:
            last.set(combine(last, part[t * wg + n]))
        stat[at + t] = last
    kb.barrier()


def _lanes(wg: int, rows: int) -> int:
    """Invocations a row for :func:`_reduce_rows`' first level: the divisor of ``wg`` nearest
    its square root from below that leaves an invocation for each of ``rows`` rows."""
    best = 1
    for n in range(1, wg + 1):
        if wg % n == 0 and n * n <= wg and n * rows <= wg:
            best = n
    return best


def _sum_key_groups(kb: KernelBuilder, cfg: AttendConfig, room, acc, i: Val, kg: Val) -> None:
    """Add the key groups' sums into key group 0's registers as a tree: at each level the upper
    half of the groups still summing write theirs into workgroup memory (``room``, the
    logits, as many groups a round as it holds) and the lower half add them: about
    log2(KEY_GROUPS) rounds of two barriers, where one group a round took KEY_GROUPS - 1."""
    n_units, per_unit = cfg.head_dim // cfg.unit, cfg.unit // 4
    key_groups = cfg.workgroup_size // n_units
    holds = max(1, cfg.max_chunk // cfg.head_dim)  # groups whose rows the logits hold at once
    kb.comment("The key groups' sums, added as a tree in workgroup memory (it reuses the logits).")
    count = key_groups
    while count > 1:
        keep = (
            count + 1
        ) // 2  # groups keep .. count - 1 hand theirs to groups 0 .. count - keep - 1
        for lo in range(keep, count, holds):
            n = min(holds, count - lo)
            for first, role in ((lo, "write"), (lo - keep, "add")):
                inside = kg.eq(first) if n == 1 else (kg >= first) & (kg < first + n)
                slot = 0 if n == 1 else kg - first
                with kb.if_(inside):
                    for r in range(cfg.rows):
                        at = ((slot * cfg.rows + r) * n_units + i) * cfg.unit
                        for h in range(per_unit):
                            if role == "write":
                                for m, lane in enumerate("xyzw"):
                                    room[at + (4 * h + m)] = getattr(acc[r][h], lane)
                            else:
                                sums = (room[at + (4 * h + m)] for m in range(4))
                                acc[r][h].set(acc[r][h] + construct(V4, *sums))
                kb.barrier()
        count = keep


def _rotate_back(kb, cfg: AttendConfig, own, room, acc, i: Val, kg: Val, t: Val, wg: Val):
    """Key group 0's sums (every row's output, in the basis of ``own``'s rows) rotated back
    through workgroup memory (``room``, Q's rows: read no more): the rotation is its own
    inverse and linear, so a chunk's partial rotated back merges as it is."""
    per_unit, d4 = cfg.unit // 4, cfg.head_dim // 4
    kb.comment(f"The sums rotated back from {own.name}'s basis (Q's rows hold them).")
    with kb.if_(kg.eq(0)):
        for r in range(cfg.rows):
            for h in range(per_unit):
                room[r * d4 + (i * per_unit + h if per_unit > 1 else i)] = acc[r][h]
    kb.barrier()
    own.rotate_shared(kb, room, cfg.rows, d4, t, wg)
    with kb.if_(kg.eq(0)):
        for r in range(cfg.rows):
            for h in range(per_unit):
                acc[r][h].set(room[r * d4 + (i * per_unit + h if per_unit > 1 else i)])


def _cache_words(cfg: AttendConfig) -> str:
    """The cache in words, for the kernel's doc line."""
    what = cfg.cache_type.value if cfg.format is None else cfg.format_name
    if cfg.fmt is not None and not cfg.fmt.ggml:
        what += ", scales inline" if cfg.inline else ", scales aside"
    if cfg.cache is CacheLayout.BNSH:
        return f"BNSH {what} cache"
    return f"paged {cfg.page_layout.value.upper()} {what} cache ({cfg.pool.value} pools)"
