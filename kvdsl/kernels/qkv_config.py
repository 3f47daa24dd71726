"""The ``qkv`` mode's config (:class:`QkvConfig`, also ``paged_qkv``'s base): the heads, the
transforms (bias, Q and K RMSNorm, rotary, whole or partial), the element types, Q's layout and,
with a dense ``format``, the quantiser's walk; the kernels are :mod:`kvdsl.kernels.qkv` (f32 and
f16 rows) and :mod:`kvdsl.kernels.qkv_dense` (a dense format).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from kvdsl.ir.verify import MAX_WORKGROUP_BYTES
from kvdsl.kernels.config import (
    FLOATS,
    KNORM_WORKGROUP,
    MAX_STORAGE_BUFFERS,
    CacheConfig,
    Element,
    FormatSlot,
    RowLayout,
    Slot,
    choice,
    multiple_of,
    query_heads,
    require,
    unset,
)
from kvdsl.kernels.plan import require_whole_rows, rows_workgroup
from kvdsl.kernels.rows import Transforms
from kvdsl.kernels.dense import QUANTISE_WORKGROUP, DenseFormat
from kvdsl.kernels.dense_fields import (
    LaneWalk,
    ScalePlace,
    Scales,
    require_format,
    require_rotation,
)
from kvdsl.nodes import rotation
from kvdsl.nodes.formats import Format, format_of

#: The flat walk's workgroup size without a norm (no barrier).
WORKGROUP = 256


@dataclass(frozen=True)
class QkvConfig(Scales, LaneWalk, Transforms, CacheConfig):
    """A ``qkv`` variant: the heads (``q_heads`` a multiple of ``kv_heads``), head dim, the
    transforms (bias, Q and K RMSNorm, rotary) and the element types and Q's layout."""

    _: KW_ONLY
    q_heads: int
    q_norm: bool = False
    bias: bool = False
    present_type: Element = choice(Element.F32, FLOATS)
    q_type: Element = choice(Element.F32, FLOATS)
    q_layout: RowLayout = choice(RowLayout.BNSH)
    # A dense format of the cache (kvdsl.nodes.formats); None: present_type's f32 or f16 rows.
    format: DenseFormat | None = FormatSlot(None, DenseFormat)
    scales: ScalePlace = choice(ScalePlace.INLINE)
    # With a format, the quantiser's walk (LaneWalk: dense_append's walk, split and run, its
    # default walk per format): the Q, K and V rows each in invocations of their own (split) or
    # a K row and its V row together.
    # With a format and rotary whose pairs are not in one lane: each vector's partner loaded
    # again from the input (true: the default with a format, the cache serves it) or staged in
    # workgroup memory (false) after a barrier.
    pair_loads: bool | None = Slot(None, derive=lambda cfg: cfg.format is not None)
    # With a format: a Q row's lane holds the row's vectors lane + lanes * j (adjacent lanes on
    # adjacent vectors: coalesced loads and stores) instead of the quantiser's run.
    q_strided: bool = True
    # With a format: K rotated by the signed Walsh-Hadamard matrix over blocks of this many
    # dimensions (the head_dim: the whole head) after its RMSNorm and rotary, before it is
    # quantised (kvdsl.reference.rotation, as dense_append's rotation); 0: not rotated. Q is
    # written as it is (attend rotates it as it loads it, with the same rotation) and so is V.
    rotation: int = 0
    # The default walk that timed fastest on an H200: runs holding NeoX pairs first.
    PAIRS_FIRST = True
    mode = "qkv"

    def check_fields(self) -> None:
        self.refuse_window("it has no windowed form: its cache binding holds whole heads")
        query_heads(self.q_heads, self.kv_heads)
        why = " for qkv (each invocation holds a pair of vec4)"
        multiple_of("head_dim", self.head_dim, 8, why)
        self.check_transforms()
        if self.format is None:
            plain = "an f32 or f16 cache is stored as it is"
            require_rotation(None, self.rotation, self.head_dim, plain)
            self.no_scales()
            walk = "without a format: the f32 and f16 walk holds"
            unset("walk", self.walk, None, f"{walk} pairs of vectors")
            unset("run", self.run, None, f"{walk} pairs of vectors")
            unset("split", self.split, True, f"{walk} each head's row alone")
            unset("pair_loads", self.pair_loads, False, f"{walk} each pair whole")
            return
        require_rotation(self.fmt, self.rotation, self.head_dim)
        fmt = self.fmt
        words = f"with format {fmt.name!r}: the cache holds the format's u32 words"
        unset("present_type", self.present_type, Element.F32, words)
        require_format(fmt, self.scales, self.head_dim)
        self.check_lane_walk()
        buffers = 5 + int(self.norm) + int(self.rotary) + int(self.bias) + int(not self.inline)
        require(
            buffers <= MAX_STORAGE_BUFFERS,
            "scales",
            self.scales.value,
            "'inline' with a norm, rotary and the bias (side scales would make 9 storage"
            " buffers, past WebGPU's default 8)",
        )

    @property
    def strided_q(self) -> bool:
        """Whether a Q row's lanes hold strided vectors (``q_strided`` with a format whose lanes
        hold an even number of vectors: NeoX pairs ``j`` and ``j + n/2`` then share a lane)."""
        strided = self.q_strided and self.quantiser.vectors % 2 == 0
        return self.fmt is not None and strided and not self.partial

    @property
    def reloaded_heads(self) -> int:
        """Heads per token whose rotary partners the kernel loads again from the input
        (``pair_loads`` where a lane's run does not hold its pairs: K's, and Q's unless its rows
        are strided): those loads come from the cache, the lines just loaded for the row."""
        if self.fmt is None or not self.rotary or not self.pair_loads or self.quantiser.paired:
            return 0
        return self.kv_heads + (0 if self.strided_q else self.q_heads)

    @property
    def reloads(self) -> int:
        """Input elements per token the kernel loads again, from the cache (the lines just
        loaded for the row): the partners of :attr:`reloaded_heads`."""
        return self.reloaded_heads * self.head_dim

    @property
    def fmt(self) -> Format | None:
        """The cache's dense format (None: f32 or f16 rows)."""
        return None if self.format is None else format_of(self.format)

    @property
    def row_words(self) -> int:
        """u32 words of a stored dense row (``ROW_WORDS``)."""
        return self.fmt.row_words(self.head_dim, self.inline)

    @property
    def cache_row_bytes(self) -> int:
        """Bytes of one stored (token, head) row of K or V, its scales included."""
        if self.fmt is None:
            return self.head_dim * (4 if self.present_type is Element.F32 else 2)
        return self.fmt.bytes_per_row(self.head_dim, self.inline)

    @property
    def norm(self) -> bool:
        """Whether any head is RMS-normed (the kernel then reduces rows in workgroup memory)."""
        return self.q_norm or self.k_norm

    @property
    def heads(self) -> int:
        """Heads per token of the packed input: ``q_heads + 2 * kv_heads``."""
        return self.q_heads + 2 * self.kv_heads

    @property
    def rows(self) -> int:
        """Rows the dispatch walks per token: every head of the input, or with a dense
        ``format`` not ``split`` the Q heads and the (K, V) pairs of heads."""
        return self.heads if self.split else self.q_heads + self.kv_heads

    @property
    def pairs(self) -> int:
        """Items (pairs of vectors) per row: ``head_dim / 8``."""
        return self.head_dim // 8

    @property
    def norm_weights(self) -> int:
        """The weights ``qk_norm_weight`` holds: ``head_dim`` per normed kind of head."""
        return self.head_dim * (int(self.q_norm) + int(self.k_norm))

    def default_workgroup_size(self) -> int:
        if self.format is not None:
            return rows_workgroup(QUANTISE_WORKGROUP, self.row_lanes)
        if not self.norm:
            return WORKGROUP
        return rows_workgroup(KNORM_WORKGROUP, self.pairs)

    def workgroup_bytes(self) -> int:
        """The workgroup memory the kernel declares: the norm's partials (``wsum``); with a
        format, the quantiser's and the staged row (rotary whose pairs are not in one lane:
        every lane's vectors), and with a ``rotation`` whose stages pair lanes and no staged row,
        every lane's vectors (:func:`kvdsl.nodes.rotation.exchange_bytes`)."""
        wg = self.workgroup_size
        out = 4 * wg if self.norm else 0
        q = self.quantiser
        if q is None:
            return out
        staged = self.rotary and not q.paired and not self.pair_loads
        out += q.workgroup_bytes() + (16 * wg * q.vectors if staged else 0)
        if self.rotation and not staged:  # (else the staged row's memory serves)
            out += rotation.exchange_bytes(q.vector_at, q.lanes, q.vectors, self.rotation, wg)
        return out

    def check_schedule(self) -> None:
        require(
            self.workgroup_bytes() <= MAX_WORKGROUP_BYTES,
            "workgroup_size",
            self.workgroup_size,
            f"fewer invocations: {self.workgroup_bytes()} bytes of workgroup memory, past"
            f" WebGPU's default {MAX_WORKGROUP_BYTES}",
        )
        if self.format is not None:
            lanes = self.row_lanes
            require_whole_rows(
                self.workgroup_size, lanes, "lanes of a row with a format", "quantised"
            )
        elif self.norm:
            require_whole_rows(
                self.workgroup_size, self.pairs, "pairs of a row with q_norm or k_norm"
            )
