"""Dense quantised caches: ``dense_append`` (and ``dense_build``) writes new tokens into a cache
of one of the formats of :mod:`kvdsl.nodes.formats` with each row's (or block's) scale computed
in the kernel, and ``dense_read`` reads cache rows back as f32 or f16.

``dense_append``: new BSH K/V (``src_k``, ``src_v``: ``keySeq`` tokens per batch) go to rows
``[appendStart, activeEnd)`` of a buffer-sharing BNSH cache of ``seq`` rows per head, the window
of :func:`kvdsl.nodes.window.append_window` from ``seqlens_k`` (tokens that do not fit are
dropped); K is NeoX-rotated at its cache row with ``rotary`` (its first ``2 * rotary_half``
elements, the rest passing through, or the whole head). A cache row is ``ROW_WORDS`` u32
words (``present_key``, ``present_value``); with ``scales="side"`` a dense format's scale (and
zero point) sits in ``present_scales`` instead, K's then V's per row (``2 * stats`` f32 per row),
one binding for both so that a rotary append stays within WebGPU's 8 storage buffers.

The walk is flat, one invocation per ``vec4`` of a new row, rows whole inside a workgroup;
each invocation loads its (normed, rotated) vector and hands the row to the dense quantiser,
:func:`kvdsl.nodes.quantise.quantise_rows` (:attr:`~kvdsl.kernels.dense_fields.LaneWalk.quantiser`), with the row's place in the
cache; invocations past the end and tokens that do not fit store nothing.

``dense_build``: the same row program into a BNSH cache that holds the new tokens alone
(``seq`` per batch, row ``t``), K rotated at ``pastSeq + t``; no ``seqlens_k``.

``dense_read``: ``count`` stored rows (``cache_key``, ``cache_value``, and ``cache_scales`` for
side scales) → f32 or f16 rows (``key``, ``value``), one invocation per output ``vec4``.

:func:`bytes_per_token_head` is the contract's size of one (token, head) row of K (or of V),
scales included (``index.json``'s ``bytes_per_token_head``).
"""

from __future__ import annotations

import functools
from dataclasses import KW_ONLY, dataclass
from typing import Any, Callable

from kvdsl.ir import Buffer, Dispatch, Kernel, KernelBuilder, Val, construct, f32, max_, select, u32
from kvdsl.ir import vec, with_contract
from kvdsl.kernels.config import (
    CacheConfig,
    DenseFormat,
    Element,
    FLOATS,
    MAX_WORKGROUP,
    builds,
    choice,
    format_choice,
    require,
)
from kvdsl.kernels.extents import ceil_div, plus, times

from kvdsl.kernels.plan import require_whole_rows, rows_workgroup
from kvdsl.kernels.rows import Transforms, declare_inputs, row_extents
from kvdsl.kernels.dense_fields import (
    DenseWalk,
    LaneWalk,
    ScalePlace,
    Scales,
    require_format,
    require_rotation,
)
from kvdsl.nodes import rotation, walks, words
from kvdsl.nodes.formats import Format, format_of
from kvdsl.nodes.index import bsh, split_rows
from kvdsl.nodes.quantise import (
    Destination,
    Quantiser,
    RowPlace,
    cache_binding,
    quantise_rows,
)
from kvdsl.nodes.rmsnorm import Norm
from kvdsl.nodes.transforms import lane_norm, rotated_lane, transform_lane, transform_run
from kvdsl.nodes.window import append_window

F32X4 = vec(4, f32)
LANES = ("x", "y", "z", "w")
#: ``dense_append``'s and ``dense_build``'s workgroup size when a config leaves it unset (a
#: multiple of a row's lanes at most this): each workgroup waits at a barrier, and smaller
#: workgroups keep more of them in flight.
QUANTISE_WORKGROUP = 64
#: WebGPU's default maxComputeWorkgroupStorageSize.
MAX_WORKGROUP_BYTES = 16384


@dataclass(frozen=True)
class DenseConfig(Scales, CacheConfig):
    """The fields of the dense-format modes: the format and where its scales sit."""

    _: KW_ONLY
    format: DenseFormat = format_choice(DenseFormat.INT8)
    scales: ScalePlace = choice(ScalePlace.INLINE)

    def check_fields(self) -> None:
        self.refuse_window(
            "the dense modes have no windowed form; dense_read runs on any window of whole rows"
            " as it is, with count the window's rows"
        )
        require_format(self.fmt, self.scales, self.head_dim)

    @property
    def fmt(self) -> Format:
        """The format's value (:class:`kvdsl.nodes.formats.Format`)."""
        return format_of(self.format)

    @property
    def kind(self) -> str:
        """The format's name, with where its scales sit unless it is a ggml format (whose
        scales are always inline): the cache's kind in a kernel's description."""
        return self.fmt.name + ("" if self.fmt.ggml else f", scales {self.scales.value}")

    @property
    def per_row(self) -> int:
        """Vectors (``vec4``) per row."""
        return self.head_dim // 4

    def default_workgroup_size(self) -> int:
        return rows_workgroup(MAX_WORKGROUP, self.per_row)


@dataclass(frozen=True)
class DenseAppendConfig(LaneWalk, Transforms, DenseConfig):
    """A ``dense_append`` variant: cache shape, format, scales' place, K RMSNorm, rotary (the
    first ``2 * rotary_half`` elements of a row, or the whole head), input type."""

    # K rotated by the signed Walsh-Hadamard matrix over blocks of this many dimensions (the
    # head_dim: the whole head) after its RMSNorm and rotary, before it is quantised
    # (kvdsl.reference.rotation); 0: not rotated. V is stored as it is. attend reads such a
    # cache with the same rotation.
    rotation: int = 0
    mode = "dense_append"

    def check_fields(self) -> None:
        super().check_fields()
        self.check_transforms()
        require(
            not (self.k_norm and self.rotary and self.scales is ScalePlace.SIDE),
            "scales",
            self.scales.value,
            "'inline' with k_norm and rotary (side scales would make 9 storage buffers, past"
            " WebGPU's default 8)",
        )
        require_rotation(self.fmt, self.rotation, self.head_dim)
        self.check_lane_walk()

    def default_workgroup_size(self) -> int:
        return rows_workgroup(QUANTISE_WORKGROUP, self.row_lanes)

    def check_schedule(self) -> None:
        require_whole_rows(self.workgroup_size, self.row_lanes, "invocations of a row")
        require_rows_fit(self.quantiser, self.k_norm, self.rotation)


@dataclass(frozen=True)
class DenseBuildConfig(DenseAppendConfig):
    """A ``dense_build`` variant: the fields of ``dense_append``; the present holds the new
    tokens alone (``seq`` per batch), K rotated at ``pastSeq + t``."""

    mode = "dense_build"


@dataclass(frozen=True)
class DenseReadConfig(DenseConfig):
    """A ``dense_read`` variant: cache shape, format, scales' place, the rows' element type
    (f16 rows travel as ``vec2<u32>`` words: no ``shader-f16``)."""

    output_type: Element = choice(Element.F32, FLOATS)
    mode = "dense_read"

    def check_fields(self) -> None:
        super().check_fields()


def require_rows_fit(q: Quantiser, k_norm: bool, block: int) -> None:
    """Refuse a workgroup whose rows do not fit WebGPU's workgroup memory: the quantiser's
    (``q``), K RMSNorm's sums (``k_norm``) and the exchange of a Walsh-Hadamard rotation over
    blocks of ``block`` dimensions (0: none)."""
    size = q.workgroup_size
    need = q.workgroup_bytes() + (4 * size if k_norm else 0)
    if block:
        need += rotation.exchange_bytes(q.vector_at, q.lanes, q.vectors, block, size)
    walk = DenseWalk.STAGED if q.staged else DenseWalk.STRIDED if q.strided else DenseWalk.RUNS
    require(
        need <= MAX_WORKGROUP_BYTES,
        "workgroup_size",
        size,
        f"one whose rows fit WebGPU's {MAX_WORKGROUP_BYTES} bytes of workgroup memory"
        f" (walk {walk.value!r} needs {need} bytes at this size)",
    )


def bytes_per_token_head(cfg: DenseConfig) -> int:
    """Bytes one (token, head) row of K, or of V, takes in ``cfg``'s cache, scales included."""
    return cfg.fmt.bytes_per_row(cfg.head_dim, cfg.inline)


def contract_fields(cfg: Any) -> dict[str, Any]:
    """The fields a dense variant's ``index.json`` entry adds (:func:`kvdsl.contract.entry`):
    its ``bytes_per_token_head`` (K or V, scales included; the format and ``scales`` say where
    the scales sit); nothing for other modes' configs."""
    if not isinstance(cfg, DenseConfig):
        return {}
    return {"bytes_per_token_head": bytes_per_token_head(cfg)}


def _consts(kb: KernelBuilder, cfg: DenseConfig) -> tuple[Val, Val, Val]:
    """``HEAD_DIM``, ``HEAD_DIM_V4`` and ``ROW_WORDS``."""
    head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
    per_row = kb.const("HEAD_DIM_V4", u32, cfg.per_row)
    row_words = kb.const("ROW_WORDS", u32, cfg.fmt.row_words(cfg.head_dim, cfg.inline))
    return head_dim, per_row, row_words


@dataclass(frozen=True)
class DenseRows:
    """The frame of a program that quantises rows into a dense cache (``dense_append``,
    ``dense_build``, ``dense_window_shift``'s ``append`` and ``all``, ``dense_convert``): the
    bindings ``present_key``, ``present_value`` (and ``present_scales``, side scales), the consts
    (:func:`dense_rows`), the quantiser ``q``'s walk and store, its dispatch and the cache's
    extents."""

    kb: KernelBuilder
    cfg: DenseConfig
    q: Quantiser
    present_key: Buffer
    present_value: Buffer
    side: Buffer | None
    consts: dict[str, Val]

    def walk(self, rows: Val, each: str) -> walks.Item:
        """The walk of ``rows`` rows, ``ROW_LANES`` invocations per row (``each``: what one
        holds, in a comment), unguarded: those past the end reach the quantiser's barriers."""
        self.kb.comment(f"ROW_LANES invocations per row, each {each}.")
        return walks.vectors(self.kb, self.cfg.fold, rows, self.lanes, 1, guard=False)

    def src_base(self, b: Val, t: Val, hk: Val, key_seq: Val) -> Val:
        """``srcBase``: head ``hk``'s first vector of token ``t`` of batch ``b`` in BSH sources
        of ``key_seq`` tokens per batch."""
        hidden, per_row = self.consts["KV_HIDDEN_V4"], self.consts["HEAD_DIM_V4"]
        return self.kb.let("srcBase", bsh(b, t, hk, key_seq, hidden, per_row))

    def head_row(self, b: Val, hk: Val, seq: Val, t: Val) -> Callable[[], Val]:
        """Row ``t`` of head ``hk`` of batch ``b`` in a BNSH cache of ``seq`` rows per head,
        declared (``dstRow``) where :meth:`store` asks for it."""
        heads = self.consts["KV_HEADS"]
        return lambda: self.kb.let("dstRow", (b * heads + hk) * seq + t)

    def store(self, lane: Val, k: list[Val], v: list[Val] | None, row: Callable[[], Val],
              skip: Val, is_v: Val | None = None) -> None:  # fmt: skip
        """Quantise lane ``lane``'s vectors of a K and a V row (``k``, ``v``; split rows: ``k``
        alone, ``is_v`` telling V's) into cache row ``row()``, except where ``skip`` holds."""

        def place() -> RowPlace:
            at = row()
            scales = None if self.side is None else at * self.q.side_words
            return RowPlace(at * self.consts["ROW_WORDS"], scales)

        dest = Destination(self.present_key, self.present_value, self.side, place, skip, is_v)
        quantise_rows(self.kb, self.q, lane, k, v, dest)

    @property
    def lanes(self) -> Val:
        """``ROW_LANES``."""
        return self.consts["ROW_LANES"]

    def dispatch(self, rows: Val) -> Dispatch:
        """The dispatch of the walk over ``rows`` rows."""
        cfg = self.cfg
        return walks.dispatch(rows, self.lanes, cfg.workgroup_size, cfg.fold, blocks=False)

    def extents(self, rows: Any) -> dict[str, Any]:
        """The cache bindings' least sizes, for ``rows`` cache rows."""
        words_ = times(rows, self.consts["ROW_WORDS"].node)
        out = {"present_key": words_, "present_value": words_}
        if self.side is not None:
            out["present_scales"] = times(rows, self.q.side_words)
        return out


def dense_rows(
    kb: KernelBuilder,
    cfg: DenseConfig,
    q: Quantiser,
    half: int = 0,
    between: dict[str, int] | None = None,
) -> DenseRows:
    """Declare :class:`DenseRows`' bindings for ``cfg`` and its quantiser ``q``, then the consts
    ``HEAD_DIM``, ``HEAD_DIM_V4``, ``ROW_WORDS``, those of ``between`` (name → value, in order;
    None: ``KV_HEADS`` and ``KV_HIDDEN_V4``, for rows of BSH heads), ``ROW_LANES`` and, with
    rotary's ``half`` pairs per row, ``HALF_V4``."""
    if between is None:
        between = {"KV_HEADS": cfg.kv_heads, "KV_HIDDEN_V4": cfg.hidden // 4}
    present_key = cache_binding(kb, q, "present_key")
    present_value = cache_binding(kb, q, "present_value")
    side = None if cfg.inline else kb.binding("present_scales", f32, "read_write")
    names = ("HEAD_DIM", "HEAD_DIM_V4", "ROW_WORDS")
    consts = dict(zip(names, _consts(kb, cfg)))
    consts |= {name: kb.const(name, u32, value) for name, value in between.items()}
    consts["ROW_LANES"] = kb.const("ROW_LANES", u32, q.lanes)
    if half:
        consts["HALF_V4"] = kb.const("HALF_V4", u32, half // 4)
    return DenseRows(kb, cfg, q, present_key, present_value, side, consts)


@builds(DenseAppendConfig)
def dense_append(cfg: DenseAppendConfig, name: str = "dense_append") -> Kernel:
    """Build the ``dense_append`` kernel for ``cfg``."""
    return _quantise(cfg, name, append=True)


@builds(DenseBuildConfig)
def dense_build(cfg: DenseBuildConfig, name: str = "dense_build") -> Kernel:
    """Build the ``dense_build`` kernel for ``cfg``."""
    return _quantise(cfg, name, append=False)


def _quantise(cfg: DenseAppendConfig, name: str, append: bool) -> Kernel:
    fmt = cfg.fmt
    kb = KernelBuilder(name, cfg.workgroup_size)
    ins = declare_inputs(kb, cfg, seqlens_k=append, width=4)
    src_k, src_v, weight = ins.src_k, ins.src_v, ins.k_norm_weight
    q = cfg.quantiser
    f = dense_rows(kb, cfg, q, cfg.half if cfg.rotary else 0)
    eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.k_norm else None
    if append:
        count, key_seq, seq = kb.param("count"), kb.param("keySeq"), kb.param("seq")
    else:
        count, seq, past = kb.param("count"), kb.param("seq"), kb.param("pastSeq")
        key_seq = seq  # the present holds the new tokens alone

    n = q.vectors
    rows = count * 2 if cfg.split else count
    it = f.walk(rows, f"holding {n} vectors of it")
    is_v = src_row = None
    if cfg.split:
        kb.comment("K's rows, then V's: an invocation quantises one row of one of them.")
        is_v = kb.let("isV", it.row >= count)
        src_row = kb.let("srcRow", select(it.row, it.row - count, is_v))
    b, hk, t = split_rows(kb, it.row if src_row is None else src_row, f.consts["KV_HEADS"], key_seq)
    src_base = f.src_base(b, t, hk, key_seq)
    skipped = None
    if append:
        win = append_window(kb, ins.seqlens_k, b, seq, key_seq)
        kb.comment(
            "New token t lands at row appendStart + t - skip; tokens before skip do not fit."
        )
        dst_t = position = kb.let("dstT", win.append_start + (max_(t, win.skip) - win.skip))
        skipped = t < win.skip
    else:
        dst_t, position = t, kb.let("pos", past + t)
    at = [src_base + q.vector_at(it.d, j) for j in range(n)]
    rot = ins.rotation(position, f.consts.get("HALF_V4"), cfg.partial) if cfg.rotary else None

    def load_k(i: Val) -> Val:
        return words.as_f32(kb, src_k[src_base + i])

    def row_norm(k: list[Val]) -> Norm | None:
        if not cfg.k_norm:
            return None
        wg = cfg.workgroup_size
        return lane_norm(kb, k, it.d, f.lanes, q.lanes, wg, f.consts["HEAD_DIM"], eps, weight)

    if cfg.split:
        x = [kb.var(f"x{j}", F32X4) for j in range(n)]
        with kb.if_(is_v):
            for j in range(n):
                x[j].set(words.as_f32(kb, src_v[at[j]]))
        with kb.else_():
            for j in range(n):
                x[j].set(words.as_f32(kb, src_k[at[j]]))
        if cfg.k_norm or cfg.rotary:
            norm = row_norm(x)
            with kb.if_(~is_v):
                vector_at = functools.partial(q.vector_at, it.d)
                for j, kj in enumerate(
                    transform_lane(kb, x, vector_at, load_k, norm, rot, q.paired)
                ):
                    x[j].set(kj)
        if cfg.rotation:
            kb.comment("K's rows are rotated by their lanes together (a barrier), in workgroups")
            kb.comment("whose first row is K's (a workgroup-uniform test); V's keep theirs.")
            per_wg = cfg.workgroup_size // q.lanes
            first = kb.let("wgFirstRow", (kb.wid.x + kb.wid.y * kb.nwg.x) * per_wg)
            args = (q.vector_at, it.d, q.lanes, cfg.rotation, cfg.workgroup_size)
            with kb.if_(first < count):
                for xj, kj in zip(x, rotated_lane(kb, list(x), *args)):
                    xj.set(select(kj, xj, is_v))
        if fmt.rotated:
            kb.comment(f"The row in {fmt.name}'s own basis (the lane holds it whole).")
            for j, y in enumerate(fmt.rotate_row(kb, "xOrt", list(x))):
                x[j].set(y)
        k, v = x, None
    else:
        k = [kb.let(f"kIn{j}", words.as_f32(kb, src_k[at[j]])) for j in range(n)]
        v = [kb.let(f"v{j}", words.as_f32(kb, src_v[at[j]])) for j in range(n)]
        args = (row_norm(k), rot, cfg.rotation, cfg.workgroup_size)
        k, v = transform_run(kb, q, it.d, k, v, load_k, *args)
    done = it.e >= rows * f.lanes
    skip = done if skipped is None else done.lor(skipped)
    f.store(it.d, k, v, f.head_row(b, hk, seq, dst_t), skip, is_v)
    transforms = ["K RMS-normed"] if cfg.k_norm else []
    if cfg.rotary:
        transforms.append("K rotated at its row" if append else "K rotated at pastSeq + t")
    if fmt.rotated:
        transforms.append(f"K and V in {fmt.name}'s rotated basis")
    if append:
        doc = (
            f"Quantise new BSH K/V into a buffer-sharing BNSH {cfg.kind} cache, each row's scale\n"
            "reduced in the kernel; the append window comes from seqlens_k"
        )
    else:
        doc = (
            f"Quantise new BSH K/V into a BNSH {cfg.kind} cache, each row's scale reduced in the"
            " kernel"
        )
    doc += "".join(f"; {x}" for x in transforms) + "."
    kernel = kb.build(f.dispatch(rows), doc)
    batch = ceil_div(count, cfg.kv_heads * key_seq)
    positions, seqlens = (seq, {"seqlens_k": batch}) if append else (plus(past, seq), {})
    extents = row_extents(cfg, count, key_seq, positions, between=seqlens)
    extents |= f.extents(times(batch, cfg.kv_heads, seq))
    requires = {"keySeq >= 1": key_seq >= 1, "keySeq <= seq": key_seq <= seq}
    if not append:
        requires = {"seq >= 1": seq >= 1}
    return walks.vector_extents(with_contract(kernel, extents, requires))


@builds(DenseReadConfig)
def dense_read(cfg: DenseReadConfig, name: str = "dense_read") -> Kernel:
    """Build the ``dense_read`` kernel for ``cfg``."""
    fmt = cfg.fmt
    kb = KernelBuilder(name, cfg.workgroup_size)
    cache_key = kb.binding("cache_key", u32, "read")
    cache_value = kb.binding("cache_value", u32, "read")
    side = None if cfg.inline else kb.binding("cache_scales", f32, "read")
    out_ty = cfg.output_type.scalar
    out_key, out_value = words.bindings(kb, ("key", "value"), out_ty, 4, "read_write")
    out_elem = words.elem(out_ty, 4)
    _, per_row, row_words = _consts(kb, cfg)
    count = kb.param("count")
    it = walks.vectors(kb, cfg.fold, count, per_row, 4)
    base = kb.let("rowBase", it.row * row_words)
    n = fmt.stats
    for which, cache, out, side_at in (
        ("k", cache_key, out_key, 0),
        ("v", cache_value, out_value, n),
    ):

        def load(w: Val, cache: Buffer = cache) -> Val:
            return cache[base + w]

        def stat(i: int, side_at: int = side_at) -> Val:
            return side[it.row * (2 * n) + (side_at + i)]

        lanes_ = [
            fmt.decode(kb, f"{which}{c.upper()}", load, it.d * 4 + lane, stat, cfg.inline)
            for lane, c in enumerate(LANES)
        ]
        out[it.e] = words.to(kb, out_elem, construct(F32X4, *lanes_))
    dispatch = walks.dispatch(count, per_row, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, f"Read {fmt.name} cache rows back as {out_ty} rows.")
    extents: dict[str, Any] = {
        "cache_key": times(count, row_words.node),
        "cache_value": times(count, row_words.node),
        "key": times(count, cfg.head_dim),
        "value": times(count, cfg.head_dim),
    }
    if side is not None:
        extents["cache_scales"] = times(count, 2 * n)
    return walks.vector_extents(with_contract(kernel, extents))
