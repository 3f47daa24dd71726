"""The ``qkv`` mode's config (:class:`QkvConfig`, also ``paged_qkv``'s base): the heads, the
transforms (bias, Q and K RMSNorm, rotary, whole or partial), the element types, Q's layout and,
with a dense ``format``, the quantiser's walk; and what a config means beside its kernel: the
kernel's doc comment (:func:`describe`), the bytes a dispatch moves (:func:`bytes_moved`) and
the unfused chain of kvdsl's own kernels it equals (:class:`Chain`, :func:`chain_start`). The
kernels are :mod:`kvdsl.kernels.qkv` (f32 and f16 rows) and :mod:`kvdsl.kernels.qkv_dense` (a
dense format), over the frame of :mod:`kvdsl.kernels.qkv_frame`.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

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
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.plan import require_whole_rows, rows_workgroup
from kvdsl.kernels.rows import Transforms
from kvdsl.kernels.transpose import TransposeConfig
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


def describe(cfg: QkvConfig) -> str:
    """The kernel's doc comment: its transforms, Q's layout and type, the cache."""
    steps = ["add the QKV bias"] if cfg.bias else []
    norms = [x for x, on in (("Q", cfg.q_norm), ("K", cfg.k_norm)) if on]
    if norms:
        steps.append(" and ".join(norms) + " RMSNorm")
    if cfg.rotary:
        steps.append("rotate Q and K at the token's row")
    if cfg.rotation:
        steps.append(f"Walsh-Hadamard rotate K over blocks of {cfg.rotation}")
    doc = (
        "Split a packed QKV projection into heads"
        + "".join(f", {s}" for s in steps)
        + f";\nwrite Q ({cfg.q_layout.value.upper()}, {cfg.q_type.value}) and append K and V"
        f" into a buffer-sharing {_cache_kind(cfg)} cache."
    )
    return doc


def _cache_kind(cfg: QkvConfig) -> str:
    if cfg.fmt is None:
        return cfg.present_type.value
    return cfg.fmt.name + ("" if cfg.fmt.ggml else f" (scales {cfg.scales.value})")


def bytes_moved(cfg: QkvConfig) -> str:
    """The least bytes a dispatch moves, as an expression of the shape variables ``batch`` and
    ``keySeq`` (``index.json``'s ``bytes_moved``): the packed QKV read once, Q written once, the
    new K and V rows written once into the cache, and each table entry used read once
    (``seqlens_k``, the norm weights, the bias, one rotary row per token)."""
    size = {Element.F32: 4, Element.F16: 2}
    d = cfg.head_dim
    per_token = cfg.heads * d * size[cfg.input_type]
    per_token += cfg.q_heads * d * size[cfg.q_type]
    per_token += 2 * cfg.kv_heads * cfg.cache_row_bytes
    if cfg.rotary:
        per_token += 2 * cfg.half * 4
    fixed = cfg.norm_weights * 4 + (cfg.heads * d * 4 if cfg.bias else 0)
    out = f"batch * keySeq * {per_token} + batch * 4"
    return out + (f" + {fixed}" if fixed else "")


@dataclass(frozen=True)
class Chain:
    """The unfused equivalent of a ``qkv`` variant in kvdsl's own kernels, one head per
    "batch" (``kv_heads=1``), so that any run of whole heads is a valid input:

    - ``split``: ``transpose`` of the packed projection (``HEADS`` heads) into head-major f32
      rows ``[B, HEADS, S, D]`` (the bias, which no kernel adds, is added to these rows by the
      host);
    - ``q``: ``build`` of a batch's Q heads: Q RMSNorm with ``q_norm``, rotary at ``pastSeq + t``
      with ``pastSeq`` the batch's first cache row, into ``q_type``;
    - ``k``: ``build`` of a batch's K heads with K RMSNorm (``None`` without ``k_norm``), V
      heads alongside as its second binding;
    - ``append``: the ``merge_share`` append of K (rotated at its row) and V into the cache;
      with a dense ``format``, ``dense_append`` instead (K RMSNorm, rotary, the ``rotation``
      and the quantiser in one, ``k`` then ``None``).
    """

    split: Any
    q: Any
    k: Any | None
    append: Any


def chain_start(cfg: QkvConfig, **build: Any) -> tuple[Any, Any]:
    """The first two configs of ``cfg``'s unfused chain (:class:`Chain`): the split and Q's
    ``build`` (Q RMSNorm, rotary at ``pastSeq + t``, on the flat walk with ``build``'s
    fields)."""
    d, words_ = cfg.head_dim, cfg.input_type is Element.F16
    split = TransposeConfig(cfg.heads, d, vec4=True, input_type=cfg.input_type, words=words_)
    return split, BuildConfig(1, d, k_norm=cfg.q_norm, present_type=cfg.q_type, **build)
