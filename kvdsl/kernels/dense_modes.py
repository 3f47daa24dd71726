"""The cache modes over a dense quantised cache (:mod:`kvdsl.kernels.dense`'s formats):
``merge_share``'s retain pass (``dense_retain``) and ``window_shift`` (``dense_window_shift``).

A dense row is ``ROW_WORDS`` u32 words, and with ``scales="side"`` ``2 S`` f32 of K's and V's
scales in a side binding (:mod:`kvdsl.nodes.formats`). Moving a row moves its words and its
side scales together, untouched bits.

``dense_retain``: the buffer-sharing cache's retain pass, every row outside the batch's append
window (:func:`kvdsl.nodes.window.append_window`) copied past → present at the same index; a
host runs it with ``dense_append`` (the append pass: the window's rows quantised from the new
tokens), in either order. Bindings ``past_k``, ``past_v`` [, ``past_scales``], ``seqlens_k``,
``present_key``, ``present_value`` [, ``present_scales``]; params ``count`` = batch × kvHeads ×
seq, ``seq``, ``keySeq``.

``dense_window_shift``: a sliding-window step (:func:`kvdsl.nodes.window.sliding_window`), past →
a distinct present, in ``window_shift``'s regions. Rows ``[0, appendStart)`` take past rows ``t +
evicted`` (words and side scales; ``shift``, ``all``); rows ``[appendStart, resident)`` take the
new BSH tokens (``src_k``, ``src_v``) quantised, K NeoX-rotated at its absolute position ``past
+ j`` (``append``, ``all``); rows from ``resident`` on are zeroed (``shift``, ``all``: every
element of a zeroed row decodes to zero in every format, its scale being ``+0.0``;
docs/formats.md). Params ``count`` = batch × kvHeads × seq (``all``, ``shift``) or × keySeq
(``append``), ``seq``, ``keySeq``. ``all`` binds cos and sin as one packed ``rotary_table`` and
takes inline scales only, so that it binds 8 storage buffers.

The retain and shift passes walk flat over a row's words: one invocation per ``vec4<u32>`` where
``ROW_WORDS`` divides by 4 (rows 16-byte aligned), else per u32 word (``ROW_VECS`` per row); the
invocation holding vector ``d`` of a row also moves its side scale words ``d, d + ROW_VECS,
...``. The quantising passes (``append``, ``all``) walk the dense quantiser's lanes
(:func:`kvdsl.nodes.quantise.quantise_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kvdsl.ir import largest, with_contract
from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, f32, i32, max_, min_, u32, vec
from kvdsl.kernels.config import (
    Element,
    FLOATS,
    PAST,
    PRESENT,
    ROTARY_TABLE,
    ROTARY_TABLES,
    RotaryHalf,
    ShiftRegion,
    builds,
    choice,
    require,
    require_rotary,
    require_rotary_vectors,
)
from kvdsl.kernels.extents import ceil_div, emax, plus, times

from kvdsl.kernels.plan import require_whole_rows, rows_workgroup
from kvdsl.kernels.dense import QUANTISE_WORKGROUP, DenseConfig
from kvdsl.kernels.dense import dense_rows
from kvdsl.kernels.window_shift import ROTARY_REGIONS
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import split_rows
from kvdsl.nodes.quantise import Quantiser, row_lanes
from kvdsl.nodes.quantise.quantiser import StoredRow
from kvdsl.nodes.rotary import Rotation, rotate_loaded
from kvdsl.nodes.window import append_window, sliding_window

#: The scale bindings of a cache read and written with side scales.
PAST_SCALES, PRESENT_SCALES = "past_scales", "present_scales"
#: The new tokens' BSH bindings (``dense_append``'s names).
SOURCES = ("src_k", "src_v")
#: The word walk's workgroup size when a config leaves it unset (no barrier: the flat walk's).
WORD_WORKGROUP = 256


def word_width(row_words: int) -> int:
    """The vector width of the word walk: 4 (``vec4<u32>``) where a row's words divide by 4,
    so every row starts on 16 bytes; else 1."""
    return 4 if row_words % 4 == 0 else 1


@dataclass(frozen=True)
class DenseMoveConfig(StoredRow, DenseConfig):
    """A mode that moves stored dense rows: its walk is over a row's words, no barrier."""

    def default_workgroup_size(self) -> int:
        return WORD_WORKGROUP


@dataclass(frozen=True)
class DenseRetainConfig(DenseMoveConfig):
    """A ``dense_retain`` variant: ``merge_share``'s retain pass over a dense cache."""

    mode = "dense_retain"


@dataclass(frozen=True)
class DenseWindowShiftConfig(RotaryHalf, DenseMoveConfig):
    """A ``dense_window_shift`` variant: ``window_shift``'s region over a dense cache; where the
    region appends, the new tokens' element type and rotary (the first ``2 * rotary_half``
    elements of a row, or the whole head)."""

    region: ShiftRegion = choice(ShiftRegion.ALL)
    rotary: bool = False
    input_type: Element = choice(Element.F32, FLOATS)
    rotary_half: int | None = None
    mode = "dense_window_shift"

    def check_fields(self) -> None:
        super().check_fields()
        appends = self.region is not ShiftRegion.SHIFT
        require_rotary(self.rotary, self.head_dim, appends, ROTARY_REGIONS, self.rotary_half)
        require_rotary_vectors(self.rotary, self.head_dim, self.rotary_half, self.mode)
        require(
            not (appends and self.fmt.rotated),
            "region",
            self.region.value,
            f"'shift' for format {self.fmt.name} (its rows are written in its own rotated basis"
            " by dense_append, paged_append and qkv; the shift pass moves them as they are)",
        )
        require(
            self.region is not ShiftRegion.ALL or self.inline,
            "scales",
            self.scales.value,
            "'inline' for region 'all' (side scales would make 9 or 10 storage buffers, past"
            " WebGPU's default 8: run the 'shift' and 'append' passes)",
        )

    def default_workgroup_size(self) -> int:
        if self.region is ShiftRegion.SHIFT:
            return WORD_WORKGROUP
        return quantise_workgroup(self)

    def check_schedule(self) -> None:
        if self.region is not ShiftRegion.SHIFT:
            require_quantised_rows(self, f" for region {self.region.value!r}")

    @property
    def quantiser(self) -> Quantiser:
        """The quantising row program of the ``append`` and ``all`` regions."""
        return Quantiser(self.fmt, self.inline, self.head_dim, self.workgroup_size)


def quantise_workgroup(cfg: DenseConfig) -> int:
    """A quantising walk's workgroup size when a config leaves it unset: ``dense_append``'s, a
    multiple of the row's lanes."""
    return rows_workgroup(QUANTISE_WORKGROUP, row_lanes(cfg.fmt, cfg.head_dim))


def require_quantised_rows(cfg: DenseConfig, where: str = "") -> None:
    """A quantising walk's workgroup holds whole rows (the row's statistic is reduced in it)."""
    lanes = row_lanes(cfg.fmt, cfg.head_dim)
    require_whole_rows(cfg.workgroup_size, lanes, f"lanes of a row{where}", "quantised")


@dataclass(frozen=True)
class _Rows:
    """The word walk of a cache's rows: bindings, constants and the invocation's vector."""

    past: tuple[Buffer, ...]
    present: tuple[Buffer, ...]
    past_side: Buffer | None
    present_side: Buffer | None
    seqlens: Buffer
    row_vecs: Val
    heads: Val
    it: walks.Item


def _word_walk(kb: KernelBuilder, cfg: DenseMoveConfig, count: Val) -> _Rows:
    """The bindings of a cache moved past → present (``seqlens_k`` between them) and the flat
    walk over its rows' vectors of words."""
    width = word_width(cfg.row_words)
    elem = u32 if width == 1 else vec(width, u32)
    past = tuple(kb.binding(name, elem, "read") for name in PAST)
    past_side = None if cfg.inline else kb.binding(PAST_SCALES, f32, "read")
    seqlens = kb.binding("seqlens_k", i32, "read")
    present = tuple(kb.binding(name, elem, "read_write") for name in PRESENT)
    present_side = None if cfg.inline else kb.binding(PRESENT_SCALES, f32, "read_write")
    kb.const("ROW_WORDS", u32, cfg.row_words)
    row_vecs = kb.const("ROW_VECS", u32, cfg.row_words // width)
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    it = walks.vectors(kb, cfg.fold, count, row_vecs, width)
    return _Rows(past, present, past_side, present_side, seqlens, row_vecs, heads, it)


def _put_row(
    kb: KernelBuilder, cfg: DenseMoveConfig, w: _Rows, dst_row: Val, src_row: Val | None = None
) -> None:
    """Vector ``d`` of row ``dst_row`` of the present, and the side scale words it owns: those of
    row ``src_row`` of the past, or zeros (``src_row`` None)."""
    d = w.it.d
    src = None if src_row is None else kb.let("src", src_row * w.row_vecs + d)
    dst = kb.let("dst", dst_row * w.row_vecs + d)
    for past, present in zip(w.past, w.present):
        present[dst] = words.zero(present.binding.elem) if src is None else past[src]
    past_side, present_side = w.past_side, w.present_side
    if past_side is not None and present_side is not None:

        def put(at: Val) -> None:
            value = 0.0 if src_row is None else past_side[src_row * cfg.side_words + at]
            present_side[dst_row * cfg.side_words + at] = value

        _strided(kb, cfg.side_words, cfg.row_words // word_width(cfg.row_words), d, put)


def _strided(kb: KernelBuilder, n: int, per: int, d: Val, move: Callable[[Val], None]) -> None:
    """``move(at)`` for ``at = d + k * per`` (``k`` from 0) while ``at`` may be below ``n``,
    each guarded where it may not be: the lane ``d`` of ``per`` lanes of a row moving its share
    of ``n`` words (side scale words, or a row's words)."""
    for k in range(-(-n // per)):
        at = d + k * per if k else d
        if (k + 1) * per <= n:
            move(at)
        else:
            with kb.if_(at < n):
                move(at)


@builds(DenseRetainConfig)
def dense_retain(cfg: DenseRetainConfig, name: str = "dense_retain") -> Kernel:
    """Build the ``dense_retain`` kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    count, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")
    w = _word_walk(kb, cfg, count)
    t = kb.let("t", w.it.row % seq)
    b = kb.let("b", w.it.row / (seq * w.heads))
    win = append_window(kb, w.seqlens, b, seq, key_seq)
    kb.comment("Outside the append window; the shared stride makes this dst == src.")
    with kb.if_((t < win.append_start).lor(t >= win.active_end)):
        _put_row(kb, cfg, w, w.it.row, w.it.row)
    doc = (
        f"Buffer-sharing append over a dense {cfg.kind} cache, retain pass: rows outside\n"
        "each batch's append window copied past -> present at the same index, words and\n"
        "side scales (the append pass is dense_append)."
    )
    return _word_pass(kb, cfg, w, count, seq, doc)


def _word_pass(
    kb: KernelBuilder, cfg: DenseMoveConfig, w: _Rows, count: Val, seq: Val, doc: str
) -> Kernel:
    """The kernel of a word walk ``w`` over ``count`` cache rows of ``seq`` per head
    (``dense_retain``, ``dense_window_shift``'s shift pass), documented by ``doc``."""
    dispatch = walks.dispatch(count, w.row_vecs, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, doc)
    extents = _cache_extents(cfg, count)
    extents["seqlens_k"] = ceil_div(count, cfg.kv_heads * seq)
    return walks.vector_extents(with_contract(kernel, extents, {"seq >= 1": seq >= 1}))


def _cache_extents(cfg: DenseMoveConfig, rows: Val) -> dict[str, Any]:
    """Past and present of ``rows`` stored rows: words, and side scales where they are."""
    words_ = times(rows, cfg.row_words)
    extents: dict[str, Any] = {name: words_ for name in PAST + PRESENT}
    if not cfg.inline:
        side = times(rows, cfg.side_words)
        extents |= {PAST_SCALES: side, PRESENT_SCALES: side}
    return extents


@builds(DenseWindowShiftConfig)
def dense_window_shift(cfg: DenseWindowShiftConfig, name: str = "dense_window_shift") -> Kernel:
    """Build the ``dense_window_shift`` pass for ``cfg``: the word walk for ``shift``, the
    quantising walk for ``append`` and ``all``."""
    if cfg.region is ShiftRegion.SHIFT:
        return _shift(cfg, name)
    return _quantising_shift(cfg, name)


def _shift(cfg: DenseWindowShiftConfig, name: str) -> Kernel:
    kb = KernelBuilder(name, cfg.workgroup_size)
    count, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")
    w = _word_walk(kb, cfg, count)
    b, hk, t = split_rows(kb, w.it.row, w.heads, seq)
    win = sliding_window(kb, w.seqlens, b, seq, key_seq)
    slice_ = kb.let("slice", (b * w.heads + hk) * seq)
    with kb.if_(t < win.append_start):
        kb.comment("Surviving past rows slide down by the eviction count, words and scales.")
        _put_row(kb, cfg, w, w.it.row, slice_ + (t + win.evicted))
    with kb.elif_(t >= win.resident):
        kb.comment("Outside the resident window: zero words and scales (every element decodes")
        kb.comment("to zero), not left stale.")
        _put_row(kb, cfg, w, w.it.row)
    doc = (
        f"Windowed dense {cfg.kind} cache, shift pass: the surviving past rows slide down by\n"
        "the eviction count (words and side scales), rows past the resident ones are\n"
        "zeroed; the appended rows are left to the append pass."
    )
    return _word_pass(kb, cfg, w, count, seq, doc)


def _quantising_shift(cfg: DenseWindowShiftConfig, name: str) -> Kernel:
    """The ``append`` and ``all`` regions: the quantiser's lanes (``ROW_LANES`` per row, each on
    a run of vectors; :func:`kvdsl.nodes.quantise.quantise_rows`), rows whole inside a
    workgroup. ``append`` walks the new tokens' rows; ``all`` every cache row, whose lanes first
    move (or zero) the words ``d, d + ROW_LANES, ...`` of a surviving (or cleared) row, then
    quantise the appended rows."""
    every = cfg.region is ShiftRegion.ALL
    kb = KernelBuilder(name, cfg.workgroup_size)
    q = cfg.quantiser
    past_k = past_v = None
    if every:  # as the present's words (:func:`kvdsl.nodes.quantise.cache_binding`)
        past_k, past_v = (kb.binding(n, q.cache_elem, "read") for n in PAST)
    src_k, src_v = words.bindings(kb, SOURCES, cfg.input_type.scalar, 4)
    seqlens = kb.binding("seqlens_k", i32, "read")
    cos = sin = None
    if cfg.rotary and every:  # one packed table: 8 storage buffers in all
        cos = sin = words.binding(kb, ROTARY_TABLE, f32, 4)
    elif cfg.rotary:
        cos, sin = words.bindings(kb, ROTARY_TABLES, f32, 4)
    f = dense_rows(kb, cfg, q, cfg.half if cfg.rotary else 0)
    heads = f.consts["KV_HEADS"]
    present_key, present_value = f.present_key, f.present_value
    count, seq, key_seq = kb.param("count"), kb.param("seq"), kb.param("keySeq")

    it = f.walk(count, f"on a run of {q.vectors} vectors")
    done = kb.let("done", it.e >= count * f.lanes)
    if every:
        b, hk, t = split_rows(kb, it.row, heads, seq)
        win = sliding_window(kb, seqlens, b, seq, key_seq)
        appended = (t >= win.append_start).land(t < win.resident)
        kb.comment("The new token of an appended row; any row's index stays in range (the")
        kb.comment("quantiser's loads are made by every invocation).")
        j = kb.let("j", min_(max_(t, win.append_start) - win.append_start + win.skip, key_seq - 1))
        dst_t = t
        slice_ = kb.let("slice", (b * heads + hk) * seq)
        units = cfg.row_words // q.store_width  # the cache bindings' elements per row
        words_ = units == cfg.row_words
        row_units = f.consts["ROW_WORDS"] if words_ else kb.const("ROW_VECS", u32, units)
        dst = kb.let("dst", it.row * row_units)

        def move(at: Val) -> None:
            present_key[dst + at] = past_k[src + at]
            present_value[dst + at] = past_v[src + at]

        def clear(at: Val) -> None:
            present_key[dst + at] = words.zero(q.cache_elem)
            present_value[dst + at] = words.zero(q.cache_elem)

        with kb.if_((~done).land(t < win.append_start)):
            kb.comment("Surviving past rows slide down by the eviction count.")
            src = kb.let("src", (slice_ + t + win.evicted) * row_units)
            _strided(kb, units, q.lanes, it.d, move)
        with kb.elif_((~done).land(t >= win.resident)):
            kb.comment("Outside the resident window: zero words (every element decodes to zero).")
            _strided(kb, units, q.lanes, it.d, clear)
        skip = done.lor(~appended)
    else:
        b, hk, j = split_rows(kb, it.row, heads, key_seq, "j")
        win = sliding_window(kb, seqlens, b, seq, key_seq)
        kb.comment(
            "New token j lands at row appendStart + j - skip; tokens before skip do not fit."
        )
        dst_t = kb.let("dstT", win.append_start + (max_(j, win.skip) - win.skip))
        skip = done.lor(j < win.skip)
    src_base = f.src_base(b, j, hk, key_seq)
    pos = kb.let("pos", win.past + j)
    rot = None
    if cfg.rotary:
        kb.comment("New K is rotated at its absolute position; retained keys already are.")
        rot = Rotation(cos, sin, pos, f.consts.get("HALF_V4"), cfg.partial, packed=every)
    k, v = load_run(kb, (src_k, src_v), src_base, q, it.d, rot)
    f.store(it.d, k, v, f.head_row(b, hk, seq, dst_t), skip)
    rotated = ", K rotated at its absolute position" if cfg.rotary else ""
    if every:
        doc = (
            f"Windowed dense {cfg.kind} cache, every row: surviving past rows slide down by\n"
            "the eviction count, the new BSH K/V are quantised into the appended rows (each\n"
            f"row's scale reduced in the kernel{rotated}), the rows past them are zeroed."
        )
    else:
        doc = (
            f"Windowed dense {cfg.kind} cache, append pass: the new BSH K/V quantised into\n"
            f"the appended rows, each row's scale reduced in the kernel{rotated}."
        )
    kernel = kb.build(f.dispatch(count), doc)
    per_batch = seq if every else key_seq
    batches = ceil_div(count, cfg.kv_heads * per_batch)
    new = times(batches, key_seq, cfg.hidden)
    extents: dict[str, Any] = {"seqlens_k": batches, SOURCES[0]: new, SOURCES[1]: new}
    extents |= f.extents(times(batches, cfg.kv_heads, seq))
    if every:
        extents |= {name: extents["present_key"] for name in PAST}
    if cfg.rotary:
        # New token j sits at position max(keySeq, seqlens_k[b] + 1) - keySeq + j.
        positions = emax(key_seq, plus(largest("seqlens_k"), 1))
        if every:
            extents[ROTARY_TABLE] = times(positions, 2 * cfg.half)
        else:
            extents |= {t_: times(positions, cfg.half) for t_ in ROTARY_TABLES}
    requires = {f"{'seq' if every else 'keySeq'} >= 1": per_batch >= 1}
    return walks.vector_extents(with_contract(kernel, extents, requires))


def load_run(
    kb: KernelBuilder,
    src: tuple[Buffer, Buffer],
    base: Val,
    q: Quantiser,
    lane: Val,
    rot: Rotation | None = None,
) -> tuple[list[Val], list[Val]]:
    """The vectors lane ``lane`` holds of the K and V rows at ``src[base ..]``
    (:meth:`kvdsl.nodes.quantise.Quantiser.vector_at`), as f32, K NeoX-rotated where ``rot`` is
    given (``rot.half`` in vectors; each vector with its partner ``half`` away and the pair's
    cos/sin entry, from one packed table too)."""
    src_k, src_v = src
    k, v = [], []
    for j in range(q.vectors):
        at = kb.let(f"at{j}", q.vector_at(lane, j))
        v.append(kb.let(f"v{j}", words.as_f32(kb, src_v[base + at])))
        if rot is None:
            k.append(kb.let(f"k{j}", words.as_f32(kb, src_k[base + at])))
            continue
        rotated = rotate_loaded(kb, lambda i: words.as_f32(kb, src_k[base + i]), at, rot, j)
        k.append(kb.let(f"k{j}", rotated))
    return k, v
