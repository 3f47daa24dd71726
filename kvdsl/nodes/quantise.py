"""The dense quantiser: one row program that any mode calls to quantise the K and V rows its
invocations hold and store them in a dense format (:mod:`kvdsl.nodes.formats`), each row's (or
ggml block's) scale computed in the kernel.

A mode walks its rows its own way and hands each row to :func:`quantise_rows`:

- :class:`Quantiser` says how a row of ``head_dim`` values of format ``fmt`` (scales inline or in
  a side buffer) is spread over a workgroup's invocations: :attr:`Quantiser.lanes` invocations
  per row, each holding :attr:`Quantiser.vectors` ``vec4<f32>`` of it, its ``j``-th the row's
  vector :meth:`Quantiser.vector_at` (a run of consecutive vectors, or strided). A row's lanes
  are adjacent invocations of one workgroup (local ids ``lid - lane .. lid - lane + lanes -
  1``), so ``workgroup_size`` divides by ``lanes``.
- The caller declares the cache bindings with :func:`cache_binding` (u32 words, or
  ``vec2``/``vec4<u32>`` where a lane's words are that aligned: :attr:`Quantiser.store_width`),
  loads its lane's K and V values (rotated, K-normed: as they are to be stored), then calls
  :func:`quantise_rows` with a :class:`Destination`: the bindings and a hook that gives the
  stored row's place (:class:`RowPlace`, the u32 word index of the row in the cache binding and
  the f32 index of its side scales), so that contiguous, buffer-sharing, paged and fused
  kernels share one quantiser. The hook is called after the row's statistics are reduced, in
  the lanes that store, so it may read a page table or a slot mapping that is only valid for
  real rows.
- Every invocation of the workgroup calls :func:`quantise_rows` in uniform control flow (it may
  wait at a workgroup barrier): an invocation past the caller's rows holds a copy of a real
  row's values in a row of its own and is named by ``Destination.skip``, as is a row the cache
  does not take. Skipped lanes leave after the barrier (:meth:`KernelBuilder.leave_if`), before
  anything is stored; what the caller builds after the call runs only in the storing lanes. A
  caller that calls it more than once per invocation (a loop over rows) waits at a barrier
  between the calls, as workgroup memory is reused.

The row program (the *run* walk): a dense format's lane holds 16 values (int8: four code words)
or 32 (4-bit: four code words) where the row allows, reduces its run's statistic in order and
writes it to workgroup memory, K's and V's in one slot; after one barrier every lane combines its
row's few partials in order (exact: max and min, so every lane computes the same scale), packs
its own code words and stores them, as one ``vec4<u32>`` where the row's words are 16-byte
aligned (side scales), else as ``vec2<u32>`` or words; lane 0 stores the row's scales. A ggml
lane holds one 32-value block and computes its block's scale itself, with no cross-lane
reduction; the word of a pair of blocks that holds the even block's last codes and the odd
block's f16 scale is written by the even block's lane, which reads its neighbour's scale from
workgroup memory after one barrier (rows of one block pass none).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from math import gcd
from typing import Callable, Iterator, Sequence

from kvdsl.ir import (
    Buffer,
    KernelBuilder,
    Val,
    array,
    construct,
    f32,
    lit,
    min_,
    pack2x16float,
    select,
    u32,
    vec,
)
from kvdsl.ir.types import Scalar, Vec
from kvdsl.nodes.formats import BLOCK, Format, Scale

F32X4 = vec(4, f32)
F32X2 = vec(2, f32)
LANES = ("x", "y", "z", "w")


@dataclass(frozen=True)
class Quantiser:
    """A dense format's quantising row program: ``fmt`` (:class:`kvdsl.nodes.formats.Format`)
    with its scales ``inline`` or in a side buffer, rows of ``head_dim`` values, reduced in
    workgroups of ``workgroup_size`` invocations (a multiple of :attr:`lanes`); ``staged``: the
    workgroup's rows are stored together from workgroup memory (:func:`quantise_rows`);
    ``strided``: a dense format's lane holds every :attr:`lanes`-th code word's values instead
    of a run (:meth:`vector_at`), so that adjacent lanes load and store adjacent words;
    ``split``: each row the lanes hold is K's or V's (``Destination.tensor`` says which), not
    both, so a lane has half the work; ``paired``: a dense format's run is two half-runs, the
    same vectors of each half of the row (:meth:`vector_at`), so that NeoX rotary's pairs lie
    in one lane (where :meth:`pairs_fit`); ``run``: at most this many vectors a lane of a dense
    format (0: :func:`run_vectors`' longest)."""

    fmt: Format
    inline: bool
    head_dim: int
    workgroup_size: int
    staged: bool = False
    strided: bool = False
    split: bool = False
    paired: bool = False
    run: int = 0

    def __post_init__(self) -> None:
        if self.paired and not self.pairs_fit(self.fmt, self.head_dim, self.run):
            raise ValueError(
                f"paired runs of format {self.fmt.name} at head dim {self.head_dim}: a lane's"
                " run does not split into whole code words in each half of the row"
            )

    @staticmethod
    def pairs_fit(fmt: Format, head_dim: int, run: int = 0) -> bool:
        """Whether a dense row's runs split into two halves of whole code words, one in each
        half of the row, every half-run inside its half (:attr:`paired`)."""
        if fmt.ggml:
            return False
        v, n = run_vectors(fmt, head_dim, run), fmt.per_word // 4
        half = head_dim // 8
        return head_dim % 8 == 0 and v % (2 * n) == 0 and half % (v // 2) == 0

    def vector_at(self, lane: Val, j: int) -> Val:
        """The row's vector (``vec4`` index) that lane ``lane`` holds as its ``j``-th: ``lane *
        vectors + j`` (a run); paired, its half-run ``lane * vectors / 2 ..`` in the first half
        of the row, then the same vectors of the second half (NeoX rotary's partners); or
        strided, its ``j // n``-th code word's ``j % n``-th vector (``n`` = 1 for int8, 2 for
        4-bit) with code word ``lane + lanes * (j // n)``."""
        if self.paired:
            m = self.vectors // 2
            at = lane * m if m > 1 else lane
            at = at + (j % m) if j % m else at
            return at + self.head_dim // 8 if j >= m else at
        if not self.strided or self.fmt.ggml:
            at = lane * self.vectors
            return at + j if j else at
        n = self.fmt.per_word // 4
        word = lane + self.lanes * (j // n) if j // n else lane
        at = word * n if n > 1 else word
        return at + j % n if j % n else at

    def word_at(self, lane: Val, w: int) -> Val:
        """The row's code word (after the header) that is lane ``lane``'s ``w``-th."""
        if self.strided:
            return lane + self.lanes * w if w else lane
        if self.paired:
            m = self.lane_words // 2
            at = lane * m if m > 1 else lane
            at = at + (w % m) if w % m else at
            return at + self.head_dim // 8 // (self.fmt.per_word // 4) if w >= m else at
        at = lane * self.lane_words
        return at + w if w else at

    @property
    def vectors(self) -> int:
        """``vec4<f32>`` values of a row each lane holds (a run): :func:`run_vectors`."""
        return run_vectors(self.fmt, self.head_dim, self.run)

    @property
    def lanes(self) -> int:
        """Lanes (adjacent invocations) per row: :func:`row_lanes`."""
        return row_lanes(self.fmt, self.head_dim, self.run)

    @property
    def row_words(self) -> int:
        """u32 words of one stored row in the cache binding (``ROW_WORDS``)."""
        return self.fmt.row_words(self.head_dim, self.inline)

    @property
    def side_words(self) -> int:
        """f32 words of one row's scales in the side buffer, K's then V's (0 inline)."""
        return 2 * self.fmt.side_words(self.inline)

    @property
    def lane_words(self) -> int:
        """Code words a dense format's lane packs (its run's values over the codes a word
        holds)."""
        return 4 * self.vectors // self.fmt.per_word

    @property
    def store_width(self) -> int:
        """u32 words per store: 4 or 2 where every row, its header and each lane's code words
        divide by it (so ``vec4<u32>`` stores of side-scale rows are 16-byte aligned), else 1
        (ggml's blocks straddle words; staged rows are stored word by word)."""
        if self.fmt.ggml or self.staged or self.strided:
            return 1
        head = self.fmt.header_words(self.inline)
        chunk = self.lane_words // 2 if self.paired else self.lane_words
        half = self.head_dim // 8 // (self.fmt.per_word // 4)
        for w in (4, 2):
            if self.row_words % w == 0 and head % w == 0 and chunk % w == 0:
                if not self.paired or half % w == 0:
                    return w
        return 1

    @property
    def rows(self) -> int:
        """Rows a workgroup holds."""
        return self.workgroup_size // self.lanes

    def workgroup_bytes(self) -> int:
        """Bytes of workgroup memory the row program declares: the row statistics (dense) or
        the f16 scales (ggml rows of several blocks), and staged, the rows' words of K and of
        V and their places."""
        n = self.workgroup_size
        stat = 4 if self.fmt.ggml else (8 if self.split else 16)  # a split row: one tensor's
        stats = 0 if self.fmt.ggml and self.lanes == 1 else n * stat
        tensors = 1 if self.split else 2
        staged = 4 * self.rows * (tensors * self.row_words + 3 - tensors)
        return stats + (staged if self.staged else 0)

    @property
    def cache_elem(self) -> Scalar | Vec:
        """The element type of the cache bindings (:func:`cache_binding`)."""
        w = self.store_width
        return u32 if w == 1 else vec(w, u32)


def run_vectors(fmt: Format, head_dim: int, run: int = 0) -> int:
    """The ``vec4<f32>`` run a lane holds of a row of ``head_dim`` values of ``fmt``: a ggml
    block's 8; four code words of a dense format, at most 8 vectors, where the row divides so
    (int8 4, 4-bit 8, 2-bit 8: two words), else the largest run that divides the row into whole
    code words; ``run`` > 0 caps a dense format's (at least one code word); the whole row for a
    format that sums its statistic in one lane (:attr:`kvdsl.nodes.formats.Format.whole_row_lane`;
    its configs refuse a ``run``)."""
    if fmt.ggml:
        return BLOCK // 4
    if fmt.whole_row_lane:
        return head_dim // 4
    word = fmt.per_word // 4
    longest = min(fmt.per_word, 8)
    if run:
        longest = max(word, min(longest, run))
    return gcd(head_dim // 4, longest)


def row_lanes(fmt: Format, head_dim: int, run: int = 0) -> int:
    """Lanes (adjacent invocations) per row of ``head_dim`` values of ``fmt``."""
    return head_dim // (4 * run_vectors(fmt, head_dim, run))


def cache_binding(kb: KernelBuilder, q: Quantiser, name: str) -> Buffer:
    """A cache binding ``name`` (read_write) that ``q`` stores rows in: u32 words, carried as
    ``vec2``/``vec4<u32>`` (:attr:`Quantiser.store_width`; the host array stays u32, its extent
    counted in vectors by :func:`kvdsl.nodes.walks.vector_extents`)."""
    return kb.binding(name, q.cache_elem, "read_write")


@dataclass(frozen=True)
class RowPlace:
    """Where a stored row goes: ``words``, the u32 index of its first word in the cache
    binding (K's in ``key``, V's in ``value``: the same index), a multiple of
    :attr:`Quantiser.store_width` (rows at multiples of ``ROW_WORDS`` are); ``side``, the
    f32 index of its first scale in the side buffer (K's ``S`` scale words then V's), None
    inline."""

    words: Val
    side: Val | None = None


@dataclass(frozen=True)
class Destination:
    """The bindings a row is stored in (``key`` and ``value`` from :func:`cache_binding`, f32
    side ``scales`` or None inline), ``place`` (called once, in the storing lanes, after the
    statistics are reduced: the row's :class:`RowPlace`), and ``skip``: the lanes that store
    nothing (past the caller's rows, or a row the cache does not take), None when every lane
    stores; ``tensor``, with :attr:`Quantiser.split`: true where the lane's row is V's (stored in
    ``value``, its scales after K's in the side buffer)."""

    key: Buffer
    value: Buffer
    scales: Buffer | None
    place: Callable[[], RowPlace]
    skip: Val | None = None
    tensor: Val | None = None


def quantise_rows(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: Sequence[Val],
    v: Sequence[Val] | None,
    dest: Destination,
) -> None:
    """Quantise and store the K and V rows the workgroup's lanes hold.

    This invocation is lane ``lane`` (u32, ``0 .. q.lanes - 1``) of its row, holding its
    ``q.vectors`` ``vec4<f32>`` values of K (``k``) and of V (``v``), the ``j``-th the row's
    vector ``q.vector_at(lane, j)``; every invocation
    of the workgroup calls this in uniform control flow (see the module docstring). After the
    call the lanes of ``dest.skip`` have left. With ``q.split`` the lane holds one row, K's or
    V's as ``dest.tensor`` says, its values ``k`` (``v`` None).

    Each lane stores its own words (``vec4<u32>`` where aligned), or with ``q.staged`` writes
    them to workgroup memory, the row's first lane its row's place; after a barrier the
    workgroup stores its rows' words together, adjacent lanes on adjacent words of a row.
    """
    fmt = q.fmt
    if q.split != (v is None) or q.split != (dest.tensor is not None):
        raise ValueError(
            "split rows (Quantiser.split) take one tensor's values (v None) and"
            " Destination.tensor; rows of both take K's and V's and no tensor"
        )
    if len(k) != q.vectors or (v is not None and len(v) != q.vectors):
        raise ValueError(
            f"quantise_rows takes {q.vectors} vectors of K and of V per lane (format"
            f" {fmt.name}, head dim {q.head_dim}), not {len(k)} and {len(v or [])}"
        )
    if (dest.scales is None) != q.inline:
        want = "no side scales binding" if q.inline else "a side scales binding"
        raise ValueError(f"format {fmt.name} with scales {_place(q)} needs {want}")
    for b in (dest.key, dest.value):
        if b.binding.elem != q.cache_elem:
            raise ValueError(
                f"cache binding {b.binding.name} holds {b.binding.elem}; format {fmt.name} with"
                f" scales {_place(q)} stores {q.cache_elem} (declare it with cache_binding)"
            )
    if q.workgroup_size % q.lanes:
        raise ValueError(
            f"workgroup_size {q.workgroup_size} is not a multiple of the {q.lanes} lanes of a"
            " row (rows are reduced whole inside a workgroup)"
        )
    if fmt.ggml:
        _ggml_rows(kb, q, lane, k, v, dest)
    else:
        _dense_rows(kb, q, lane, k, v, dest)


def _let_place(kb: KernelBuilder, place: RowPlace) -> RowPlace:
    """``place`` with its word index named once for K's and V's stores."""
    side = None if place.side is None else kb.let("sideBase", place.side)
    return RowPlace(kb.let("rowBase", place.words), side)


def _place(q: Quantiser) -> str:
    return "inline" if q.inline else "side"


def run_stat(kb: KernelBuilder, fmt: Format, name: str, run: Sequence[Val]) -> Val:
    """The statistic of a run of ``vec4<f32>`` (:meth:`kvdsl.nodes.formats.Format.run_stat`:
    its vectors' partials combined in order, q4_0 keeping the first of equal magnitudes)."""
    return fmt.run_stat(kb, name, list(run))


def _tensors(k: Sequence[Val], v: Sequence[Val] | None) -> dict[str, Sequence[Val]]:
    """The rows a lane holds by name: K's and V's, or one split row ``x``."""
    return {"x": k} if v is None else {"k": k, "v": v}


def _dense_rows(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: Sequence[Val],
    v: Sequence[Val] | None,
    dest: Destination,
) -> None:
    """A dense format's rows: partials of K and V in one workgroup slot, one barrier, the row's
    partials combined in order by every lane, its code words stored."""
    fmt = q.fmt
    lid = kb.lid.x
    runs = _tensors(k, v)
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
        staging = _Staging(kb, q, lane)
        for which in runs:
            _dense_words(kb, q, which, lane, runs[which], scales[which], staging.put(which))

        def stored(place: RowPlace) -> None:
            _side_scales(q, place, dest, scales)

        staging.flush(dest, stored)
        return
    if dest.skip is not None:
        kb.leave_if(dest.skip)
    place = _let_place(kb, dest.place())
    for which in runs:
        _store_dense(kb, q, which, lane, runs[which], scales[which], _out(kb, dest, which), place)
    if dest.scales is not None:
        with kb.if_(lane.eq(0)):
            _side_scales(q, place, dest, scales)


def _out(kb: KernelBuilder, dest: Destination, which: str) -> Callable[[Val, Val], None]:
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


class _Staging:
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
            p = _let_place(kb, dest.place())
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
    run: Sequence[Val],
    sc: Scale,
    out: Callable[[Val, Val], None],
    place: RowPlace,
) -> None:
    """Lane ``lane``'s code words (:func:`_dense_words`), ``out(i, x)`` storing element ``i``
    of the cache binding, in stores of
    :attr:`Quantiser.store_width` words; lane 0 also the inline header."""
    fmt = q.fmt
    words = _dense_words(kb, q, which, lane, run, sc)
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


def _ggml_rows(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: Sequence[Val],
    v: Sequence[Val] | None,
    dest: Destination,
) -> None:
    """ggml's rows, a lane per block: its scale from its own 32 values; the odd neighbour's f16
    scale (K's and V's in one u32) through workgroup memory where a row has more than one
    block."""
    fmt = q.fmt
    blocks = q.lanes
    runs = _tensors(k, v)
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
        staging = _Staging(kb, q, lane)
        for which in runs:
            _store_block(kb, q, which, lane, runs[which], scales[which], *halves[which],
                         staging.put(which))  # fmt: skip
        staging.flush(dest, lambda place: None)
        return
    if dest.skip is not None:
        kb.leave_if(dest.skip)
    place = _let_place(kb, dest.place())
    for which in runs:
        out = _out(kb, dest, which)

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
