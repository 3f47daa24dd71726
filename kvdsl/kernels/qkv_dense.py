"""The ``qkv`` kernel into a dense cache (``format`` set): :mod:`kvdsl.kernels.qkv`'s mode with
K and V quantised by the dense quantiser (:func:`kvdsl.nodes.quantise.quantise_rows`).

The walk is one invocation per ``vec4`` of a Q row or of a (K, V) pair of rows (``Q_HEADS +
KV_HEADS`` rows per token: the quantiser stores a K row and its V row together), rows whole
inside a workgroup. Every input element is loaded once: the rotary partner and the norm's
partials come from workgroup memory after one barrier.
"""

from __future__ import annotations

from typing import Any

from kvdsl.ir import Kernel, KernelBuilder, array, convert, f32, i32, inverse_sqrt, select, u32, vec
from kvdsl.kernels.config import MAX_STORAGE_BUFFERS, ROTARY_TABLE, ceil_div, contract, times
from kvdsl.kernels.qkv import QkvConfig, QLayout, as_u32, describe, destination
from kvdsl.nodes import walks, words
from kvdsl.nodes.quantise import Destination, Quantiser, RowPlace, quantise_rows
from kvdsl.nodes.rmsnorm import row_sum_of_squares
from kvdsl.nodes.rotary import rotated_pair

F32X4 = vec(4, f32)


def qkv_dense(cfg: QkvConfig, name: str = "qkv") -> Kernel:
    """The ``qkv`` kernel into a dense cache: one invocation per ``vec4`` of a Q row or of a
    (K, V) pair of rows (``Q_HEADS + KV_HEADS`` rows per token), rows whole inside a
    workgroup. Each invocation stages its (biased) vector in workgroup memory, so that the
    rotary partner and the norm's sum come from there after one barrier (every input element
    is loaded once); Q is stored, then the K and V rows go through the dense quantiser
    (:func:`kvdsl.nodes.quantise.quantise_rows`), the Q rows skipped. K's products are
    ``dense_append``'s (:func:`kvdsl.kernels.build.flat_k`'s), in the same order."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    src = words.binding(kb, "qkv", cfg.input_type.scalar, 4)
    seqlens = kb.binding("seqlens_k", i32, "read")
    weight = words.binding(kb, "qk_norm_weight", f32, 4) if cfg.norm else None
    table = words.binding(kb, ROTARY_TABLE, f32, 4) if cfg.rotary else None
    bias = words.binding(kb, "qkv_bias", f32, 4) if cfg.bias else None
    q_out = words.binding(kb, "q_out", cfg.q_type.scalar, 4, "read_write")
    present_key = kb.binding("present_key", u32, "read_write")
    present_value = kb.binding("present_value", u32, "read_write")
    side = None if cfg.inline else kb.binding("present_scales", f32, "read_write")
    assert len(kb.bindings) <= MAX_STORAGE_BUFFERS
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    per_row = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
    row_words = kb.const("ROW_WORDS", u32, cfg.row_words)
    q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
    kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    heads = kb.const("HEADS", u32, cfg.heads)
    rows_per_token = kb.const("ROWS", u32, cfg.q_heads + cfg.kv_heads)
    half = kb.const("HALF_V4", u32, cfg.head_dim // 8) if cfg.rotary else None
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.norm else None
    count, key_seq, seq = kb.param("count"), kb.param("keySeq"), kb.param("seq")

    it = walks.vectors(kb, cfg.fold, count, per_row, 4, guard=False)
    d = it.d
    kb.comment("Row = token * ROWS + r: Q heads, then the (K, V) pairs of heads.")
    r = kb.let("r", it.row % rows_per_token)
    token = kb.let("token", it.row / rows_per_token)
    t = kb.let("t", token % key_seq)
    b = kb.let("b", token / key_seq)
    is_q = kb.let("isQ", r < q_heads)
    kb.comment("K head r - Q_HEADS sits at input head r, its V head KV_HEADS further.")
    dst = destination(kb, seqlens, b, t, seq, key_seq)
    k_row = kb.let("kRow", (token * heads + r) * per_row)
    x = kb.let("xRaw", words.as_f32(kb, src[k_row + d]))
    v = kb.var("v", F32X4, words.splat(F32X4, 0.0))
    with kb.if_(~is_q):
        v.set(words.as_f32(kb, src[k_row + kv_heads * per_row + d]))
    if bias is not None:
        x = kb.let("xBias", x + bias[r * per_row + d])
        with kb.if_(~is_q):
            v.set(v + bias[(r + kv_heads) * per_row + d])
    v_val = kb.let("vOwn", v)
    normed = None
    w0 = w1 = None
    if weight is not None:
        normed = is_q if not cfg.k_norm else (~is_q if not cfg.q_norm else None)
        if cfg.q_norm and cfg.k_norm:
            w_base = kb.let("wBase", select(per_row, as_u32(0), is_q))
        else:
            w_base = as_u32(0)
    cs = sn = None
    low = dr = None
    if table is not None:
        low = kb.let("low", d < half)
        dr = kb.let("dr", d % half)
        at = kb.let("tableAt", dst.position * (half * 2) + dr)
        cs, sn = kb.let("cs", table[at]), kb.let("sn", table[at + half])
    if weight is not None:
        if table is not None:
            w0 = kb.let("w0", weight[w_base + dr])
            w1 = kb.let("w1", weight[w_base + (dr + half)])
        else:
            w0 = kb.let("kW", weight[w_base + d])
    if table is not None:
        kb.comment("Stage the vector: its rotary partner reads it after the barrier.")
        staged = kb.workgroup_var("xRow", array(F32X4, cfg.workgroup_size))
        staged[kb.lid.x] = x
    inv_rms = None
    if weight is not None:
        kb.comment("RMSNorm: the row's sum of squares, reduced in workgroup memory.")
        ms = row_sum_of_squares(kb, x, d, per_row, cfg.workgroup_size, cfg.head_dim // 4)
        inv_rms = kb.let("invRms", inverse_sqrt(ms / convert(f32, head_dim) + eps))
    elif table is not None:
        kb.barrier()
    k = x
    if table is not None:
        first = kb.let("rowStart", kb.lid.x - d)
        partner = kb.let("xPair", staged[first + select(dr, dr + half, low)])
        raw0 = kb.let("x0Raw", select(partner, x, low))
        raw1 = kb.let("x1Raw", select(x, partner, low))
        x0, x1 = raw0, raw1
        if inv_rms is not None:
            x0 = kb.let("x0", raw0 * inv_rms * w0)
            x1 = kb.let("x1", raw1 * inv_rms * w1)
        a, c = rotated_pair(x0, x1, cs, sn)
        turned = kb.let("turned", select(c, a, low))
        if inv_rms is not None and normed is not None:
            kb.comment("A row without a norm rotates its own values.")
            a, c = rotated_pair(raw0, raw1, cs, sn)
            turned = kb.let("k", select(select(c, a, low), turned, normed))
        k = turned
    elif inv_rms is not None:
        k = kb.let("kNormed", x * inv_rms * w0)
        if normed is not None:
            k = kb.let("k", select(x, k, normed))
    done = kb.let("done", it.e >= count * per_row)
    with kb.if_(is_q.land(~done)):
        if cfg.q_layout is QLayout.BNSH:
            q_row = ((b * q_heads + r) * key_seq + t) * per_row
        else:
            q_row = (token * q_heads + r) * per_row
        q_out[q_row + d] = words.to(kb, words.elem(cfg.q_type.scalar, 4), k)

    def place() -> RowPlace:
        row = kb.let("dstRow", (b * kv_heads + (r - q_heads)) * seq + dst.row)
        side_at = None if side is None else row * (2 * cfg.fmt.stats)
        return RowPlace(row * row_words, side_at)

    dest = Destination(present_key, present_value, side, place, done.lor(is_q))
    quantiser = Quantiser(cfg.fmt, cfg.inline, cfg.head_dim, cfg.workgroup_size)
    quantise_rows(kb, quantiser, d, [k], [v_val], dest)

    dispatch = walks.dispatch(count, per_row, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, describe(cfg))
    batch = ceil_div(count, (cfg.q_heads + cfg.kv_heads) * key_seq)
    tokens = times(batch, key_seq)
    extents: dict[str, Any] = {
        "qkv": times(tokens, cfg.heads * cfg.head_dim),
        "seqlens_k": batch,
        "q_out": times(tokens, cfg.q_heads * cfg.head_dim),
        "present_key": times(batch, seq, cfg.kv_heads * cfg.row_words),
        "present_value": times(batch, seq, cfg.kv_heads * cfg.row_words),
    }
    if side is not None:
        extents["present_scales"] = times(batch, seq, cfg.kv_heads * 2 * cfg.fmt.stats)
    if weight is not None:
        extents["qk_norm_weight"] = cfg.norm_weights
    if table is not None:
        extents[ROTARY_TABLE] = times(seq, cfg.head_dim)
    if bias is not None:
        extents["qkv_bias"] = cfg.heads * cfg.head_dim
    requires = {"keySeq >= 1": key_seq >= 1, "keySeq <= seq": key_seq <= seq}
    return walks.vector_extents(contract(kernel, extents, requires))
