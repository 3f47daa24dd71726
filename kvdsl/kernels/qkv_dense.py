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
before the quantiser, which skips Q's rows. With a ``rotation`` K's rows are then
Walsh-Hadamard rotated by their lanes together, through workgroup memory
(:func:`kvdsl.nodes.transforms.rotated_lane`, ``dense_append``'s), before the quantiser. A
format with its own rotation (``ort_q4``) has the lane hold a whole row, and K's and V's rows
turn into its basis in registers before the quantiser.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext

from kvdsl.kernels.extents import ceil_div, times
from kvdsl.ir.builder import Shared
from kvdsl.ir import Kernel, KernelBuilder, Val, array, f32, select, vec

from kvdsl.nodes.formats import Format
from kvdsl.kernels.qkv_config import QkvConfig, describe
from kvdsl.kernels.qkv_frame import Frame, Target, normed_rows, qkv_contract
from kvdsl.nodes import walks, words
from kvdsl.nodes.quantise import Destination, RowPlace, quantise_rows
from kvdsl.nodes.rmsnorm import Norm, reduced_inverse_rms
from kvdsl.nodes.rotary import Rotation, rotate_lane_pairs, rotate_with_partner
from kvdsl.nodes.transforms import rotated_lane

F32X4 = vec(4, f32)


def qkv_dense(cfg: QkvConfig, name: str, cache: Target) -> Kernel:
    """Build the ``qkv`` kernel of a config with a dense ``format``, appending into ``cache``."""
    q = cfg.quantiser
    n = q.vectors
    kb = KernelBuilder(name, cfg.workgroup_size)
    walk = ({} if cfg.split else {"ROWS": cfg.rows}) | {"ROW_LANES": q.lanes}
    f = Frame(kb, cfg, cache, q, walk)
    rows_per_token, lanes = f.walk.get("ROWS", f.heads), f.walk["ROW_LANES"]
    kb.comment(f"ROW_LANES invocations per row, each holding {n} vectors of it.")
    it = walks.vectors(kb, cfg.fold, f.count, lanes, 1, guard=False)
    lane = it.d
    if cfg.split:
        kb.comment("Row = token * HEADS + r: input head r (Q heads, then K heads, then V heads).")
    else:
        kb.comment("Row = token * ROWS + r: Q heads, then the (K, V) pairs of heads.")
    r, token, t, b = f.row(it.row, rows_per_token, "r")
    is_q = kb.let("isQ", r < f.q_heads)
    is_v = kb.let("isV", r >= f.q_heads + f.kv_heads) if cfg.split else None
    dst = cache.place(kb, b, t, token, f.key_seq)
    if not cfg.split:
        kb.comment("Q head r, or K head r - Q_HEADS: input head r; its V head KV_HEADS further.")
    k_row = kb.let("kRow", (token * f.heads + r) * f.per_row)
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

    def load_input(i: Val) -> Val:
        """The row's vector ``i`` as the input holds it, the bias added."""
        xi = words.as_f32(kb, f.src[k_row + i])
        return xi if f.bias is None else xi + f.bias[r * f.per_row + i]

    x = []
    for j in range(n):
        xj = words.as_f32(kb, f.src[k_row + at[j]])
        if f.bias is not None:
            xj = xj + f.bias[r * f.per_row + at[j]]
        x.append(kb.let(f"x{j}", xj))
    v = None
    if not cfg.split:
        vs = [kb.var(f"v{j}", F32X4, words.splat(F32X4, 0.0)) for j in range(n)]
        with kb.if_(~is_q):
            for j in range(n):
                vj = words.as_f32(kb, f.src[k_row + f.kv_heads * f.per_row + at[j]])
                if f.bias is not None:
                    vj = vj + f.bias[(r + f.kv_heads) * f.per_row + at[j]]
                vs[j].set(vj)
        v = [kb.let(f"vOwn{j}", vs[j]) for j in range(n)]
    staged = None
    if f.table is not None and not q.paired and not cfg.pair_loads:
        kb.comment("Stage the lane's vectors: their rotary partners read them after the barrier.")
        staged = kb.workgroup_var("xRow", array(F32X4, cfg.workgroup_size * n))
        if q.strided:
            kb.comment("Strided lanes: each vector at its place in the row.")
            first = kb.let("rowVectors", (kb.lid.x - lane) * n)
        for j in range(n):
            staged[first + at[j] if q.strided else kb.lid.x * n + j] = x[j]
    norm = None
    if f.weight is not None:
        sums = (tuple(x), lane, lanes, cfg.workgroup_size, q.lanes)
        inv_rms = reduced_inverse_rms(kb, f.head_dim, f.eps, *sums, what="RMSNorm")
        normed = normed_rows(kb, cfg, is_q, is_v)
        w_base = f.weight_base(is_q)
        norm = Norm(inv_rms, lambda a: f.weight[w_base + a], normed)
    elif staged is not None:
        kb.barrier()
    own = x
    if norm is not None:
        own = [kb.let(f"n{j}", norm.apply(xj, at[j])) for j, xj in enumerate(x)]
    rotated = ~is_v if is_v is not None else None  # the rows rotary turns (all but V's)
    rot = None
    if f.table is not None:
        rot = Rotation(f.table, f.table, dst.position, f.half, cfg.partial, packed=True)
    if f.table is None:
        k = [kb.let(f"k{j}", o) for j, o in enumerate(own)]
    elif q.paired:
        k = [kb.var(f"y{j}", F32X4, o) for j, o in enumerate(own)]
        with kb.if_(rotated) if rotated is not None else nullcontext():
            for kj, y in zip(k, rotate_lane_pairs(kb, own, lambda j: at[j], rot, "r")):
                kj.set(y)
    else:
        k = [kb.var(f"y{j}", F32X4, o) for j, o in enumerate(own)]
        if staged is not None and not q.strided:
            first = kb.let("rowVectors", (kb.lid.x - lane) * n)
        if strided_q:
            with kb.if_(is_q):
                ys = rotate_lane_pairs(kb, own, lambda j: at[j], rot, "qr", "q")
                for kj, y in zip(k, ys):
                    kj.set(y)

        def partner_of(i: Val, j: int) -> Val:
            if staged is not None:
                p = staged[first + i]
            else:
                kb.comment("The partner loaded again from the input (its lane's, from the cache).")
                p = load_input(i)
            p = kb.let(f"pRaw{j}", p)
            return p if norm is None else kb.let(f"p{j}", norm.apply(p, i))

        if strided_q:
            block = kb.elif_(rotated) if rotated is not None else kb.else_()
        else:
            block = kb.if_(rotated) if rotated is not None else nullcontext()
        with block:
            ys = [
                rotate_with_partner(
                    kb, o, at[j], functools.partial(partner_of, j=j), rot, j, ("at", "dr")
                )
                for j, o in enumerate(own)
            ]
            for kj, y in zip(k, ys):
                kj.set(y)
    q_rows = k
    if cfg.rotation:
        k = _rotated_k(kb, cfg, k, is_q, is_v, lane, staged)
    if q.fmt.rotated:
        k, v = _own_basis(kb, q.fmt, k, v, is_q)
    done = kb.let("done", it.e >= f.count * lanes)
    with kb.if_(is_q.land(~done)):
        q_base = f.q_base(b, r, t, token)
        q_elem = words.elem(cfg.q_type.scalar, 4)
        for j in range(n):
            f.q_out[q_base + at[j]] = words.to(kb, q_elem, q_rows[j])

    def place() -> RowPlace:
        head = r - f.q_heads
        if is_v is not None:
            head = select(head, head - f.kv_heads, is_v)
        head = kb.let("kvHead", head)
        return RowPlace(dst.base(head, False), None if dst.side is None else dst.side(head))

    skip = done.lor(is_q) if dst.skip is None else done.lor(is_q).lor(dst.skip)
    dest = Destination(f.present_key, f.present_value, f.side, place, skip, is_v)
    quantise_rows(kb, q, lane, k, v, dest)

    dispatch = walks.dispatch(f.count, lanes, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, describe(cfg))
    batch = ceil_div(f.count, cfg.rows * f.key_seq)
    tokens = times(batch, f.key_seq)
    io = {
        "qkv": times(tokens, cfg.heads * cfg.head_dim),
        "q_out": times(tokens, cfg.q_heads * cfg.head_dim),
    }
    return qkv_contract(kernel, cfg, cache, batch, f.key_seq, io)


def _rotated_k(
    kb: KernelBuilder,
    cfg: QkvConfig,
    k: list[Val],
    is_q: Val,
    is_v: Val | None,
    lane: Val,
    staged: Shared | None,
) -> list[Val]:
    """The lane's vectors ``k`` (normed and NeoX-rotated) with a K row's Walsh-Hadamard rotated
    over blocks of ``cfg.rotation``, the row's lanes together
    (:func:`kvdsl.nodes.transforms.rotated_lane`, ``dense_append``'s products): every row's
    lanes rotate it (they meet at a barrier), and Q's and V's rows keep theirs (``is_v`` None:
    the row is a Q head or a K head). Their vectors are exchanged through the staged row, where
    there is one (``staged``)."""
    q = cfg.quantiser
    is_k = kb.let("isK", ~is_q if is_v is None else (~is_q).land(~is_v))
    args = (q.vector_at, lane, q.lanes, cfg.rotation, cfg.workgroup_size)
    ys = rotated_lane(kb, list(k), *args, staged)
    return [kb.let(f"kq{j}", select(kj, y, is_k)) for j, (kj, y) in enumerate(zip(k, ys))]


def _own_basis(
    kb: KernelBuilder, fmt: Format, k: list[Val], v: list[Val] | None, is_q: Val
) -> tuple[list[Val], list[Val] | None]:
    """A K or V row's vectors (``k``, and ``v`` where a row is a pair of heads) in the basis of
    ``fmt``'s own rotation (:meth:`kvdsl.nodes.formats.Format.rotate_row`: the lane holds the
    whole row); Q's rows keep theirs (the quantiser skips them)."""
    kb.comment(f"K's and V's rows in {fmt.name}'s own basis (the lane holds them whole).")
    out = {"k": [kb.var(f"kOrtRow{j}", F32X4, x) for j, x in enumerate(k)]}
    if v is not None:
        out["v"] = [kb.var(f"vOrtRow{j}", F32X4, x) for j, x in enumerate(v)]
    with kb.if_(~is_q):
        for which, xs in (("k", k), ("v", v)):
            if which in out:
                for o, y in zip(out[which], fmt.rotate_row(kb, f"{which}Ort", list(xs))):
                    o.set(y)
    return out["k"], out.get("v")
