"""The dense quantiser: one row program that any mode calls to quantise the K and V rows its
invocations hold and store them in a dense format (:mod:`kvdsl.nodes.formats`), each row's (or
ggml block's) scale reduced in the kernel.

A mode walks its rows its own way and hands each row to :func:`quantise_rows`:

- :class:`Quantiser` says how a row of ``head_dim`` values of format ``fmt`` (scales inline or in
  a side buffer) is spread over a workgroup's invocations: ``lanes`` invocations per row, each
  holding ``vectors`` consecutive ``vec4<f32>`` of it, lane ``l`` (:func:`quantise_rows`'s
  ``lane``) vectors ``[l * vectors, (l + 1) * vectors)``. A row's lanes are adjacent
  invocations of one workgroup (local ids ``lid - lane .. lid - lane + lanes - 1``), so
  ``workgroup_size`` divides by ``lanes``.
- The caller loads its lane's K and V values (rotated, K-normed: as they are to be stored),
  then calls :func:`quantise_rows` with a :class:`Destination`: the cache bindings and a hook
  that gives the stored row's place (:class:`RowPlace`, its u32 word base in the cache binding
  and its side scales' base), so that contiguous, buffer-sharing, paged and fused kernels share
  one quantiser. The hook is called after the row's statistics are reduced, in the lanes that
  store, so it may read a page table or a slot mapping that is only valid for real rows.
- Every invocation of the workgroup calls :func:`quantise_rows` in uniform control flow (it
  waits at workgroup barriers): an invocation past the caller's rows holds a copy of a real
  row's values in a row of its own and is named by ``Destination.skip``, as is a row the cache
  does not take. Skipped lanes leave after the barriers (:meth:`KernelBuilder.leave_if`), before
  anything is stored; what the caller builds after the call runs only in the storing lanes.
  A caller that calls it more than once per invocation (a loop over rows) waits at a barrier
  between the calls, as workgroup memory is reused.

The row program: each lane stages its partial statistic (and, where another lane's values make
its words, its values) in workgroup memory; after a barrier the row's first lanes combine
groups of partials (a ggml block's eight, or :func:`group`'s share of a dense row) into a second
array; after a second barrier every lane combines the row's groups (or reads its blocks') and
writes its words (:func:`store_row`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from kvdsl.ir import Buffer, KernelBuilder, Shared, Val, array, f32, vec
from kvdsl.nodes import formats
from kvdsl.nodes.formats import Format, Scale

F32X4 = vec(4, f32)
F32X2 = vec(2, f32)
LANES = ("x", "y", "z", "w")


@dataclass(frozen=True)
class Quantiser:
    """A dense format's quantising row program: ``fmt`` (:data:`kvdsl.nodes.formats.FORMATS`)
    with its scales ``inline`` or in a side buffer, rows of ``head_dim`` values, reduced in
    workgroups of ``workgroup_size`` invocations (a multiple of :attr:`lanes`)."""

    fmt: Format
    inline: bool
    head_dim: int
    workgroup_size: int

    @property
    def vectors(self) -> int:
        """``vec4<f32>`` values of a row each lane holds (consecutive)."""
        return 1

    @property
    def lanes(self) -> int:
        """Lanes (adjacent invocations) per row."""
        return self.head_dim // (4 * self.vectors)

    @property
    def row_words(self) -> int:
        """u32 words of one stored row in the cache binding (``ROW_WORDS``)."""
        return self.fmt.row_words(self.head_dim, self.inline)

    @property
    def side_words(self) -> int:
        """f32 words of one row's scales in the side buffer, K's then V's (0 inline)."""
        return 2 * self.fmt.side_words(self.inline)


@dataclass(frozen=True)
class RowPlace:
    """Where a stored row goes: ``words``, the u32 index of its first word in the cache
    binding (K's in ``present_key``, V's in ``present_value``: the same index); ``side``, the
    f32 index of its first scale in the side buffer (K's ``S`` scale words then V's), None
    inline."""

    words: Val
    side: Val | None = None


@dataclass(frozen=True)
class Destination:
    """The bindings a row is stored in (u32 ``key`` and ``value``, f32 side ``scales`` or None
    inline), ``place`` (called once, in the storing lanes, after the statistics are reduced:
    the row's :class:`RowPlace`), and ``skip``: the lanes that store nothing (past the caller's
    rows, or a row the cache does not take), None when every lane stores."""

    key: Buffer
    value: Buffer
    scales: Buffer | None
    place: Callable[[], RowPlace]
    skip: Val | None = None


def quantise_rows(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: Sequence[Val],
    v: Sequence[Val],
    dest: Destination,
) -> None:
    """Quantise and store the K and V rows the workgroup's lanes hold.

    This invocation is lane ``lane`` (u32, ``0 .. q.lanes - 1``) of its row, holding its
    ``q.vectors`` ``vec4<f32>`` values of K (``k``) and of V (``v``) in order; every invocation
    of the workgroup calls this in uniform control flow (see the module docstring). After the
    call the lanes of ``dest.skip`` have left.
    """
    fmt = q.fmt
    if len(k) != q.vectors or len(v) != q.vectors:
        raise ValueError(
            f"quantise_rows takes {q.vectors} vectors of K and of V per lane, not {len(k)} and"
            f" {len(v)}"
        )
    if (dest.scales is None) != q.inline:
        want = "no side scales binding" if q.inline else "a side scales binding"
        raise ValueError(f"format {fmt.name} with scales {_place(q)} needs {want}")
    own_k, own_v = k[0], v[0]
    lid = kb.lid.x
    wg = q.workgroup_size
    xk = xv = None
    if fmt.ggml:
        kb.comment("Stage the row's values and each vector's partial statistic in workgroup")
        kb.comment("memory.")
        xk = kb.workgroup_var("xk", array(f32, wg * 4))
        xv = kb.workgroup_var("xv", array(f32, wg * 4))
        for i, c in enumerate(LANES):
            xk[lid * 4 + i] = own_k.member(c)
            xv[lid * 4 + i] = own_v.member(c)
    elif fmt.per_word != 4:  # int8 packs each vector's own codes: no values staged
        kb.comment("Stage the row's vectors and each vector's partial statistic in workgroup")
        kb.comment("memory.")
        xk = kb.workgroup_var("xk", array(F32X4, wg))
        xv = kb.workgroup_var("xv", array(F32X4, wg))
        xk[lid] = own_k
        xv[lid] = own_v
    else:
        kb.comment("Stage each vector's partial statistic in workgroup memory.")
    sk = kb.workgroup_var("statK", array(F32X2, wg))
    sv = kb.workgroup_var("statV", array(F32X2, wg))
    sk[lid] = formats.partial(kb, fmt, "pK", own_k)
    sv[lid] = formats.partial(kb, fmt, "pV", own_v)
    kb.barrier()
    first = kb.let("rowLane", lid - lane)
    per_row = q.lanes
    g = formats.BLOCK // 4 if fmt.ggml else group(per_row)
    n_stats = per_row // g
    if fmt.ggml:
        kb.comment(f"Each block's statistic, once: the row's first {n_stats} invocations each")
        kb.comment(f"combine a block's {g} partials in order.")
    else:
        kb.comment(f"A row's statistic in two levels: its first {n_stats} invocations each")
        kb.comment(f"combine {g} partials in order, then every invocation the {n_stats} groups.")
    stat_k = kb.workgroup_var("groupK", array(F32X2, wg // g))
    stat_v = kb.workgroup_var("groupV", array(F32X2, wg // g))
    stat0 = kb.let("rowGroup", first / g)
    with kb.if_(lane < n_stats):
        at = first + lane * g
        stat_k[stat0 + lane] = formats.group_stat(kb, fmt, "gK", sk, at, g)
        stat_v[stat0 + lane] = formats.group_stat(kb, fmt, "gV", sv, at, g)
    kb.barrier()
    if dest.skip is not None:
        kb.leave_if(dest.skip)
    place = dest.place()
    for which, own, xs, stats, out, side_at in (
        ("k", own_k, xk, stat_k, dest.key, 0),
        ("v", own_v, xv, stat_v, dest.value, fmt.stats),
    ):
        store_row(
            kb, q, which, xs, stats, first, stat0, lane, own, out, place, dest.scales, side_at,
            n_stats,
        )  # fmt: skip


def _place(q: Quantiser) -> str:
    return "inline" if q.inline else "side"


def store_row(
    kb: KernelBuilder,
    q: Quantiser,
    which: str,
    xs: Shared | None,
    stats: Shared,
    first: Val,
    stat0: Val,
    d: Val,
    own: Val,
    out: Buffer,
    place: RowPlace,
    side: Buffer | None,
    side_at: int,
    n_stats: int,
) -> None:
    """Store the staged row (from its first invocation ``first``: values ``xs[first * 4 ..]``
    for ggml, vectors ``xs[first ..]`` for a 4-bit dense format, none for int8; partials
    ``stats[stat0 ..]``: ggml's block statistics, a dense row's ``n_stats`` group statistics)
    at ``place`` in ``out``, this invocation holding vector ``d`` (``own``) of it. ggml: its
    words of the row's pairs of blocks. Dense: the header words ``d < header``, then code word
    ``d`` of int8 from ``own`` itself (four codes, one vector), or for an even ``d`` code word
    ``d / 2`` of a 4-bit format (``own`` and the next vector's four staged values); with side
    scales (``d == 0``) its stats at ``side[place.side + side_at ..]``."""
    fmt = q.fmt
    if fmt.ggml:
        lane0 = kb.let(f"{which}Lane0", first * 4)

        def elem(e: Val) -> Val:
            return xs[lane0 + e]

        blocks = q.head_dim // formats.BLOCK

        def block_scale(name: str, blk: Val) -> Scale:
            stat = kb.let(f"{name}Stat", stats[stat0 + blk])
            return formats.scale_of(kb, fmt, name, stat)

        base = kb.let(f"{which}Base", place.words)

        def store(w: Val, word: Val) -> None:
            out[base + w] = word

        if fmt.name == "q8_0":
            formats.q8_0_words(kb, which, own, d, elem, block_scale, blocks, store)
        else:
            formats.q4_0_words(kb, which, d, elem, block_scale, blocks, store)
        return
    stat = formats.group_stat(kb, fmt, f"{which}Stat", stats, stat0, n_stats)
    sc = formats.scale_of(kb, fmt, f"{which}Scale", stat)
    head = fmt.header_words(q.inline)
    base = kb.let(f"{which}Base", place.words)
    if head:
        with kb.if_(d < head):
            out[base + d] = formats.header_word(fmt, d, sc)
    if fmt.per_word == 4:
        out[base + (d + head)] = formats.vector_word(kb, fmt, f"{which}Q", own, sc)
    else:
        with kb.if_((d % 2).eq(0)):
            kb.comment("Eight codes a word: an even vector's own four, then the next vector's.")
            nxt = kb.let(f"{which}Next", xs[first + d + 1])
            staged = [nxt.member(c) for c in LANES]
            word = formats.vector_word(kb, fmt, f"{which}Q", own, sc, staged)
            out[base + (d / 2 + head)] = word
    if side is not None:
        with kb.if_(d.eq(0)):
            side[place.side + side_at] = sc.scale
            if fmt.asymmetric:
                side[place.side + (side_at + 1)] = sc.zero


def group(per_row: int) -> int:
    """The partials a row's first invocations combine each in the first level of its
    statistic: the divisor ``g`` of ``per_row`` with the fewest loads ``g + per_row / g`` (the
    larger of equals)."""
    return min((g for g in range(1, per_row + 1) if per_row % g == 0),
               key=lambda g: (g + per_row // g, -g))  # fmt: skip
