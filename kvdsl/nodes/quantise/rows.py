"""What the dense and the ggml row programs share: the rows a lane holds by name, a run's
statistic, the row's place named once, the stores into K's or V's cache binding, and the
workgroup's rows staged in workgroup memory (:attr:`Quantiser.staged`)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from kvdsl.ir import KernelBuilder, Val, array, f32, lit, select, u32, vec
from kvdsl.nodes.formats import Format
from kvdsl.nodes.quantise.quantiser import Destination, Quantiser, RowPlace

F32X4 = vec(4, f32)
F32X2 = vec(2, f32)
LANES = ("x", "y", "z", "w")


def let_place(kb: KernelBuilder, place: RowPlace) -> RowPlace:
    """``place`` with its word index named once for K's and V's stores."""
    side = None if place.side is None else kb.let("sideBase", place.side)
    return RowPlace(kb.let("rowBase", place.words), side)


def run_stat(kb: KernelBuilder, fmt: Format, name: str, run: Sequence[Val]) -> Val:
    """The statistic of a run of ``vec4<f32>`` (:meth:`kvdsl.nodes.formats.Format.run_stat`:
    its vectors' partials combined in order, q4_0 keeping the first of equal magnitudes)."""
    return fmt.run_stat(kb, name, list(run))


#: The rows a lane holds by name (:func:`tensors`).
Runs = dict[str, Sequence[Val]]


def tensors(k: Sequence[Val], v: Sequence[Val] | None) -> Runs:
    """The rows a lane holds by name: K's and V's, or one split row ``x``."""
    return {"x": k} if v is None else {"k": k, "v": v}


def store_to(kb: KernelBuilder, dest: Destination, which: str) -> Callable[[Val, Val], None]:
    """``store(i, x)``: element ``i`` of the cache binding of row ``which`` (K's, V's, or a split
    row's: ``value`` where ``dest.tensor``, else ``key``)."""
    if which != "x":
        out = dest.key if which == "k" else dest.value

        def store(i: Val, x: Val) -> None:
            out[i] = x

        return store

    def store_split(i: Val, x: Val) -> None:
        with kb.if_(dest.tensor):
            dest.value[i] = x
        with kb.else_():
            dest.key[i] = x

    return store_split


class Staging:
    """A workgroup's rows staged in workgroup memory (:attr:`Quantiser.staged`): K's and V's
    words (or a split row's) at ``slot * ROW_WORDS + w``, each row's word base (:data:`SKIP` for
    a row not stored) and, split, whether it is V's."""

    def __init__(self, kb: KernelBuilder, q: Quantiser, lane: Val) -> None:
        self.kb, self.q, self.lane = kb, q, lane
        n = q.rows * q.row_words
        kb.comment("The workgroup's rows, staged: each lane's words, then the row's place.")
        names = "x" if q.split else "kv"
        self.words = {
            which: kb.workgroup_var(f"staged{which.upper()}", array(u32, n)) for which in names
        }
        self.bases = kb.workgroup_var("stagedRow", array(u32, q.rows))
        self.kinds = kb.workgroup_var("stagedKind", array(u32, q.rows)) if q.split else None
        self.slot = kb.let("rowSlot", kb.lid.x / q.lanes)
        self.at = kb.let("slotWord", self.slot * q.row_words)

    def put(self, which: str) -> Callable[[Val | int, Val], None]:
        """``put(w, word)`` stages word ``w`` of this lane's row ``which``."""
        words = self.words[which]

        def put(w: Val | int, word: Val) -> None:
            words[self.at + w if not (isinstance(w, int) and w == 0) else self.at] = word

        return put

    def flush(self, dest: Destination, stored: Callable[[RowPlace], None]) -> None:
        """The row's first lane stages its place (calling ``stored`` with it); after a barrier
        every lane stores the workgroup's words, ``WG`` at a time; then ``dest.skip`` leaves."""
        kb, q = self.kb, self.q

        def place() -> None:
            p = let_place(kb, dest.place())
            self.bases[self.slot] = p.words
            if self.kinds is not None:
                self.kinds[self.slot] = select(lit(0, u32), lit(1, u32), dest.tensor)
            stored(p)

        with kb.if_(self.lane.eq(0)):
            if dest.skip is None:
                place()
            else:
                with kb.if_(dest.skip):
                    self.bases[self.slot] = SKIP
                with kb.else_():
                    place()
        kb.barrier()
        n, wg = q.rows * q.row_words, q.workgroup_size
        kb.comment("The staged rows, adjacent lanes on adjacent words.")
        for i in range(-(-n // wg)):
            w = kb.let(f"word{i}", kb.lid.x + i * wg if i else kb.lid.x)
            slot = w / q.row_words
            with kb.if_(w < n) if (i + 1) * wg > n else _nothing():
                base = kb.let(f"wordRow{i}", self.bases[slot])
                with kb.if_(base.ne(SKIP)):
                    at = kb.let(f"wordAt{i}", base + (w - slot * q.row_words))
                    if self.kinds is None:
                        dest.key[at] = self.words["k"][w]
                        dest.value[at] = self.words["v"][w]
                    else:
                        with kb.if_(self.kinds[slot].eq(1)):
                            dest.value[at] = self.words["x"][w]
                        with kb.else_():
                            dest.key[at] = self.words["x"][w]
        if dest.skip is not None:
            kb.leave_if(dest.skip)


#: A staged row's place when it is not stored.
SKIP = 0xFFFFFFFF


@contextmanager
def _nothing() -> Iterator[None]:
    yield
