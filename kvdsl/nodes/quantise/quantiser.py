"""The quantising row program's shape and what a caller gives it: a :class:`Quantiser` (a dense
format's row over a workgroup's lanes: the run each lane holds, its words and stores, the
workgroup memory it takes), the lanes a row takes (:func:`run_vectors`, :func:`row_lanes`), the
cache bindings it stores in (:func:`cache_binding`) and the row's destination
(:class:`Destination`, its place a :class:`RowPlace`)."""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Callable

from kvdsl.ir import Buffer, KernelBuilder, Val, u32, vec
from kvdsl.ir.types import Scalar, Vec
from kvdsl.nodes.formats import BLOCK, Format


class StoredRow:
    """The words of a stored row of ``head_dim`` values in format ``fmt`` (a
    :class:`kvdsl.nodes.formats.Format`), its scales ``inline`` or in side bindings: a mixin of
    the :class:`Quantiser` and of the configs that move stored rows, which declare the three."""

    fmt: Format
    head_dim: int
    inline: bool

    @property
    def row_words(self) -> int:
        """u32 words of one stored row in the cache binding (``ROW_WORDS``)."""
        return self.fmt.row_words(self.head_dim, self.inline)

    @property
    def side_words(self) -> int:
        """f32 words of one row's K and V scales in the side bindings, K's then V's (0
        inline)."""
        return 2 * self.fmt.side_words(self.inline)


@dataclass(frozen=True)
class Quantiser(StoredRow):
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
