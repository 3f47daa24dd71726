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

import numpy as np

from kvdsl import reference
from kvdsl.harness.cases import Case, case_generator, dtype, values
from kvdsl.harness.compare import poison
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.kernels.qkv import QkvConfig

#: Relative tolerance of Q and K where they are normed or rotated, by output type.
TOLERANCE = {"f32": 2e-5, "f16": 2e-3}


def inputs(cfg: QkvConfig, rng: np.random.Generator, batch: int, key_seq: int, cap: int, i: int):
    """The random inputs of a case: the bindings (unflattened) and the reference's arguments."""
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
    return bufs, args


@case_generator("qkv")
def qkv_case(cfg: QkvConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 2 + i % 2
    cap, key_seq = [(20, 1), (9, 4), (12, 12)][i % 3]
    bufs, args = inputs(cfg, rng, batch, key_seq, cap, i)
    qt, ct = dtype(cfg.q_type.value), dtype(cfg.present_type.value)
    q, w = reference.qkv(
        bufs["qkv"], bufs["seqlens_k"], cap, cfg.q_heads, cfg.kv_heads, **args,
        q_layout=cfg.q_layout.value, q_dtype=qt, cache_dtype=ct,
    )  # fmt: skip
    bufs |= {
        "q_out": poison(q.size, qt),
        "present_key": poison(w.key.size, ct),
        "present_value": poison(w.key.size, ct),
    }
    tol = {}
    if cfg.norm or cfg.rotary:
        tol = {
            "q_out": TOLERANCE[cfg.q_type.value],
            "present_key": TOLERANCE[cfg.present_type.value],
        }
    shape = {"batch": batch, "seq": cap, "keySeq": key_seq}
    if cfg.rotary:
        shape["positions"] = cap
    return Case(
        shape,
        {k: np.ascontiguousarray(a).reshape(-1) for k, a in bufs.items()},
        {"count": batch * key_seq * cfg.heads, "keySeq": key_seq, "seq": cap},
        {
            "q_out": q.reshape(-1),
            "present_key": w.key.reshape(-1),
            "present_value": w.value.reshape(-1),
        },
        {"present_key": w.mask.reshape(-1), "present_value": w.mask.reshape(-1)},
        tol,
    )
