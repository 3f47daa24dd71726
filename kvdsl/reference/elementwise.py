"""Element transforms of the KV-cache modes, on whole numpy arrays.

Every float transform computes in float32, as the template's ``f32`` locals do. Head vectors are
the last axis (``D`` elements); positions, heads and tokens are leading axes and broadcast.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def split_heads(x: np.ndarray, kv_heads: int) -> np.ndarray:
    """BSH ``[B, S, H*D]`` → BNSH ``[B, H, S, D]`` (a transposed copy, same element type)."""
    b, s, hidden = x.shape
    if hidden % kv_heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of kv_heads={kv_heads}")
    return np.ascontiguousarray(x.reshape(b, s, kv_heads, hidden // kv_heads).transpose(0, 2, 1, 3))


def rotary_tables(cos_cache: np.ndarray, sin_cache: np.ndarray, half: int) -> tuple:
    """The cos/sin caches as ``[positions, half]`` float32 tables (flat caches are reshaped)."""
    cos = np.asarray(cos_cache, dtype=F32).reshape(-1, half)
    sin = np.asarray(sin_cache, dtype=F32).reshape(-1, half)
    return cos, sin


def rotate_neox(
    x: np.ndarray,
    positions: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    half: int | None = None,
) -> np.ndarray:
    """NeoX rotary: the pair ``(x[d], x[d + half])`` turns by the angle of ``positions``.

    ``x`` is ``[..., D]``; ``half`` is the rotated pairs per row (``D / 2`` when None, ``D``
    even); ``positions`` (integers) broadcasts against ``x.shape[:-1]``; the caches hold
    ``cos/sin`` of position ``p`` and pair ``d`` at ``p * half + d``. Returns float32
    ``[..., D]``::

        x'[d]        = x[d] * cos - x[d + half] * sin      (d < half)
        x'[d + half] = x[d + half] * cos + x[d] * sin
        x'[e]        = x[e]                                (2 * half <= e < D: partial rotary)
    """
    d = x.shape[-1]
    if half is None:
        if d % 2:
            raise ValueError(f"rotary needs an even head dim, got {d}")
        half = d // 2
    if not 1 <= half <= d // 2:
        raise ValueError(f"rotary half {half} outside 1..{d // 2} (head dim {d})")
    cos, sin = rotary_tables(cos_cache, sin_cache, half)
    pos = np.asarray(positions)
    if pos.size and (pos.min() < 0 or pos.max() >= cos.shape[0]):
        raise ValueError(f"rotary positions {pos.min()}..{pos.max()} outside the caches")
    c, s = cos[pos], sin[pos]
    x = np.asarray(x, dtype=F32)
    x0, x1, rest = x[..., :half], x[..., half : 2 * half], x[..., 2 * half :]
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s, rest], axis=-1)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x * inverseSqrt(mean(x²) + eps) * weight`` over the last axis, in float32."""
    x = np.asarray(x, dtype=F32)
    ms = np.sum(x * x, axis=-1, keepdims=True, dtype=F32) / F32(x.shape[-1])
    inv = F32(1) / np.sqrt(ms + F32(eps))
    return x * inv * np.asarray(weight, dtype=F32)


def channel_scales(
    scale: np.ndarray, kv_heads: int, head_dim: int, per_channel: bool
) -> np.ndarray:
    """Quantisation scales broadcastable over BNSH ``[B, H, S, D]``.

    Per channel: ``scale[hk * D + d]`` → ``[1, H, 1, D]``; per tensor: ``scale[0]``.
    """
    scale = np.asarray(scale, dtype=F32).reshape(-1)
    if per_channel:
        return scale[: kv_heads * head_dim].reshape(1, kv_heads, 1, head_dim)
    return scale[:1].reshape(1, 1, 1, 1)


def quantize(x: np.ndarray, scale: np.ndarray, qmin: float, qmax: float) -> np.ndarray:
    """``clamp(round_half_even(x / scale), qmin, qmax)`` as int32 (f32 division)."""
    q = np.rint(np.asarray(x, dtype=F32) / np.asarray(scale, dtype=F32))
    return np.clip(q, F32(qmin), F32(qmax)).astype(np.int32)


def pack_int4(q: np.ndarray) -> np.ndarray:
    """Pairs of signed 4-bit values → one u32 each: element ``2i`` in bits 0..3, ``2i+1`` in 4..7.

    Each nibble holds ``(q + 8) & 0xF``; bits 8..31 are zero. ``[..., D]`` → ``[..., D/2]``.
    """
    q = np.asarray(q, dtype=np.int64)
    if q.shape[-1] % 2:
        raise ValueError(f"int4 packing needs an even head dim, got {q.shape[-1]}")
    lo = (q[..., 0::2] + 8) & 0xF
    hi = (q[..., 1::2] + 8) & 0xF
    return (lo | (hi << 4)).astype(np.uint32)


def unpack_int4(words: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_int4`: ``[..., D/2]`` u32 → ``[..., D]`` int32 in ``[-8, 7]``."""
    w = np.asarray(words, dtype=np.int64)
    lo = (w & 0xF) - 8
    hi = ((w >> 4) & 0xF) - 8
    return np.stack([lo, hi], axis=-1).reshape(*w.shape[:-1], -1).astype(np.int32)


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``q * scale`` in float32 (what a reader of the quantised cache computes)."""
    return np.asarray(q, dtype=F32) * np.asarray(scale, dtype=F32)
