"""The ``qkv`` kernel into a dense cache (``format`` set): :mod:`kvdsl.kernels.qkv`'s mode with
K and V quantised by the dense quantiser (:func:`kvdsl.nodes.quantise.quantise_rows`).

The walk is the quantiser's (``dense_append``'s: ``walk``, ``split``, ``run``, and its default
per format): ``ROW_LANES`` invocations per row, each holding a run of the row's vectors (or
strided words: :meth:`kvdsl.nodes.quantise.Quantiser.vector_at`), rows whole inside a
workgroup. A row is an input head (``split``: ``HEADS`` rows per token, Q's, K's and V's each
in invocations of their own, the quantiser storing each K or V row alone) or, not split, a Q
head or a (K, V) pair of heads (``Q_HEADS + KV_HEADS`` rows per token). Every input element is
loaded once: with rotary a lane holds both vectors of each NeoX pair where the runs allow it
(paired runs, no workgroup memory), else it stages its vectors in workgroup memory and reads
its partners from there after the barrier (the norm's, where there is one). K's products are
``dense_append``'s, in the same order; Q is normed and rotated by the same program and stored
before the quantiser, which skips Q's rows.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from kvdsl.ir import (
    Kernel,
    KernelBuilder,
    Val,
    array,
    convert,
    f32,
    i32,
    inverse_sqrt,
    select,
    u32,
    vec,
)
from kvdsl.kernels.config import MAX_STORAGE_BUFFERS, ROTARY_TABLE, ceil_div, contract, times
from kvdsl.kernels.qkv import QkvConfig, QLayout, as_u32, describe, target
from kvdsl.nodes import walks, words
from kvdsl.nodes.quantise import Destination, RowPlace, cache_binding, quantise_rows
from kvdsl.nodes.rmsnorm import row_sum_of_squares
from kvdsl.nodes.rotary import rotate_pair, rotated_pair

F32X4 = vec(4, f32)


def qkv_dense(cfg: QkvConfig, name: str = "qkv") -> Kernel:
    """Build the ``qkv`` kernel of a config with a dense ``format``."""
    q = cfg.quantiser
    n = q.vectors
    kb = KernelBuilder(name, cfg.workgroup_size)
    cache = target(cfg)
    src = words.binding(kb, "qkv", cfg.input_type.scalar, 4)
    cache.inputs(kb)
    weight = words.binding(kb, "qk_norm_weight", f32, 4) if cfg.norm else None
    table = words.binding(kb, ROTARY_TABLE, f32, 4) if cfg.rotary else None
    bias = words.binding(kb, "qkv_bias", f32, 4) if cfg.bias else None
    q_out = words.binding(kb, "q_out", cfg.q_type.scalar, 4, "read_write")
    present_key, present_value, side = cache.caches(kb, q)
    assert len(kb.bindings) <= MAX_STORAGE_BUFFERS
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    per_row = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    row_words = kb.const("ROW_WORDS", u32, cfg.row_words)
    q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
    kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    heads = kb.const("HEADS", u32, cfg.heads)
    rows_per_token = heads if cfg.split else kb.const("ROWS", u32, cfg.rows)
    lanes = kb.const("ROW_LANES", u32, q.lanes)
    half = kb.const("HALF_V4", u32, cfg.head_dim // 8) if cfg.rotary else None
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.norm else None
    count, key_seq = kb.param("count"), kb.param("keySeq")
    cache.params(kb)

    kb.comment(f"ROW_LANES invocations per row, each holding {n} vectors of it.")
    it = walks.vectors(kb, cfg.fold, count, lanes, 1, guard=False)
    lane = it.d
    if cfg.split:
        kb.comment("Row = token * HEADS + r: input head r (Q heads, then K heads, then V heads).")
    else:
        kb.comment("Row = token * ROWS + r: Q heads, then the (K, V) pairs of heads.")
    r = kb.let("r", it.row % rows_per_token)
    token = kb.let("token", it.row / rows_per_token)
    t = kb.let("t", token % key_seq)
    b = kb.let("b", token / key_seq)
    is_q = kb.let("isQ", r < q_heads)
    is_v = kb.let("isV", r >= q_heads + kv_heads) if cfg.split else None
    dst = cache.place(kb, b, t, token, key_seq)
    if not cfg.split:
        kb.comment("Q head r, or K head r - Q_HEADS: input head r; its V head KV_HEADS further.")
    k_row = kb.let("kRow", (token * heads + r) * per_row)
    strided_q = cfg.strided_q
    if strided_q:
        kb.comment("A Q row's lane holds vectors lane + ROW_LANES * j (adjacent lanes, adjacent")
        kb.comment("vectors; j and j + n/2 a NeoX pair), a K or V row's the quantiser's.")
        at = [
            kb.let(f"at{j}", select(q.vector_at(lane, j), lane + lanes * j if j else lane, is_q))
            for j in range(n)
        ]
    else:
        at = [kb.let(f"at{j}", q.vector_at(lane, j)) for j in range(n)]
    x = []
    for j in range(n):
        xj = words.as_f32(kb, src[k_row + at[j]])
        if bias is not None:
            xj = xj + bias[r * per_row + at[j]]
        x.append(kb.let(f"x{j}", xj))
    v = None
    if not cfg.split:
        vs = [kb.var(f"v{j}", F32X4, words.splat(F32X4, 0.0)) for j in range(n)]
        with kb.if_(~is_q):
            for j in range(n):
                vj = words.as_f32(kb, src[k_row + kv_heads * per_row + at[j]])
                if bias is not None:
                    vj = vj + bias[(r + kv_heads) * per_row + at[j]]
                vs[j].set(vj)
        v = [kb.let(f"vOwn{j}", vs[j]) for j in range(n)]
    staged = None
    if table is not None and not q.paired and not cfg.pair_loads:
        kb.comment("Stage the lane's vectors: their rotary partners read them after the barrier.")
        staged = kb.workgroup_var("xRow", array(F32X4, cfg.workgroup_size * n))
        for j in range(n):
            staged[kb.lid.x * n + j] = x[j]
    inv_rms = normed = w_base = None
    if weight is not None:
        kb.comment("RMSNorm: the row's sum of squares, reduced in workgroup memory.")
        ms = row_sum_of_squares(kb, tuple(x), lane, lanes, cfg.workgroup_size, q.lanes)
        inv_rms = kb.let("invRms", inverse_sqrt(ms / convert(f32, head_dim) + eps))
        normed = _normed_rows(kb, cfg, is_q, is_v)
        if cfg.q_norm and cfg.k_norm:
            w_base = kb.let("wBase", select(per_row, as_u32(0), is_q))
        else:
            w_base = as_u32(0)
    elif staged is not None:
        kb.barrier()
    own = x
    if inv_rms is not None:
        own = [
            _normed(kb, xj, inv_rms, weight[w_base + at[j]], normed, f"n{j}")
            for j, xj in enumerate(x)
        ]
    rotated = ~is_v if is_v is not None else None  # the rows rotary turns (all but V's)
    if table is None:
        k = [kb.let(f"k{j}", o) for j, o in enumerate(own)]
    elif q.paired:
        k = [kb.var(f"y{j}", F32X4, o) for j, o in enumerate(own)]
        with kb.if_(rotated) if rotated is not None else _always():
            for kj, y in zip(k, _rotate_paired(kb, own, at, table, dst.position, half, "")):
                kj.set(y)
    else:
        k = [kb.var(f"y{j}", F32X4, o) for j, o in enumerate(own)]
        first = kb.let("rowVectors", (kb.lid.x - lane) * n) if staged is not None else None
        if strided_q:
            with kb.if_(is_q):
                for kj, y in zip(k, _rotate_paired(kb, own, at, table, dst.position, half, "q")):
                    kj.set(y)
        if staged is not None:

            def partner_of(i: Val) -> Val:
                return staged[first + i]

        else:

            def partner_of(i: Val) -> Val:
                kb.comment("The partner loaded again from the input (its lane's, from the cache).")
                p = words.as_f32(kb, src[k_row + i])
                return p if bias is None else p + bias[r * per_row + i]

        norm = (inv_rms, weight, w_base, normed)
        if strided_q:
            block = kb.elif_(rotated) if rotated is not None else kb.else_()
        else:
            block = kb.if_(rotated) if rotated is not None else _always()
        with block:
            ys = _rotate_partners(kb, own, partner_of, norm, at, table, dst.position, half)
            for kj, y in zip(k, ys):
                kj.set(y)
    done = kb.let("done", it.e >= count * lanes)
    with kb.if_(is_q.land(~done)):
        if cfg.q_layout is QLayout.BNSH:
            q_row = ((b * q_heads + r) * key_seq + t) * per_row
        else:
            q_row = (token * q_heads + r) * per_row
        q_base = kb.let("qBase", q_row)
        q_elem = words.elem(cfg.q_type.scalar, 4)
        for j in range(n):
            q_out[q_base + at[j]] = words.to(kb, q_elem, k[j])

    def place() -> RowPlace:
        head = r - q_heads
        if is_v is not None:
            head = select(head, head - kv_heads, is_v)
        head = kb.let("kvHead", head)
        return RowPlace(dst.base(head, False), None if dst.side is None else dst.side(head))

    skip = done.lor(is_q) if dst.skip is None else done.lor(is_q).lor(dst.skip)
    dest = Destination(present_key, present_value, side, place, skip, is_v)
    quantise_rows(kb, q, lane, k, v, dest)

    dispatch = walks.dispatch(count, lanes, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, describe(cfg))
    batch = ceil_div(count, cfg.rows * key_seq)
    tokens = times(batch, key_seq)
    extents: dict[str, Any] = {
        "qkv": times(tokens, cfg.heads * cfg.head_dim),
        "q_out": times(tokens, cfg.q_heads * cfg.head_dim),
    }
    if weight is not None:
        extents["qk_norm_weight"] = cfg.norm_weights
    if bias is not None:
        extents["qkv_bias"] = cfg.heads * cfg.head_dim
    more, requires = cache.extents(batch, key_seq)
    extents |= more
    return walks.vector_extents(contract(kernel, extents, requires))


def _normed_rows(kb: KernelBuilder, cfg: QkvConfig, is_q: Val, is_v: Val | None) -> Val | None:
    """Whether this row is RMS-normed (None: every row): a Q row with ``q_norm``, a K row
    with ``k_norm`` (split rows: a V row never)."""
    if is_v is None:
        if cfg.q_norm and cfg.k_norm:
            return None
        return is_q if cfg.q_norm else kb.let("normed", ~is_q)
    if cfg.q_norm and cfg.k_norm:
        return kb.let("normed", ~is_v)
    if cfg.q_norm:
        return is_q
    return kb.let("normed", (~is_q).land(~is_v))


def _rotate_paired(
    kb: KernelBuilder,
    own: list[Val],
    at: list[Val],
    table: Any,
    pos: Val,
    half: Val,
    tag: str,
) -> list[Val]:
    """Paired vectors (the quantiser's paired runs, :attr:`kvdsl.nodes.quantise.Quantiser.
    paired`, or a strided Q row): vector ``j`` (the row's ``at[j]``, in its first half) and
    ``j + m`` are a NeoX pair, rotated in the lane with one entry of the packed table
    (``dense_append``'s products); ``tag`` prefixes the names."""
    m = len(own) // 2
    out: list[Val | None] = [None] * len(own)
    for j in range(m):
        entry = kb.let(f"{tag}tableAt{j}", pos * (half * 2) + at[j])
        cs, sn = kb.let(f"{tag}cs{j}", table[entry]), kb.let(f"{tag}sn{j}", table[entry + half])
        first, second = rotated_pair(own[j], own[j + m], cs, sn)
        out[j] = kb.let(f"{tag}r{j}", first)
        out[j + m] = kb.let(f"{tag}r{j + m}", second)
    return out


@contextmanager
def _always() -> Iterator[None]:
    """A block that is no block: its statements run where they stand."""
    yield


def _rotate_partners(
    kb: KernelBuilder,
    own: list[Val],
    partner_of: Any,
    norm: tuple[Val | None, Any, Val | None, Val | None],
    at: list[Val],
    table: Any,
    pos: Val,
    half: Val,
) -> list[Val]:
    """Each vector's partner ``HALF_V4`` away (``partner_of(vector)``: from the staged row or
    loaded again), normed as the lane's own (``norm``: invRms, the weights, their base and
    which rows), the pair rotated at position ``pos``."""
    inv_rms, weight, w_base, normed = norm
    out = []
    for j, o in enumerate(own):
        h = half
        partner = kb.let(f"at{j}Pair", (at[j] + h) % (h * 2))
        p = kb.let(f"pRaw{j}", partner_of(partner))
        if inv_rms is not None:
            p = _normed(kb, p, inv_rms, weight[w_base + partner], normed, f"p{j}")
        lo = at[j] < h
        dr = kb.let(f"dr{j}", at[j] % h)
        entry = kb.let(f"tableAt{j}", pos * (h * 2) + dr)
        cs, sn = kb.let(f"cs{j}", table[entry]), kb.let(f"sn{j}", table[entry + h])
        x0, x1 = select(p, o, lo), select(o, p, lo)
        out.append(kb.let(f"k{j}", rotate_pair(x0, x1, cs, sn, at[j], h)))
    return out


def _normed(kb: KernelBuilder, x: Any, inv_rms: Any, w: Any, normed: Any, name: str) -> Any:
    """``x * invRms * w`` (``dense_append``'s product), kept as ``x`` where ``normed`` is false
    (a row whose kind of head has no norm); ``normed`` None: every row is normed."""
    y = x * inv_rms * w
    return kb.let(name, y if normed is None else select(x, y, normed))
