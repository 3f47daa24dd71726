"""``attend_merge``: the second dispatch of a split-K ``attend``, combining its partials."""

from __future__ import annotations

from kvdsl.kernels.config import builds
from kvdsl.kernels.extents import times
from kvdsl.ir import with_contract
from kvdsl.ir import Dispatch, Kernel, KernelBuilder, call, f32, max_, min_, select, u32
from kvdsl.ir.ops import Op
from kvdsl.kernels.attend.config import HIDDEN, MERGE_CHUNKS, V4, AttendConfig, AttendMergeConfig
from kvdsl.kernels.attend.kernel import row_index

from kvdsl.nodes import walks, words
from kvdsl.nodes.index import flat_index
from kvdsl.nodes.words import splat


@builds(AttendMergeConfig)
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
    at = row_index(cfg, cfg.o_layout, b, head, qi, queries) * d4 + i
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
    return walks.vector_extents(with_contract(kernel, extents))
