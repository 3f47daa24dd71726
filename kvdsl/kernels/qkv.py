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
:class:`kvdsl.kernels.config.RowLayout`), with what it means beside the kernel (its chain, its
bytes). The bindings, consts and params every ``qkv`` kernel declares are
:mod:`kvdsl.kernels.qkv_frame`'s; where a row lands and at which position it rotates is its
:class:`~kvdsl.kernels.qkv_frame.Target`'s :class:`~kvdsl.kernels.qkv_frame.Place`: the one
place a paged layout (a page table or a slot mapping: :mod:`kvdsl.kernels.qkv_paged`) changes.
This module builds the f32 and f16 walk and hands a dense ``format`` to
:mod:`kvdsl.kernels.qkv_dense`; it is the one that knows every cache target.

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

from typing import Any

from kvdsl.ir import Kernel, KernelBuilder, select
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import Walk, builds
from kvdsl.kernels.dense import DenseAppendConfig
from kvdsl.kernels.extents import ceil_div, times
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.qkv_config import Chain, QkvConfig, bytes_moved, chain_start, describe
from kvdsl.kernels.qkv_dense import qkv_dense
from kvdsl.kernels.qkv_frame import Frame, Target, normed_rows, qkv_contract
from kvdsl.kernels.qkv_paged import PagedQkvConfig, PagedTarget
from kvdsl.nodes import walks, words
from kvdsl.nodes.rmsnorm import Norm, reduced_inverse_rms
from kvdsl.nodes.rotary import rotated_pair


def target(cfg: QkvConfig) -> Target:
    """The cache a ``qkv`` config appends into."""
    if cfg.mode == "paged_qkv":
        return PagedTarget(cfg)
    return Target(cfg)


@builds(QkvConfig, PagedQkvConfig)
def qkv(cfg: QkvConfig, name: str = "qkv") -> Kernel:
    """Build the ``qkv`` kernel for ``cfg``."""
    if cfg.format is not None:
        return qkv_dense(cfg, name, target(cfg))
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


def contract_fields(cfg: Any) -> dict[str, Any]:
    """The fields a ``qkv`` variant's ``index.json`` entry adds: ``bytes_moved``
    (:func:`bytes_moved`); nothing for other modes' configs."""
    if not isinstance(cfg, QkvConfig) or cfg.mode != "qkv":
        return {}
    return {"bytes_moved": bytes_moved(cfg)}


def chain(cfg: QkvConfig) -> Chain:
    """The configs of ``cfg``'s unfused chain (:class:`Chain`)."""
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
