"""``qkv``: one dispatch from a layer's packed QKV projection to the attention inputs.

The input ``qkv`` is the projection's output, ``[tokens, (Hq + 2 Hkv) * D]``: per token the
``Hq`` query heads, then the ``Hkv`` key heads, then the ``Hkv`` value heads, each a row of
``D`` elements (f32, or f16 carried in u32 words). ``tokens = batch * keySeq``. The kernel

- adds the QKV bias (``qkv_bias``, ``(Hq + 2 Hkv) * D`` f32; Qwen2's) with ``bias``;
- RMS-normalises each Q row (``q_norm``) and each K row (``k_norm``) with per-channel weights
  (``qk_norm_weight``: Q's ``D`` weights, then K's ``D``, each where its norm is on), ``x *
  inverseSqrt(mean(x²) + eps) * w``;
- rotates Q and K NeoX-wise (``rotary``; the first ``2 * rotary_half`` elements, or the whole
  head) at the token's position, read from the packed ``rotary_table`` (per position ``half`` cos
  values, then ``half`` sin values);
- with a dense ``format`` and ``rotation``, rotates K by the signed Walsh-Hadamard matrix over
  blocks of ``rotation`` dimensions before it is quantised (:mod:`kvdsl.reference.rotation`;
  Q and V as they are: :mod:`kvdsl.kernels.qkv_dense`);
- writes Q to ``q_out`` (BNSH ``[B, Hq, keySeq, D]`` or BSH ``[B, keySeq, Hq * D]``, f32 or f16),
  and appends K and V into a buffer-sharing BNSH cache of ``seq`` rows per head
  (``present_key``, ``present_value``: f32 or f16 rows, or with ``format`` a dense format's
  words and, with ``scales="side"``, ``present_scales``: :mod:`kvdsl.kernels.qkv_dense`) at
  the ``merge_share`` window:
  batch ``b``'s token ``t`` lands at row ``appendStart + t``
  (:func:`kvdsl.nodes.window.append_window`), which is also its rotary position.

The config is :mod:`kvdsl.kernels.qkv_config`'s (:class:`QkvConfig`; Q's layout a
:class:`kvdsl.kernels.config.RowLayout`). Where a row lands and at which position it rotates is
its :class:`Target`'s :class:`Place`: the one place a paged layout (a page table or a slot
mapping: :mod:`kvdsl.kernels.qkv_paged`) changes.

The walk is flat over pairs of vectors: ``count = batch * keySeq * (Hq + 2 Hkv)`` rows of
``PAIRS = D / 8`` items, item ``i`` of a row holding vectors ``lo`` and ``hi``: the rotary pair
``(i, i + HALF_V4)`` for ``i < HALF_V4`` and, past the rotated part of a partial rotary, the
adjacent vectors ``(2i, 2i + 1)``; without rotary or over the whole head, ``(i, i + PAIRS)``.
Each input element is loaded once, each output element stored once. With a norm the row's sum
of squares is reduced in workgroup memory (:func:`kvdsl.nodes.rmsnorm.row_sum_of_squares`, the
pair walk's partials ``dot(x0, x0) + dot(x1, x1)``, the ``build`` kernel's order), every row
taking part so that the barrier stays uniform; V rows and rows of a head without a norm keep
their values through a ``select``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, f32, i32, lit, select, u32, with_contract
from kvdsl.kernels.config import MAX_STORAGE_BUFFERS, PRESENT, ROTARY_TABLE, Element, Model
from kvdsl.kernels.extents import ceil_div, times
from kvdsl.kernels.config import RowLayout
from kvdsl.kernels.dense import DenseFormat, ScalePlace
from kvdsl.kernels.qkv_config import QkvConfig
from kvdsl.nodes import walks, words
from kvdsl.nodes.quantise import Quantiser, cache_binding
from kvdsl.nodes.rmsnorm import Norm, reduced_inverse_rms
from kvdsl.nodes.rotary import rotated_pair
from kvdsl.nodes.window import append_window


@dataclass(frozen=True)
class Place:
    """Where a token's K and V rows land and the position Q and K rotate at: ``position``;
    ``base(head, value)``, the first unit (``vec4``, or a dense row's u32 word) of KV head
    ``head``'s row of K (or of V) in its binding; ``side(head)``, the first f32 of its side
    scales (None inline); ``skip``, true where the token has no place (None: every token has
    one)."""

    position: Val
    base: Callable[[Val, bool], Val]
    side: Callable[[Val], Val] | None = None
    skip: Val | None = None


class Target:
    """A ``qkv`` kernel's cache: the buffer-sharing one of ``seq`` rows per head (this class),
    or pages (:class:`kvdsl.kernels.qkv_paged.PagedTarget`). It declares the bindings the
    cache adds (``inputs`` after ``qkv``, the caches after ``q_out``) and its params, and gives
    each token its :class:`Place`: the one place a layout changes."""

    def __init__(self, cfg: QkvConfig) -> None:
        self.cfg = cfg

    def inputs(self, kb: KernelBuilder) -> None:
        self.seqlens = kb.binding("seqlens_k", i32, "read")

    def caches(self, kb: KernelBuilder, q: Quantiser | None) -> tuple[Buffer, Buffer, Any]:
        """K's and V's bindings (the quantiser's words with a format) and the side scales'."""
        if q is None:
            k, v = words.bindings(kb, PRESENT, self.cfg.present_type.scalar, 4, "read_write")
            return k, v, None
        side = None if self.cfg.inline else kb.binding("present_scales", f32, "read_write")
        k, v = (cache_binding(kb, q, n) for n in PRESENT)
        return k, v, side

    def params(self, kb: KernelBuilder) -> None:
        self.seq = kb.param("seq")

    def place(self, kb: KernelBuilder, b: Val, t: Val, token: Val, key_seq: Val) -> Place:
        """The buffer-sharing cache's rule: batch ``b``'s new token ``t`` at row ``appendStart
        + t`` of the ``merge_share`` window, which is its absolute position too."""
        cfg, seq = self.cfg, self.seq
        win = append_window(kb, self.seqlens, b, seq, key_seq)
        kb.comment("The token's cache row, and its rotary position in a buffer-sharing cache.")
        row = kb.let("dstT", win.append_start + t)
        per_row = walks.named(kb, "HEAD_DIM_V4" if cfg.fmt is None else "ROW_WORDS", 1)
        kv_heads = walks.named(kb, "KV_HEADS", 1)
        rows: dict[int, Val] = {}

        def at(head: Val) -> Val:
            key = id(head)
            if key not in rows:
                rows[key] = kb.let("dstRow", (b * kv_heads + head) * seq + row)
            return rows[key]

        def base(head: Val, value: bool = False) -> Val:
            return at(head) * per_row

        def side(head: Val) -> Val:
            return at(head) * (2 * cfg.fmt.stats)

        return Place(row, base, side if cfg.fmt is not None and not cfg.inline else None)

    def extents(self, batch: Any, key_seq: Val) -> tuple[dict[str, Any], dict[str, Any]]:
        """The bindings' least sizes this target adds (the caches, its inputs, the rotary
        table's positions) and its requirements."""
        cfg, seq = self.cfg, self.seq
        width = cfg.hidden if cfg.fmt is None else cfg.kv_heads * cfg.row_words
        out: dict[str, Any] = {"seqlens_k": batch}
        out |= {name: times(batch, seq, width) for name in PRESENT}
        if cfg.fmt is not None and not cfg.inline:
            out["present_scales"] = times(batch, seq, cfg.kv_heads * 2 * cfg.fmt.stats)
        if cfg.rotary:
            out[ROTARY_TABLE] = times(seq, 2 * cfg.half)
        return out, {"keySeq >= 1": key_seq >= 1, "keySeq <= seq": key_seq <= seq}


def target(cfg: QkvConfig) -> Target:
    """The cache a ``qkv`` config appends into."""
    if cfg.mode == "paged_qkv":
        from kvdsl.kernels.qkv_paged import PagedTarget  # (which imports this module)

        return PagedTarget(cfg)
    return Target(cfg)


class Frame:
    """What both ``qkv`` walks declare before their walk, in order: the bindings (:func:`bindings`,
    None where the config has none); the consts ``HEAD_DIM``, ``HEAD_DIM_V4``, ``ROW_WORDS`` (a
    dense format's), ``Q_HEADS``, ``KV_HEADS``, ``HEADS``, the walk's (``walk``: name → value,
    in order), ``HALF_V4`` (rotary) and ``QK_EPS`` (a norm); the params ``count``, ``keySeq`` and
    the cache's."""

    def __init__(
        self, kb: KernelBuilder, cfg: QkvConfig, cache: Target, q: Quantiser | None, walk: dict
    ) -> None:
        self.cfg, self.kb = cfg, kb
        bound = bindings(kb, cfg, cache, q)
        self.src, self.weight, self.table, self.bias, self.q_out = bound[:5]
        self.present_key, self.present_value, self.side = bound[5:]
        self.head_dim = kb.const("HEAD_DIM", u32, cfg.head_dim)
        self.per_row = kb.const("HEAD_DIM_V4", u32, cfg.head_dim // 4)
        if cfg.fmt is not None:
            kb.const("ROW_WORDS", u32, cfg.row_words)
        self.q_heads = kb.const("Q_HEADS", u32, cfg.q_heads)
        self.kv_heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
        self.heads = kb.const("HEADS", u32, cfg.heads)
        self.walk = {n: kb.const(n, u32, value) for n, value in walk.items()}
        self.half = kb.const("HALF_V4", u32, cfg.half // 4) if cfg.rotary else None
        self.eps = kb.const("QK_EPS", f32, float(cfg.eps)) if cfg.norm else None
        self.count, self.key_seq = kb.param("count"), kb.param("keySeq")
        cache.params(kb)

    def row(self, row: Val, per_token: Val, name: str) -> tuple[Val, ...]:
        """Walk row ``row``'s index among its token's ``per_token`` rows (named ``name``), the
        token, and the token's ``t`` and batch ``b``."""
        kb = self.kb
        r = kb.let(name, row % per_token)
        token = kb.let("token", row / per_token)
        return r, token, kb.let("t", token % self.key_seq), kb.let("b", token / self.key_seq)

    def q_base(self, b: Val, r: Val, t: Val, token: Val) -> Val:
        """The first vector of Q head ``r``'s row of token ``t`` of batch ``b`` (``token``) in
        ``q_out``, BNSH or BSH."""
        if self.cfg.q_layout is RowLayout.BNSH:
            return self.kb.let("qBase", ((b * self.q_heads + r) * self.key_seq + t) * self.per_row)
        return self.kb.let("qBase", (token * self.q_heads + r) * self.per_row)

    def weight_base(self, is_q: Val) -> Val:
        """The first vector of a row's norm weights: K's follow Q's where both are normed."""
        if self.cfg.q_norm and self.cfg.k_norm:
            return self.kb.let("wBase", select(self.per_row, as_u32(0), is_q))
        return as_u32(0)


def qkv(cfg: QkvConfig, name: str = "qkv") -> Kernel:
    """Build the ``qkv`` kernel for ``cfg``."""
    if cfg.format is not None:
        from kvdsl.kernels.qkv_dense import qkv_dense  # (which imports this module)

        return qkv_dense(cfg, name)
    kb = KernelBuilder(name, cfg.workgroup_size)
    cache = target(cfg)
    f = Frame(kb, cfg, cache, None, {"PAIRS": cfg.pairs})
    pairs = f.walk["PAIRS"]
    it = walks.pairs(kb, cfg.fold, f.count, pairs, guard=not cfg.norm)
    i = it.d
    kb.comment("Row = token * HEADS + head: Q heads, then K heads, then V heads.")
    j, token, t, b = f.row(it.row, f.heads, "head")
    is_q = kb.let("isQ", j < f.q_heads)
    is_v = kb.let("isV", j >= f.q_heads + f.kv_heads)
    dst = cache.place(kb, b, t, token, f.key_seq)
    if cfg.partial:
        kb.comment(
            "A rotated pair (i, i + HALF_V4), or past the rotated part two adjacent vectors."
        )
        turned = kb.let("turned", i < f.half)
        lo = kb.let("lo", select(i * 2, i, turned))
        hi = kb.let("hi", select(i * 2 + 1, i + f.half, turned))
    else:
        lo, hi = i, kb.let("hi", i + (f.half if f.half is not None else pairs))
        turned = None
    row_base = kb.let("rowBase", it.row * f.per_row)
    x0 = kb.let("x0Raw", words.as_f32(kb, f.src[row_base + lo]))
    x1 = kb.let("x1Raw", words.as_f32(kb, f.src[row_base + hi]))
    if f.bias is not None:
        bias_base = kb.let("biasBase", j * f.per_row)
        x0 = kb.let("x0Bias", x0 + f.bias[bias_base + lo])
        x1 = kb.let("x1Bias", x1 + f.bias[bias_base + hi])
    w0 = w1 = normed = None
    if f.weight is not None:
        w_base = f.weight_base(is_q)
        w0 = kb.let("w0", f.weight[w_base + lo])
        w1 = kb.let("w1", f.weight[w_base + hi])
        normed = normed_rows(kb, cfg, is_q, is_v)
    cs = sn = None
    if f.table is not None:
        entry = i if turned is None else kb.let("pair", select(f.half - 1, i, turned))
        at = kb.let("tableAt", dst.position * (f.half * 2) + entry)
        cs, sn = kb.let("cs", f.table[at]), kb.let("sn", f.table[at + f.half])
    if f.weight is not None:
        sums = ((x0, x1), i, pairs, cfg.workgroup_size, cfg.pairs)
        inv_rms = reduced_inverse_rms(kb, f.head_dim, f.eps, *sums, what="RMSNorm")
        kb.leave_if(it.e >= f.count * pairs)
        norm = Norm(inv_rms, lambda a: f.weight[w_base + a], normed)
        x0 = kb.let("x0", norm.scale(x0, w0))
        x1 = kb.let("x1", norm.scale(x1, w1))
    if f.table is not None:
        r0, r1 = rotated_pair(x0, x1, cs, sn)
        rotate = ~is_v if turned is None else kb.let("rotate", (~is_v).land(turned))
        x0 = kb.let("y0", select(x0, r0, rotate))
        x1 = kb.let("y1", select(x1, r1, rotate))
    q_elem = words.elem(cfg.q_type.scalar, 4)
    c_elem = words.elem(cfg.present_type.scalar, 4)
    stored = ~is_v if dst.skip is None else kb.let("stored", (~is_v).land(~dst.skip))
    with kb.if_(is_q):
        q_base = f.q_base(b, j, t, token)
        f.q_out[q_base + lo] = words.to(kb, q_elem, x0)
        f.q_out[q_base + hi] = words.to(kb, q_elem, x1)
    with kb.elif_(stored):
        k_base = kb.let("kBase", dst.base(j - f.q_heads, False))
        f.present_key[k_base + lo] = words.to(kb, c_elem, x0)
        f.present_key[k_base + hi] = words.to(kb, c_elem, x1)
    with kb.elif_(is_v if dst.skip is None else is_v.land(~dst.skip)):
        v_base = kb.let("vBase", dst.base(j - f.q_heads - f.kv_heads, True))
        f.present_value[v_base + lo] = words.to(kb, c_elem, x0)
        f.present_value[v_base + hi] = words.to(kb, c_elem, x1)

    dispatch = walks.dispatch(f.count, pairs, cfg.workgroup_size, cfg.fold, blocks=False)
    kernel = kb.build(dispatch, describe(cfg))
    batch = ceil_div(f.count, cfg.heads * f.key_seq)
    io = {
        "qkv": times(f.count, cfg.head_dim),
        "q_out": times(batch, f.key_seq, cfg.q_heads * cfg.head_dim),
    }
    return qkv_contract(kernel, cfg, cache, batch, f.key_seq, io)


def bindings(kb: KernelBuilder, cfg: QkvConfig, cache: Target, q: Quantiser | None = None):
    """The kernel's storage bindings in order: ``qkv``, the cache's inputs, the norm weights,
    the rotary table and the bias (None where the config has none), ``q_out``, then K's and
    V's caches and the side scales (``cache.caches``, with ``q`` a dense format's)."""
    src = words.binding(kb, "qkv", cfg.input_type.scalar, 4)
    cache.inputs(kb)
    weight = words.binding(kb, "qk_norm_weight", f32, 4) if cfg.norm else None
    table = words.binding(kb, ROTARY_TABLE, f32, 4) if cfg.rotary else None
    bias = words.binding(kb, "qkv_bias", f32, 4) if cfg.bias else None
    q_out = words.binding(kb, "q_out", cfg.q_type.scalar, 4, "read_write")
    present_key, present_value, side = cache.caches(kb, q)
    assert len(kb.bindings) <= MAX_STORAGE_BUFFERS
    return src, weight, table, bias, q_out, present_key, present_value, side


def qkv_contract(
    kernel: Kernel, cfg: QkvConfig, cache: Target, batch: Any, key_seq: Val, io: dict[str, Any]
) -> Kernel:
    """``kernel`` with its contract: ``io`` (the least sizes of ``qkv`` and ``q_out``), the
    norm weights', the bias' and the cache's (:meth:`Target.extents`)."""
    extents: dict[str, Any] = dict(io)
    if cfg.norm:
        extents["qk_norm_weight"] = cfg.norm_weights
    if cfg.bias:
        extents["qkv_bias"] = cfg.heads * cfg.head_dim
    more, requires = cache.extents(batch, key_seq)
    return walks.vector_extents(with_contract(kernel, extents | more, requires))


def as_u32(n: int) -> Val:
    """The u32 literal ``n``."""
    return lit(n, u32)


def normed_rows(kb: KernelBuilder, cfg: QkvConfig, is_q: Val, is_v: Val | None) -> Val | None:
    """Whether this row is RMS-normed (None: every row): a Q row with ``q_norm``, a K row
    with ``k_norm``, a V row never (``is_v`` None: the row is a Q head or a K head)."""
    if is_v is None:
        if cfg.q_norm and cfg.k_norm:
            return None
        return is_q if cfg.q_norm else kb.let("normed", ~is_q)
    if cfg.q_norm and cfg.k_norm:
        return kb.let("normed", ~is_v)
    if cfg.q_norm:
        return is_q
    return kb.let("normed", (~is_q).land(~is_v))


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


def contract_fields(cfg: Any) -> dict[str, Any]:
    """The fields a ``qkv`` variant's ``index.json`` entry adds: ``bytes_moved``
    (:func:`bytes_moved`); nothing for other modes' configs."""
    if not isinstance(cfg, QkvConfig) or cfg.mode != "qkv":
        return {}
    return {"bytes_moved": bytes_moved(cfg)}


#: The query heads of the catalog's models (their published configs' ``num_attention_heads``).
Q_HEADS = {
    "llama31_8b": 32,
    "qwen3_06b": 16,
    "gemma3_1b": 4,
    "phi3_mini": 32,
    "qwen25_05b": 14,
    "phi2": 32,
}


def catalog_variants(models: dict[str, Model]) -> dict[str, QkvConfig]:
    """Named ``qkv`` variants: each model's own transforms (Llama 3.1 8B and Phi-3 rotary;
    Qwen3 0.6B and Gemma 3 1B Q and K RMSNorm and rotary; Qwen2.5 0.5B the QKV bias and rotary),
    f32 throughout and in f16 (input, Q and cache), Q in BNSH; Llama's also with Q in BSH, and
    K/V appended without rotary; Phi-2's partial rotary; and caches in dense formats (int8 and
    q4_0 at Llama's shape, int8 at Qwen3's, q8_0 at Gemma's, int4 with side scales at
    Qwen2.5's), and int4 at Llama's with K rotated over the whole head (``rotation``); ORT's
    ``ort_q4`` at Llama's (K and V in its own rotated basis)."""
    norms = {"q_norm": True, "k_norm": True}
    own = {"llama31_8b": {}, "phi3_mini": {}, "qwen3_06b": norms, "gemma3_1b": norms}
    own["qwen25_05b"] = {"bias": True}
    f16 = {"input_type": Element.F16, "present_type": Element.F16, "q_type": Element.F16}
    v: dict[str, QkvConfig] = {}

    def add(tag: str, key: str, **fields: Any) -> None:
        shape = models[key].shape | {"q_heads": Q_HEADS[key]}
        v[f"qkv_{tag}{key}"] = QkvConfig(**shape, **fields)

    for key, extra in own.items():
        add("", key, **models[key].rotary, **extra)
        add("f16_", key, **models[key].rotary, **extra, **f16)
    add("bsh_", "llama31_8b", rotary=True, q_layout=RowLayout.BSH)
    add("norotary_", "llama31_8b")
    add("partial_", "phi2", **models["phi2"].rotary)
    for key, fmt, place in (
        ("llama31_8b", DenseFormat.INT8, ScalePlace.INLINE),
        ("llama31_8b", DenseFormat.Q4_0, ScalePlace.INLINE),
        ("qwen3_06b", DenseFormat.INT8, ScalePlace.INLINE),
        ("gemma3_1b", DenseFormat.Q8_0, ScalePlace.INLINE),
        ("qwen25_05b", DenseFormat.INT4, ScalePlace.SIDE),
    ):
        tag = fmt.value + ("_side_" if place is ScalePlace.SIDE else "_")
        add(tag, key, rotary=True, **own[key], format=fmt, scales=place)
    # int4 with K rotated over the whole head (attend_int4_rotation128_llama31_8b reads it)
    int4 = {"rotary": True, "format": DenseFormat.INT4}
    add("int4_rotation128_", "llama31_8b", **int4, rotation=models["llama31_8b"].head_dim)
    add("int4_", "llama31_8b", **int4)  # its unrotated twin
    # ONNX Runtime's 4-bit cache, K and V in its own rotated basis (attend_ort_q4_llama31_8b)
    add("ort_q4_", "llama31_8b", rotary=True, format=DenseFormat.ORT_Q4)
    return v


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
    from kvdsl.kernels.build import BuildConfig
    from kvdsl.kernels.transpose import TransposeConfig

    d, words_ = cfg.head_dim, cfg.input_type is Element.F16
    split = TransposeConfig(cfg.heads, d, vec4=True, input_type=cfg.input_type, words=words_)
    return split, BuildConfig(1, d, k_norm=cfg.q_norm, present_type=cfg.q_type, **build)


def chain(cfg: QkvConfig) -> Chain:
    """The configs of ``cfg``'s unfused chain (:class:`Chain`)."""
    from kvdsl.kernels.build import BuildConfig
    from kvdsl.kernels.config import Walk
    from kvdsl.kernels.dense import DenseAppendConfig
    from kvdsl.kernels.merge_share import MergeShareConfig

    d, flat = cfg.head_dim, Walk.FLAT
    rot = {"rotary": cfg.rotary, "rotary_half": cfg.rotary_half}
    split, q = chain_start(cfg, eps=cfg.eps, walk=flat, **rot)
    if cfg.format is not None:
        append = DenseAppendConfig(
            1, d, format=cfg.format, scales=cfg.scales, k_norm=cfg.k_norm, eps=cfg.eps,
            rotation=cfg.rotation, **rot,
        )  # fmt: skip
        return Chain(split, q, None, append)
    k = BuildConfig(1, d, k_norm=True, eps=cfg.eps, walk=flat) if cfg.k_norm else None
    append = MergeShareConfig(
        1, d, region="append", walk=flat, present_type=cfg.present_type, **rot
    )
    return Chain(split, q, k, append)
