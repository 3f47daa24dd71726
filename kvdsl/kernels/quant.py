"""``build_quant`` and ``append_quant``: new BSH K/V quantised into an int8 or packed int4 cache.

Drop-in for the template's final ``{% else %}`` branch. The row program is :mod:`.build`'s (K
loaded into an f32 row, optionally RMS-normed and rotated); each element is then quantised with
:func:`kvdsl.nodes.quant.quantize` by the ``kscale``/``vscale`` helper functions' scale
(per channel or per tensor as ``params.perChannel`` says at run time). 8 bits store one i32 per
element (``PACKED = HEAD_DIM`` words per row); 4 bits store two nibbles per u32
(``PACKED = HEAD_DIM / 2``).

- ``build_quant`` writes a BNSH cache of ``params.seq`` rows per head; rotary at ``pastSeq + t``.
- ``append_quant`` writes the new tokens into a buffer-sharing cache of ``params.totalSeq`` rows
  per head at the window :func:`kvdsl.nodes.window.append_window` gives from ``seqlens_k``.

Walks: ``per_row`` (the template's) and ``flat`` (:mod:`kvdsl.nodes.walks`): one invocation per
four elements, stored as one ``vec4<i32>`` (8 bits) or one ``vec2<u32>`` of two packed words (4
bits; the cache layout is the drop-in's, low nibble first), ``count * HEAD_DIM_V4`` items; one
element per invocation for 8 bits when ``head_dim`` does not divide by 4 (the flat int4 walk
requires it). Scales stay scalar ``f32`` bindings, read per lane. With K RMSNorm reduced in
workgroup memory (or ``pairs=True`` with rotary) the flat walk takes one invocation per pair of
vectors ``(dr, dr + HALF_V4)`` (:attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs`).

Bindings (:class:`~kvdsl.kernels.config.Bindings`): the template's, or packed within WebGPU's
default 8 storage buffers: cos and sin in one ``rotary_table`` (per position ``HALF`` cos, then
``HALF`` sin; :class:`kvdsl.nodes.rotary.Rotation`'s ``packed``) and the scales in one
``kv_scale`` of ``vec2<f32>`` ``(k, v)`` entries (:func:`kvdsl.nodes.quant.kv_scales`). Unset,
a config takes the template's where they fit 8 and the packed ones where they do not (K RMSNorm
with rotary, rotary in ``append_quant``).

``window`` (the flat walk): the present is bound from slice ``headBase`` on and ``src_k`` /
``src_v`` from batch ``batchBase`` on, as in :mod:`.build`; ``seqlens_k``, the scales, the K-norm
weight and the rotary tables (packed or not) are bound whole.

Defects of the template, fixed here:

- ``append_quant`` computes ``appendStart = seqlens_k[b] + 1 - seq`` in u32: a right-padded
  prompt (``seqlens_k[b] + 1 < seq``) wraps it to ~2^32 and the rows land out of bounds (WebGPU
  clamps or drops them); ``seqlens_k[b] + 1 > totalSeq`` writes past the head's last row into
  the next head's rows. kvdsl clamps the window like ``merge_share``:
  ``activeEnd = min(totalSeq, max(seq, seqlens_k[b] + 1))``, rows ``[activeEnd - seq, activeEnd)``
  (and, when ``seq > totalSeq``, keeps the newest ``totalSeq`` tokens).
- ``append_quant`` rotates K at ``pastSeq + t``, one uniform for every batch, while the rows it
  writes sit at each batch's own ``appendStart + t``: in a buffer-sharing cache the row is the
  absolute position (``merge_share`` rotates at the row). kvdsl rotates at the row by default
  (``rotary_position="row"``); ``"past_seq"`` keeps the template's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import with_contract
from kvdsl.ir import Dispatch, Kernel, KernelBuilder, Val, convert, f32, i32, min_, u32, vec
from kvdsl.ir.tree import Binary, Call, Lit
from kvdsl.ir.ops import Op
from kvdsl.kernels.rows import (
    RowConfig,
    RowInputs,
    declare_consts,
    declare_inputs,
    declare_params,
    flat_k,
    flat_k_loads,
    flat_k_pair,
    flat_norm,
    flat_row,
    k_row,
    row_extents,
    seqlens_extent,
    row_walk,
)
from kvdsl.kernels.config import (
    Bindings,
    Bits,
    KV_SCALE,
    MAX_STORAGE_BUFFERS,
    ROTARY_TABLE,
    ROTARY_TABLES,
    RotaryPosition,
    Slot,
    Walk,
    builds,
    choice,
    multiple_of,
    one_of,
    require,
)
from kvdsl.kernels.extents import ceil_div, node, plus, times

from kvdsl.nodes import walks, words
from kvdsl.nodes.index import bnsh, cache_window
from kvdsl.nodes.quant import (
    QRANGE,
    kv_scale_function,
    kv_scales,
    pack_int4,
    pack_int4x4,
    quantize,
    scale_function,
    scale_index,
    scales,
)
from kvdsl.nodes.window import append_window


def storage_buffers(cfg: QuantConfig, bindings: Bindings | None = None) -> int:
    """Storage bindings of a quantising kernel with ``bindings`` (default: the config's): K/V
    in and out, scales and the optional inputs."""
    packed = (cfg.bindings if bindings is None else bindings) is Bindings.PACKED
    pair = 1 if packed else 2  # the K/V scales, and cos/sin: one binding each when packed
    return 4 + pair + cfg.k_norm + pair * cfg.rotary + (cfg.mode == "append_quant")


def _default_bindings(cfg: QuantConfig) -> Bindings:
    """The template's bindings where they fit WebGPU's default limit, else the packed ones."""
    fits = storage_buffers(cfg, Bindings.TEMPLATE) <= MAX_STORAGE_BUFFERS
    return Bindings.TEMPLATE if fits else Bindings.PACKED


def _qrange(cfg: QuantConfig) -> tuple[int, int]:
    """The integer range of the config's bits (of 8 bits while ``bits`` is not yet checked)."""
    return QRANGE.get(cfg.bits, QRANGE[8])


@dataclass(frozen=True)
class QuantConfig(RowConfig):
    """Fields shared by the quantising modes.

    ``qmin``/``qmax`` (the clamp range, inclusive) default to the full signed range of ``bits``.
    ``bindings`` (:class:`~kvdsl.kernels.config.Bindings`): the template's storage bindings, or
    the packed ones. K RMSNorm with rotary (and rotary in ``append_quant``) binds 9 or 10 of the
    template's, past WebGPU's default of 8 per stage, so those configs default to ``packed``
    (at most 8) and every other to ``template``; a ``template`` kernel past 8 states the limit it
    needs (:func:`kvdsl.ir.features.limits`), which a host must request of its device.
    """

    bits: Bits = choice(Bits.INT8)
    qmin: int = Slot(derive=lambda cfg: _qrange(cfg)[0])
    qmax: int = Slot(derive=lambda cfg: _qrange(cfg)[1])
    bindings: Bindings = Slot(enum=Bindings, derive=_default_bindings)

    @property
    def int4(self) -> bool:
        return self.bits is Bits.INT4

    @property
    def packed(self) -> int:
        """Stored u32/i32 words per row (the template's ``PACKED``)."""
        return self.head_dim if self.bits is Bits.INT8 else self.head_dim // 2

    def check_schedule(self) -> None:
        super().check_schedule()
        if self.int4:
            require(self.head_dim % 2 == 0, "head_dim", self.head_dim, "an even number for int4")
            if self.walk is Walk.FLAT:
                # One invocation packs four elements into two words.
                need = 8 if self.rotary and self.rotary_half is None else 4
                multiple_of("head_dim", self.head_dim, need, " for the flat int4 walk")
                require(
                    walks.lanes(self.head_dim, self.rotary, self.half) == 4,
                    "rotary_half",
                    self.rotary_half,
                    "a multiple of 4 for the flat int4 walk (it rotates and packs four elements"
                    " at a time; the per_row walk takes any rotary_half)",
                )
        lo, hi = QRANGE[self.bits]
        for field, value in (("qmin", self.qmin), ("qmax", self.qmax)):
            ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
            require(ok, field, value, f"an integer in [{lo}, {hi}] for {self.bits} bits")
        require(self.qmin < self.qmax, "qmin", self.qmin, f"less than qmax={self.qmax}")
        one_of("bindings", self.bindings, Bindings)


@dataclass(frozen=True)
class BuildQuantConfig(QuantConfig):
    """A ``build_quant`` variant."""

    mode = "build_quant"


@dataclass(frozen=True)
class AppendQuantConfig(QuantConfig):
    """An ``append_quant`` variant; ``rotary_position`` is ``"row"`` or ``"past_seq"``."""

    rotary_position: RotaryPosition = choice(RotaryPosition.ROW)
    mode = "append_quant"

    def check_schedule(self) -> None:
        super().check_schedule()


@builds(BuildQuantConfig)
def build_quant(cfg: BuildQuantConfig, name: str = "build_quant") -> Kernel:
    """Build the ``build_quant`` kernel for ``cfg``."""
    return _quant(cfg, name, append=False)


@builds(AppendQuantConfig)
def append_quant(cfg: AppendQuantConfig, name: str = "append_quant") -> Kernel:
    """Build the ``append_quant`` kernel for ``cfg``."""
    return _quant(cfg, name, append=True)


def _quant(cfg: QuantConfig, name: str, append: bool) -> Kernel:
    kb = KernelBuilder(name, cfg.workgroup_size)
    plan = cfg.plan
    program = plan.program
    width = walks.lanes(cfg.head_dim, cfg.rotary, cfg.half) if program else 1
    packed = cfg.bindings is Bindings.PACKED
    inputs = declare_inputs(kb, cfg, seqlens_k=append, width=width, packed_table=packed)
    if packed:
        k_scale = v_scale = kb.binding(KV_SCALE, vec(2, f32), "read")
    else:
        k_scale = kb.binding("k_scale", f32, "read")
        v_scale = kb.binding("v_scale", f32, "read")
    int8 = cfg.bits is Bits.INT8
    word = i32 if int8 else u32
    if width == 4:
        # Four elements: four i32 words, or two words of packed int4.
        word = vec(4, i32) if int8 else vec(2, u32)
    present_key = kb.binding("present_key", word, "read_write")
    present_value = kb.binding("present_value", word, "read_write")
    c = declare_consts(kb, cfg, cfg.packed)
    qmax = kb.const("QMAX", f32, float(cfg.qmax))
    qmin = kb.const("QMIN", f32, float(cfg.qmin))

    if append:
        names = ("count", "seq", "pastSeq", "totalSeq", "perChannel")
        count, seq, past, total_seq, per_channel = declare_params(kb, *names)
    else:
        count, seq, past, per_channel = declare_params(kb, "count", "seq", "pastSeq", "perChannel")
        total_seq = None
    row_position = append and cfg.rotary_position is RotaryPosition.ROW
    per_channel = per_channel.ne(0)
    if program and cfg.k_norm and cfg.rotary and row_position:
        # K RMSNorm loads cos/sin at the window's row before its barrier, skipped tokens too;
        # an empty cache has no row (and no table): every invocation leaves, uniformly.
        kb.comment("An empty cache (totalSeq = 0) holds no row to write or rotate at.")
        with kb.if_(total_seq.eq(0)):
            kb.ret()
    if program:
        # One vector per invocation, or on the pair walk vectors d and d + HALF_V4 (names
        # suffixed 0 and 1): the same program per vector.
        pairs = plan.uses_pairs
        fr = flat_row(kb, cfg, c, inputs, width, pairs=pairs)
        norm = fr.k_own is not None
        dst_row, rows_per_head, skipped = _destination(
            kb, inputs, fr.b, fr.t, append, total_seq, seq, "dstRow", defer=norm
        )
        kl = flat_k_loads(kb, fr, inputs, lambda: _position(kb, row_position, dst_row, past, fr.t))
        d = fr.it.d
        owned = (("0", d), ("1", d + fr.pair)) if pairs else (("", d),)
        vs_in = [kb.let(f"v{t}", words.as_f32(kb, inputs.src_v[fr.src_base + o])) for t, o in owned]
        dst_at = fr.win.bnsh(fr.b, fr.hk, dst_row, c.heads, rows_per_head, fr.per_row)
        dst = kb.let("dst", dst_at + d)
        ats, step = [], None
        for t, o in owned:
            ats.append(scale_index(kb, f"s{t}", fr.hk, o, c.head_dim, width, per_channel, step))
            step = ats[0].step
        if packed:
            both = [
                kv_scales(kb, f"ks{t}", f"vs{t}", k_scale, at) for (t, _), at in zip(owned, ats)
            ]
            ks, vs = [k for k, _ in both], [v for _, v in both]
        else:
            ks = [scales(kb, f"ks{t}", k_scale, at) for (t, _), at in zip(owned, ats)]
            vs = [scales(kb, f"vs{t}", v_scale, at) for (t, _), at in zip(owned, ats)]
        # With K RMSNorm every load above precedes the norm's barrier.
        inv_rms = flat_norm(kb, cfg, c, fr, skipped) if norm else None
        k = flat_k_pair(kb, fr, kl, inv_rms) if pairs else (flat_k(kb, fr, kl, inv_rms),)
        dsts = (dst, dst + fr.pair) if pairs else (dst,)
        for (t, _), at, k_i, v_i, ks_i, vs_i in zip(owned, dsts, k, vs_in, ks, vs):
            qk = kb.let(f"qk{t}", quantize(k_i, ks_i, qmin, qmax))
            qv = kb.let(f"qv{t}", quantize(v_i, vs_i, qmin, qmax))
            if int8:
                present_key[at] = qk
                present_value[at] = qv
            else:
                present_key[at] = pack_int4x4(kb, f"nk{t}", qk)
                present_value[at] = pack_int4x4(kb, f"nv{t}", qv)
        items = fr.pair if pairs else fr.per_row
        dispatch = plan.dispatch(count, items)
        kernel = kb.build(dispatch, _doc(cfg, append))
        return _contract(kernel, cfg, kb, append, count, seq, past, total_seq, row_position)
    if packed:
        kvscale = kv_scale_function(kb, "kvscale", k_scale, c.head_dim, per_channel)

        def scale_pair(d: Val, name: str) -> tuple[Val, Val]:
            s = kb.let(name, kb.fn_call(kvscale, d, row.hk))
            return s.x, s.y

    else:
        kscale = scale_function(kb, "kscale", k_scale, c.head_dim, per_channel)
        vscale = scale_function(kb, "vscale", v_scale, c.head_dim, per_channel)

        def scale_pair(d: Val, name: str) -> tuple[Val, Val]:
            return kb.fn_call(kscale, d, row.hk), kb.fn_call(vscale, d, row.hk)

    row = row_walk(kb, cfg.fold, c)
    dst_row, rows_per_head, _ = _destination(
        kb, inputs, row.b, row.t, append, total_seq, seq, "row"
    )

    def position():
        return _position(kb, row_position, dst_row, past, row.t)

    k = k_row(kb, c, inputs, row.src_base, position)
    dst_base = kb.let("dstBase", bnsh(row.b, row.hk, dst_row, c.heads, rows_per_head, c.packed))

    def v_at(d):
        return convert(f32, inputs.src_v[row.src_base + d])

    if int8:
        with walks.row_elements(kb, c.head_dim) as d:
            ks, vs = scale_pair(d, "s")
            present_key[dst_base + d] = quantize(k[d], ks, qmin, qmax)
            present_value[dst_base + d] = quantize(v_at(d), vs, qmin, qmax)
    else:
        with walks.row_elements(kb, c.packed, "dd") as dd:
            d0 = kb.let("d0", dd * 2)
            d1 = kb.let("d1", dd * 2 + 1)
            (ks0, vs0), (ks1, vs1) = scale_pair(d0, "s0"), scale_pair(d1, "s1")
            qk0 = kb.let("qk0", quantize(k[d0], ks0, qmin, qmax))
            qk1 = kb.let("qk1", quantize(k[d1], ks1, qmin, qmax))
            qv0 = kb.let("qv0", quantize(v_at(d0), vs0, qmin, qmax))
            qv1 = kb.let("qv1", quantize(v_at(d1), vs1, qmin, qmax))
            present_key[dst_base + dd] = pack_int4(qk0, qk1)
            present_value[dst_base + dd] = pack_int4(qv0, qv1)
    kernel = kb.build(Dispatch(count.node, cfg.workgroup_size, cfg.fold), _doc(cfg, append))
    return _contract(kernel, cfg, kb, append, count, seq, past, total_seq, row_position)


def _doc(cfg: QuantConfig, append: bool) -> str:
    kind = "INT8" if cfg.bits is Bits.INT8 else "packed INT4"
    if append:
        return (
            f"Quantize new BSH K/V into an existing buffer-sharing {kind} BNSH cache. The\n"
            "active sequence end comes from seqlens_k; the physical cache stride remains\n"
            "the full present-cache capacity (totalSeq)."
        )
    return f"Quantize new BSH K/V into a {kind} BNSH cache."


def _contract(
    kernel: Kernel,
    cfg: QuantConfig,
    kb: KernelBuilder,
    append: bool,
    count: Val,
    seq: Val,
    past: Val,
    total_seq: Val | None,
    row_position: bool,
) -> Kernel:
    packed = cfg.packed
    win = cache_window(kb, cfg.window)
    if append and cfg.window:
        present = times(ceil_div(count, seq), total_seq, packed)
        positions = total_seq if row_position else plus(past, seq)
    elif append:
        present = times(ceil_div(count, cfg.kv_heads * seq), cfg.kv_heads, total_seq, packed)
        positions = total_seq if row_position else plus(past, seq)
    else:
        present, positions = times(count, packed), plus(past, seq)
    # Per-channel scales hold one value per (kv head, d); a per-tensor scale one value.
    on = Binary(Op.NE, node(kb.param("perChannel")), Lit(0, u32))
    scales = Call(Op.SELECT, (Lit(1, u32), Lit(cfg.kv_heads * cfg.head_dim, u32), on))
    extents = row_extents(cfg, count, seq, positions, win)
    if cfg.bindings is Bindings.PACKED:
        # Stated in f32 values (two per entry), as the other vector bindings' are.
        extents |= {KV_SCALE: times(scales, 2)}
        if cfg.rotary:
            table = [extents.pop(name) for name in ROTARY_TABLES][0]
            extents[ROTARY_TABLE] = times(table, 2)
    else:
        extents |= {"k_scale": scales, "v_scale": scales}
    if append:
        extents["seqlens_k"] = seqlens_extent(count, cfg.kv_heads, seq, win)
    extents |= {"present_key": present, "present_value": present}
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return walks.vector_extents(with_contract(kernel, extents, {"seq >= 1": seq >= 1}))


def _destination(
    kb: KernelBuilder,
    inputs: RowInputs,
    b: Val,
    t: Val,
    append: bool,
    total_seq: Val,
    seq: Val,
    name: str,
    defer: bool = False,
) -> tuple[Val, Val, Val | None]:
    """The cache row new token ``t`` lands in, the cache's rows per head, and (``defer``) whether
    the token is skipped.

    ``append_quant`` writes the clamped append window of ``seqlens_k``: tokens that do not fit
    return, or with ``defer`` (a kernel whose barrier is still ahead) get the window's first row,
    so their loads stay in range, and the returned condition for the return after the barrier.
    ``build_quant`` writes row ``t`` of a ``seq``-row cache.
    """
    if not append:
        return t, seq, None
    w = append_window(kb, inputs.seqlens_k, b, total_seq, seq)
    kb.comment("Only the newest min(seq, totalSeq) tokens fit the cache.")
    if defer:
        skipped = kb.let("skipped", t < w.skip)
        return kb.let(name, w.append_start + (t - min_(t, w.skip))), total_seq, skipped
    kb.leave_if(t < w.skip)
    # t >= skip here, so the row index does not wrap.
    return kb.let(name, w.append_start + (t - w.skip)), total_seq, None


def _position(kb: KernelBuilder, row_position: bool, dst_row: Val, past: Val, t: Val) -> Val:
    """The rotary position of new token ``t``: its cache row, or ``pastSeq + t``."""
    if row_position:
        kb.comment("In the shared cache the row is the token's absolute position.")
        return dst_row
    return kb.let("pos", past + t)
