"""What every ``qkv`` kernel declares and asks, whatever its walk and cache: the bindings in
order (:func:`bindings`), the consts and params (:class:`Frame`), the cache a token's K and V
rows land in (:class:`Target`, the buffer-sharing one; :class:`kvdsl.kernels.qkv_paged.PagedTarget`
for pages) with each token's :class:`Place`, which rows are RMS-normed (:func:`normed_rows`), and
the contract (:func:`qkv_contract`). The kernels over it: :mod:`kvdsl.kernels.qkv` (f32 and f16
rows) and :mod:`kvdsl.kernels.qkv_dense` (a dense format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kvdsl.ir import Buffer, Kernel, KernelBuilder, Val, f32, i32, lit, select, u32, with_contract
from kvdsl.kernels.config import MAX_STORAGE_BUFFERS, PRESENT, ROTARY_TABLE, RowLayout
from kvdsl.kernels.extents import times
from kvdsl.kernels.qkv_config import QkvConfig
from kvdsl.nodes import walks, words
from kvdsl.nodes.quantise import Quantiser, cache_binding
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
