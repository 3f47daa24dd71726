"""Verification cases for the ``qkv`` mode.

Batches of 2-3 with ``seqlens_k`` of every adversarial kind (a right-padded first prompt, an
append in the middle, a cache filled exactly, more tokens than the capacity), token counts of 1
(decode), a few and a whole cache; random non-zero inputs, norm weights, biases and angles. Q and
the caches start poisoned; the cache rows outside the step's window must keep the poison. With a
norm or rotary, Q and K carry the float tolerance of the other modes (the kernel's sum of
squares runs in another order than numpy's, and a GPU may contract ``x0 * cs - x1 * sn`` into an
``fma``); V is bit for bit.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kvdsl import reference
from kvdsl.harness.cases import Case, case_generator, dtype, flat
from kvdsl.harness.dense import CACHE, DenseCase, written_cache
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.ir import Kernel
from kvdsl.kernels.build import build
from kvdsl.kernels.dense import dense_append
from kvdsl.kernels.merge_share import merge_share
from kvdsl.kernels.qkv import chain
from kvdsl.kernels.qkv_config import Chain, QkvConfig
from kvdsl.kernels.transpose import transpose
from kvdsl.reference.judge import poison, values
from kvdsl.reference.qkv import Transforms

#: Relative tolerance of Q and K where they are normed or rotated, by output type.
TOLERANCE = {"f32": 2e-5, "f16": 2e-3}


def inputs(cfg: QkvConfig, rng: np.random.Generator, batch: int, key_seq: int, cap: int, i: int):
    """The random inputs of a case: the bindings (unflattened) and the transforms the
    reference's projection applies."""
    d = cfg.head_dim
    x = values(rng, (batch, key_seq, cfg.heads * d), dtype(cfg.input_type.value))
    seqlens = adversarial_seqlens(rng, batch, key_seq, cap, i)
    bufs: dict[str, np.ndarray] = {"qkv": x, "seqlens_k": seqlens}
    args: dict = {}
    weights = []
    for kind, on in (("q_norm", cfg.q_norm), ("k_norm", cfg.k_norm)):
        if on:
            w = rng.uniform(0.5, 1.5, d).astype(np.float32)
            args[kind] = reference.KNorm(w, cfg.eps)
            weights.append(w)
    if weights:
        bufs["qk_norm_weight"] = np.concatenate(weights)
    if cfg.rotary:
        theta = rng.uniform(0, 2 * np.pi, (cap, cfg.half))
        cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
        args["rotary"] = reference.Rotary(cos, sin, cfg.half)
        bufs["rotary_table"] = args["rotary"].table(cfg.half)
    if cfg.bias:
        args["bias"] = values(rng, cfg.heads * d, np.float32)
        bufs["qkv_bias"] = args["bias"]
    return bufs, Transforms(**args)


@case_generator("qkv")
def qkv_case(cfg: QkvConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 2 + i % 2
    cap, key_seq = [(20, 1), (9, 4), (12, 12)][i % 3]
    bufs, transforms = inputs(cfg, rng, batch, key_seq, cap, i)
    qt, ct = dtype(cfg.q_type.value), dtype(cfg.present_type.value)
    fmt = None if cfg.format is None else cfg.fmt
    q, w = reference.qkv(
        bufs["qkv"], bufs["seqlens_k"], cap, cfg.q_heads, cfg.kv_heads, transforms,
        q_layout=cfg.q_layout.value, q_dtype=qt, cache_dtype=ct, fmt=fmt, inline=cfg.inline,
        rotation=cfg.rotation,
    )  # fmt: skip
    shape = {"batch": batch, "seq": cap, "keySeq": key_seq}
    if cfg.rotary:
        shape["positions"] = cap
    params = {"count": batch * key_seq * cfg.rows, "keySeq": key_seq, "seq": cap}
    q_tol = {"q_out": TOLERANCE[cfg.q_type.value]} if cfg.q_norm or cfg.rotary else {}
    bufs["q_out"] = poison(q.size, qt)
    if fmt is not None:
        return _dense_case(cfg, bufs, shape, params, q, w, q_tol)
    bufs |= {"present_key": poison(w.key.size, ct), "present_value": poison(w.key.size, ct)}
    tol = q_tol
    if cfg.k_norm or cfg.rotary:
        tol = tol | {"present_key": TOLERANCE[cfg.present_type.value]}
    return Case(
        shape,
        flat(bufs),
        params,
        flat({"q_out": q, "present_key": w.key, "present_value": w.value}),
        flat({"present_key": w.mask, "present_value": w.mask}),
        tol,
    )


def _dense_case(cfg: QkvConfig, bufs: dict, shape: dict, params: dict, q, w, q_tol) -> Case:
    """A case of a dense cache: its words compared as :class:`kvdsl.harness.dense.DenseCase`
    does (bit for bit, but K's codes with K RMSNorm, whose sum runs in another order than
    numpy's, and every code against a GPU: one step in a few elements)."""
    cache, written = written_cache(w, cfg.inline, bufs)
    expected = {"q_out": q} | cache
    bits = cfg.fmt.bits
    case = DenseCase(
        shape,
        flat(bufs),
        params,
        flat(expected),
        flat(written),
        dict(q_tol),
        codes={name: bits for name in CACHE},
        layout={name: (cfg.fmt, cfg.head_dim, cfg.inline) for name in CACHE},
    )
    if cfg.k_norm:
        case.quantized = {"present_key": bits}
    if not cfg.inline:
        case.tolerance["present_scales"] = 1e-5 if cfg.k_norm else 1e-6
    return case


#: A backend: ``run(kernel, buffers, params)`` → the read_write bindings' contents.
Runner = Callable[[Kernel, dict[str, np.ndarray], dict[str, int]], dict[str, np.ndarray]]


def split_rows(
    cfg: QkvConfig, ch: Chain, buffers: dict[str, np.ndarray], batch: int, s: int, run: Runner
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """The unfused chain's first step and what its ``build`` steps bind: the projection split
    into rows ``[B, heads, keySeq, D]`` by ``transpose`` (the bias then added in f32, as the
    kernel does), the rotary table as ``cos_cache`` and ``sin_cache``, and the norm weights
    ``[n, D]`` (Q's, then K's)."""
    d, heads = cfg.head_dim, cfg.heads
    x = buffers["qkv"]
    rows = np.zeros(batch * heads * s * d, np.float32)
    out = run(transpose(ch.split), {"key": x, "value": x, "present_key": rows,
              "present_value": rows.copy()}, {"batchSize": batch, "kvSeq": s})  # fmt: skip
    xt = out["present_key"].reshape(batch, heads, s, d)
    if cfg.bias:
        xt = xt + buffers["qkv_bias"].reshape(1, heads, 1, d)
    tables: dict[str, np.ndarray] = {}
    if cfg.rotary:
        table = buffers["rotary_table"].reshape(-1, 2 * cfg.half)
        tables = {
            "cos_cache": table[:, : cfg.half].copy(),
            "sin_cache": table[:, cfg.half :].copy(),
        }
    weights = buffers.get("qk_norm_weight", np.zeros(0, np.float32)).reshape(-1, d)
    return xt, tables, weights


def unfused(
    cfg: QkvConfig, buffers: dict[str, np.ndarray], params: dict[str, int], run: Runner
) -> dict[str, np.ndarray]:
    """``q_out``, ``present_key`` and ``present_value`` of a ``qkv`` case (its flat
    ``buffers``, outputs as poisoned as the fused kernel's, and ``params``) computed by the
    unfused chain of kvdsl's own kernels (:func:`kvdsl.kernels.qkv.chain`) through ``run``:
    the split over every batch, then per batch the Q ``build``, the K ``build`` (K RMSNorm) and
    the ``merge_share`` append (with a format, ``dense_append``) into that batch's heads of
    the cache (and ``present_scales``). The host moves rows
    between the kernels (numpy views and copies only) and adds the bias in f32, as the kernel
    does."""
    ch = chain(cfg)
    s, cap, d = params["keySeq"], params["seq"], cfg.head_dim
    hq, hkv = cfg.q_heads, cfg.kv_heads
    batch = params["count"] // (s * cfg.rows)
    xt, tables, weights = split_rows(cfg, ch, buffers, batch, s, run)
    wq = weights[0] if cfg.q_norm else None
    wk = weights[-1] if cfg.k_norm else None
    seqlens = buffers["seqlens_k"]
    start, _ = reference.share_window(seqlens, s, cap)
    qt = buffers["q_out"].dtype
    q = np.empty((batch, hq, s, d), qt)
    cache_k = buffers["present_key"].reshape(batch, -1).copy()
    cache_v = buffers["present_value"].reshape(batch, -1).copy()
    scales = None
    if "present_scales" in buffers:
        scales = buffers["present_scales"].reshape(batch, -1).copy()
    for b in range(batch):
        qb = np.ascontiguousarray(xt[b, :hq]).reshape(-1)
        bufs = {"src_k": qb, "src_v": qb, "present_key": poison(qb.size, qt)}
        bufs["present_value"] = poison(qb.size, qt)
        if wq is not None:
            bufs["k_norm_weight"] = wq
        if cfg.rotary:
            bufs |= tables
        got = run(build(ch.q), bufs, {"count": hq * s, "seq": s, "pastSeq": int(start[b])})
        q[b] = got["present_key"].reshape(hq, s, d)
        kb = np.ascontiguousarray(xt[b, hq : hq + hkv]).reshape(-1)
        vb = np.ascontiguousarray(xt[b, hq + hkv :]).reshape(-1)
        if ch.k is not None:
            bufs = {"src_k": kb, "src_v": vb, "k_norm_weight": wk}
            bufs |= {"present_key": poison(kb.size, np.float32)}
            bufs |= {"present_value": poison(kb.size, np.float32)}
            got = run(build(ch.k), bufs, {"count": hkv * s, "seq": s, "pastSeq": 0})
            kb, vb = got["present_key"], got["present_value"]
        bufs = tables | {"seqlens_k": np.full(hkv, seqlens[b], np.int32)}
        bufs |= {"present_key": cache_k[b], "present_value": cache_v[b]}
        params_ = {"count": hkv * s, "seq": cap, "keySeq": s}
        if cfg.format is None:
            got = run(merge_share(ch.append), bufs | {"new_k": kb, "new_v": vb}, params_)
        else:
            bufs |= {"src_k": kb, "src_v": vb}
            if wk is not None:
                bufs["k_norm_weight"] = wk
            if scales is not None:
                bufs["present_scales"] = scales[b]
            got = run(dense_append(ch.append), bufs, params_)
            if scales is not None:
                scales[b] = got["present_scales"]
        cache_k[b], cache_v[b] = got["present_key"], got["present_value"]
    if cfg.q_layout.value == "bsh":
        q = q.transpose(0, 2, 1, 3)
    out = {
        "q_out": np.ascontiguousarray(q).reshape(-1),
        "present_key": cache_k.reshape(-1),
        "present_value": cache_v.reshape(-1),
    }
    return out | ({} if scales is None else {"present_scales": scales.reshape(-1)})
