"""A dense format's rows (not ggml's): each lane's run reduced to a partial statistic, K's and
V's in one workgroup slot; after one barrier every lane combines its row's partials in order
(exact, so every lane computes the same scale), packs its own code words and stores them in
:attr:`Quantiser.store_width`-word stores; lane 0 stores the inline header or the side
scales."""

from __future__ import annotations

from typing import Callable, Sequence

from kvdsl.ir import KernelBuilder, Val, array, construct, lit, select, u32, vec
from kvdsl.nodes.formats import Scale
from kvdsl.nodes.quantise.quantiser import Destination, Quantiser, RowPlace
from kvdsl.nodes.quantise.rows import (
    F32X2,
    F32X4,
    LANES,
    Runs,
    Staging,
    let_place,
    run_stat,
    store_to,
)


def dense_rows(kb: KernelBuilder, q: Quantiser, lane: Val, runs: Runs, dest: Destination) -> None:
    """A dense format's rows: partials of K and V in one workgroup slot, one barrier, the row's
    partials combined in order by every lane, its code words stored."""
    fmt = q.fmt
    lid = kb.lid.x
    partials = [run_stat(kb, fmt, f"p{which.upper()}", run) for which, run in runs.items()]
    kb.comment("Each lane's statistic of its run, K's and V's in one workgroup slot; after")
    kb.comment(f"the barrier every lane combines its row's {q.lanes} in order.")
    if q.split:
        stats = kb.workgroup_var("rowStats", array(F32X2, q.workgroup_size))
        stats[lid] = partials[0]
    else:
        stats = kb.workgroup_var("rowStats", array(F32X4, q.workgroup_size))
        stats[lid] = construct(F32X4, *partials)
    kb.barrier()
    first = kb.let("statLane", lid - lane)
    acc = {}
    for j in range(q.lanes):
        s = kb.let(f"rowStat{j}", stats[first + j])
        parts = {"x": s} if q.split else {"k": s.member("xy"), "v": s.member("zw")}
        for which, part in parts.items():
            if j == 0:
                acc[which] = kb.var(f"stat{which.upper()}", F32X2, part)
            else:
                acc[which].set(fmt.combine(acc[which], part))
    scales = {which: fmt.scale_of(kb, f"{which}Scale", stat) for which, stat in acc.items()}
    if q.staged:
        staging = Staging(kb, q, lane)
        for which in runs:
            _dense_words(kb, q, which, lane, runs[which], scales[which], staging.put(which))

        def stored(place: RowPlace) -> None:
            _side_scales(q, place, dest, scales)

        staging.flush(dest, stored)
        return
    if dest.skip is not None:
        kb.leave_if(dest.skip)
    place = let_place(kb, dest.place())
    for which in runs:
        words = _dense_words(kb, q, which, lane, runs[which], scales[which])
        _store_dense(kb, q, which, lane, words, scales[which], store_to(kb, dest, which), place)
    if dest.scales is not None:
        with kb.if_(lane.eq(0)):
            _side_scales(q, place, dest, scales)


def _side_scales(q: Quantiser, place: RowPlace, dest: Destination, scales: dict) -> None:
    """The row's scales (and zero points) at ``side[place.side ..]``, K's then V's (a split V
    row's after K's place); none inline."""
    side = dest.scales
    if side is None:
        return
    n = q.fmt.stats
    at = 0
    for which, sc in scales.items():
        base = place.side
        if which == "x":
            base = base + select(lit(0, u32), lit(n, u32), dest.tensor)
        for x in [sc.scale] + ([] if sc.zero is None else [sc.zero]):
            side[base + at if at else base] = x
            at += 1


def _dense_words(
    kb: KernelBuilder,
    q: Quantiser,
    which: str,
    lane: Val,
    run: Sequence[Val],
    sc: Scale,
    put: Callable[[Val | int, Val], None] | None = None,
) -> list[Val]:
    """Lane ``lane``'s code words of its ``run`` (word ``w`` of the lane: values ``w *
    per_word ..``, field ``l`` value ``l``), row word ``header + lane * lane_words + w``; with
    ``put`` (staging) also each of them, and from lane 0 the inline header, as ``put(w,
    word)``."""
    fmt = q.fmt
    values = [x.member(c) for x in run for c in LANES]
    per = fmt.per_word
    words = [
        kb.let(
            f"{which}W{w}",
            fmt.codes_word(kb, f"{which}Q{w}_", values[w * per : (w + 1) * per], sc),
        )
        for w in range(q.lane_words)
    ]
    if put is not None:
        head = fmt.header_words(q.inline)
        for w, word in enumerate(words):
            at = q.word_at(lane, w)
            put(at + head if head else at, word)
        if head:
            with kb.if_(lane.eq(0)):
                for i, word in enumerate(fmt.header(sc)):
                    put(i, word)
    return words


def _store_dense(
    kb: KernelBuilder,
    q: Quantiser,
    which: str,
    lane: Val,
    words: list[Val],
    sc: Scale,
    out: Callable[[Val, Val], None],
    place: RowPlace,
) -> None:
    """Lane ``lane``'s code ``words`` (:func:`_dense_words`) at ``place``, ``out(i, x)``
    storing element ``i`` of the cache binding, in stores of :attr:`Quantiser.store_width`
    words; lane 0 also the inline header of scale ``sc``."""
    fmt = q.fmt
    head = fmt.header_words(q.inline)
    width = q.store_width
    base = place.words
    codes = base + head if head else base
    if q.strided:
        at = kb.let(f"{which}At", codes + lane)
        for w, word in enumerate(words):
            out(at + q.lanes * w if w else at, word)
    elif q.paired:
        for i in range(q.lane_words // width):
            out(_in(codes + q.word_at(lane, i * width), width), _chunk(words, i, width))
    else:
        stores = q.lane_words // width
        at = kb.let(f"{which}At", _in(codes, width) + (lane * stores if stores > 1 else lane))
        for i in range(stores):
            out(at + i if i else at, _chunk(words, i, width))
    if head:
        with kb.if_(lane.eq(0)):
            header = fmt.header(sc)
            for i in range(head // width):
                out(_in(base, width) + i if i else _in(base, width), _chunk(header, i, width))


def _in(word: Val, width: int) -> Val:
    """A u32 word index as an index of a binding of ``width``-word vectors."""
    return word if width == 1 else word / width


def _chunk(words: list[Val], i: int, width: int) -> Val:
    """Words ``[i * width, (i + 1) * width)`` as one store's value."""
    part = words[i * width : (i + 1) * width]
    return part[0] if width == 1 else construct(vec(width, u32), *part)
