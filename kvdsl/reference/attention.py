"""Decode attention in float64: what an attention kernel over a KV cache means.

The cache is given decoded (each format's reference decoder, each layout's reference gather):
``k`` and ``v`` ``[B, Hkv, T, D]``, of which sequence ``b`` holds ``lengths[b]`` rows, the last
``S`` of them the new tokens whose queries ``q`` ``[B, Hq, S, D]`` attend. Query head ``h`` reads
KV head ``h // (Hq // Hkv)`` (grouped-query attention; ``Hkv == 1`` is multi-query).

New token ``i`` of sequence ``b`` sits at position ``p = lengths[b] - S + i`` and sees key ``j``
when ``j <= p`` (causal inside the new tokens) and, with a sliding ``window``, ``p - j < window``.
Its logits are ``scale * q . k_j``; with ``softcap`` they become ``softcap * tanh(logit /
softcap)`` (Gemma 2), before masking. A head's ``sink`` is one more logit in the softmax's
denominator only (gpt-oss): ``o = sum_j e^(l_j - m) v_j / (e^(sink - m) + sum_j e^(l_j - m))``
with ``m`` the largest of the logits and the sink. A query that sees no key (impossible for a
causal query, whose own key is visible) has output zero.

Everything is computed in float64 from the given values, so the reference stands apart from any
kernel's float32 arithmetic and its approximate ``exp``.
"""

from __future__ import annotations

import numpy as np

F64 = np.float64


def visible(lengths: np.ndarray, queries: int, keys: int, window: int | None = None) -> np.ndarray:
    """The mask ``[B, S, T]``: new token ``i`` of sequence ``b`` sees key ``j``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    pos = lengths[:, None] - queries + np.arange(queries)[None, :]  # [B, S]
    j = np.arange(keys)[None, None, :]
    seen = j <= pos[:, :, None]
    if window is not None:
        seen &= pos[:, :, None] - j < window
    return seen


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    lengths: np.ndarray,
    *,
    scale: float | None = None,
    window: int | None = None,
    softcap: float | None = None,
    sinks: np.ndarray | None = None,
) -> np.ndarray:
    """Softmax attention of the new tokens' queries over the cache, ``[B, Hq, S, D]`` float64.

    ``q`` ``[B, Hq, S, D]``; ``k``, ``v`` ``[B, Hkv, T, D]`` with ``Hq`` a multiple of ``Hkv``;
    ``lengths`` ``[B]``, each in ``S .. T``; ``scale`` defaults to ``1 / sqrt(D)``; ``sinks``
    ``[Hq]`` one logit per query head.
    """
    q, k, v = (np.asarray(a, dtype=F64) for a in (q, k, v))
    b, hq, s, d = q.shape
    _, hkv, t, _ = k.shape
    if hq % hkv:
        raise ValueError(f"query heads {hq} are not a multiple of KV heads {hkv}")
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.shape != (b,) or np.any(lengths < s) or np.any(lengths > t):
        raise ValueError(f"lengths {lengths.tolist()} must be {b} values in {s}..{t}")
    group = hq // hkv
    held = (np.arange(t)[None, :] < lengths[:, None])[:, None, :, None]  # rows past a sequence
    k, v = np.where(held, k, 0.0), np.where(held, v, 0.0)  # are never read, whatever they hold
    qg = q.reshape(b, hkv, group * s, d)  # query head h reads KV head h // group
    logits = (qg @ k.transpose(0, 1, 3, 2)).reshape(b, hq, s, t)
    logits = logits * (1 / np.sqrt(d) if scale is None else scale)
    if softcap is not None:
        logits = softcap * np.tanh(logits / softcap)
    seen = visible(lengths, s, t, window)[:, None, :, :]  # [B, 1, S, T]
    logits = np.where(seen, logits, -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    if sinks is not None:
        sink = np.asarray(sinks, dtype=F64).reshape(1, hq, 1, 1)
        top = np.maximum(top, sink)
    top = np.where(np.isfinite(top), top, 0.0)
    weights = np.where(seen, np.exp(logits - top), 0.0)
    total = weights.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sink - top)
    out = (weights.reshape(b, hkv, group * s, t) @ v).reshape(b, hq, s, d)
    return np.divide(out, total, out=np.zeros_like(out), where=total > 0)
