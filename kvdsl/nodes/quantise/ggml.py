"""ggml's rows (:class:`kvdsl.nodes.formats.Ggml`), a lane per 32-value block: each lane
computes its block's scale from its own values, with no cross-lane reduction; the word of a pair
of blocks that holds the even block's last codes and the odd block's f16 scale is written by the
even block's lane, which reads its neighbour's scale from workgroup memory after one barrier
(rows of one block pass none)."""

from __future__ import annotations

from typing import Callable, Sequence

from kvdsl.ir import KernelBuilder, Val, array, construct, lit, min_, pack2x16float, select, u32
from kvdsl.nodes.formats import Scale
from kvdsl.nodes.quantise.quantiser import Destination, Quantiser
from kvdsl.nodes.quantise.rows import F32X2, LANES, Runs, Staging, let_place, run_stat, store_to


def ggml_rows(kb: KernelBuilder, q: Quantiser, lane: Val, runs: Runs, dest: Destination) -> None:
    """ggml's rows, a lane per block: its scale from its own 32 values; the odd neighbour's f16
    scale (K's and V's in one u32) through workgroup memory where a row has more than one
    block."""
    fmt = q.fmt
    blocks = q.lanes
    scales = {}
    for which, run in runs.items():
        stat = run_stat(kb, fmt, f"p{which.upper()}", run)
        scales[which] = fmt.scale_of(kb, f"{which}D", stat)
    kb.comment("The block's f16 scales, K's in the low half and V's in the high half.")
    pair = [sc.scale for sc in scales.values()]
    both = kb.let("halves", pack2x16float(construct(F32X2, pair[0], pair[-1])))
    nxt = None
    if blocks > 1:
        kb.comment("An even block's last word closes with the odd block's scale: the neighbour's")
        kb.comment("halves, through workgroup memory.")
        shared = kb.workgroup_var("blockHalves", array(u32, q.workgroup_size))
        lid = kb.lid.x
        shared[lid] = both
        kb.barrier()
        last = q.workgroup_size - 1
        nxt = kb.let(
            "nextHalves",
            select(lit(0, u32), shared[min_(lid + 1, last)], lane + 1 < blocks),
        )
    halves = {}
    for which, shift in zip(runs, (0, 16)):
        half = (both >> shift) & 0xFFFF if shift else both & 0xFFFF
        if nxt is None:
            next_half = lit(0, u32)
        else:
            next_half = (nxt >> shift) & 0xFFFF if shift else nxt & 0xFFFF
        halves[which] = (half, next_half)
    if q.staged:
        staging = Staging(kb, q, lane)
        for which in runs:
            _store_block(kb, q, which, lane, runs[which], scales[which], *halves[which],
                         staging.put(which))  # fmt: skip
        staging.flush(dest, lambda place: None)
        return
    if dest.skip is not None:
        kb.leave_if(dest.skip)
    place = let_place(kb, dest.place())
    for which in runs:
        out = store_to(kb, dest, which)

        def store(w: Val | int, word: Val, out: Callable[[Val, Val], None] = out) -> None:
            out(place.words + w, word)

        _store_block(kb, q, which, lane, runs[which], scales[which], *halves[which], store)


def _store_block(
    kb: KernelBuilder,
    q: Quantiser,
    which: str,
    blk: Val,
    run: Sequence[Val],
    sc: Scale,
    half: Val,
    next_half: Val,
    store: Callable[[Val | int, Val], None],
) -> None:
    """Block ``blk``'s bytes in its pair of blocks (whole words), ``store(w, word)`` storing
    row word ``w``: its f16 scale ``half`` and its code bytes
    (:meth:`kvdsl.nodes.formats.Ggml.block_codes`); an even block's words open with its scale
    and its last word closes with ``next_half`` (the odd block's scale, or zero padding), an odd
    block's codes are whole words after it (:meth:`kvdsl.nodes.formats.Ggml.pair_words`)."""
    fmt = q.fmt
    values = [x.member(c) for x in run for c in LANES]
    codes = fmt.block_codes(kb, which, values, sc)
    pair, even_words, odd_words = fmt.pair_words()
    at = kb.let(f"{which}Pair", blk / 2 * pair)

    def word(b: list[Val]) -> Val:
        return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)

    with kb.if_((blk % 2).eq(0)):
        stream = [half & 0xFF, half >> 8] + codes + [next_half & 0xFF, next_half >> 8]
        for w in range(even_words):
            store(at + w if w else at, word(stream[4 * w : 4 * w + 4]))
    with kb.else_():
        for w in range(odd_words):
            store(at + (even_words + w), word(codes[4 * w : 4 * w + 4]))
