"""What each mode of the KV-cache template means, as whole-array numpy.

Layouts: new K/V tokens arrive BSH ``[B, S, H*D]`` (token-major, heads interleaved); caches are
BNSH ``[B, H, S, D]``. ``seqlens_k`` is ``[B]`` (signed: the index of each batch's last valid
token, so ``seqlens_k[b] + 1`` tokens are valid after this step). Rotary caches hold ``cos/sin``
of position ``p`` and pair ``d`` at ``p * half + d`` (flat or ``[P, half]``).

Modes that write every element of their output return the arrays. Passes that write part of a
cache return :class:`Written`: the values and a boolean mask of the elements the pass writes;
everything outside the mask must be left untouched (tests poison it and compare).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvdsl.reference.elementwise import (
    F32,
    channel_scales,
    pack_int4,
    quantize,
    rms_norm,
    rotate_neox,
    split_heads,
)


@dataclass(frozen=True)
class Rotary:
    """NeoX rotary caches (``cos_cache``, ``sin_cache``) of ``half`` pairs per position: the
    first ``2 * half`` elements of a row rotate, the rest pass through (None: half the row)."""

    cos: np.ndarray
    sin: np.ndarray
    half: int | None = None

    def table(self, half: int) -> np.ndarray:
        """The packed ``rotary_table``: per position ``half`` cos values, then ``half`` sin."""
        cos, sin = self.cos.reshape(-1, half), self.sin.reshape(-1, half)
        return np.concatenate([cos, sin], axis=1).reshape(-1)


@dataclass(frozen=True)
class KNorm:
    """K RMSNorm: per-channel ``weight`` ``[D]`` (shared by all heads) and ``eps``."""

    weight: np.ndarray
    eps: float


@dataclass(frozen=True)
class Quant:
    """Quantisation of K and V: ``bits`` 8 (one i32 per element) or 4 (packed pairs in u32).

    ``k_scale``/``v_scale`` hold ``H*D`` per-channel scales (``scale[hk*D + d]``) or one
    per-tensor scale (``scale[0]``). ``qmin``/``qmax`` default to the signed range of ``bits``.
    """

    bits: int
    k_scale: np.ndarray
    v_scale: np.ndarray
    per_channel: bool
    qmin: int | None = None
    qmax: int | None = None

    def kv_scale(self) -> np.ndarray:
        """The packed ``kv_scale``: entry ``i`` is ``(k_scale[i], v_scale[i])``, flattened."""
        return np.stack([self.k_scale, self.v_scale], axis=-1).reshape(-1)

    @property
    def range(self) -> tuple[int, int]:
        """``(qmin, qmax)``, defaulted from ``bits``."""
        lo, hi = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        return (lo if self.qmin is None else self.qmin, hi if self.qmax is None else self.qmax)


@dataclass(frozen=True)
class Written:
    """A pass's effect on a K/V cache pair: values where ``mask`` is True, untouched elsewhere."""

    key: np.ndarray
    value: np.ndarray
    mask: np.ndarray

    def over(self, key_before: np.ndarray, value_before: np.ndarray) -> tuple:
        """The caches after the pass, given their contents before it."""
        return (
            np.where(self.mask, self.key, key_before.reshape(self.key.shape)),
            np.where(self.mask, self.value, value_before.reshape(self.value.shape)),
        )


def combine(first: Written, second: Written) -> Written:
    """Two passes over the same caches that own disjoint elements (order immaterial)."""
    if np.any(first.mask & second.mask):
        raise ValueError("the passes overlap: their order would matter")
    k, v = second.over(first.key, first.value)
    return Written(k, v, first.mask | second.mask)


# ---- layout modes -----------------------------------------------------------------------------


def transpose(key: np.ndarray, value: np.ndarray, kv_heads: int, present_dtype=np.float32) -> tuple:
    """``transpose``: BSH ``[B, S, H*D]`` → BNSH ``[B, H, S, D]``, converted to ``present_dtype``."""
    return (
        split_heads(key, kv_heads).astype(present_dtype),
        split_heads(value, kv_heads).astype(present_dtype),
    )


def copy(src_k: np.ndarray, src_v: np.ndarray) -> tuple:
    """``copy``: the BNSH cache unchanged, any element type (words per row are what they are)."""
    return np.array(src_k, copy=True), np.array(src_v, copy=True)


def merge(
    past_k: np.ndarray,
    past_v: np.ndarray,
    new_k: np.ndarray,
    new_v: np.ndarray,
    seq: int | None = None,
) -> tuple:
    """``merge``: present ``[B, H, seq, D]`` = past rows then the new tokens, along tokens.

    ``past`` is BNSH ``[B, H, pastSeq, D]``; ``new`` BSH ``[B, keySeq, H*D]``; ``seq`` (the
    present's rows per head) defaults to ``pastSeq + keySeq`` and may be smaller (truncation).
    """
    heads = past_k.shape[1]
    full_k = np.concatenate([past_k, split_heads(new_k, heads).astype(past_k.dtype)], axis=2)
    full_v = np.concatenate([past_v, split_heads(new_v, heads).astype(past_v.dtype)], axis=2)
    seq = full_k.shape[2] if seq is None else seq
    if seq > full_k.shape[2]:
        raise ValueError(f"seq={seq} exceeds pastSeq + keySeq = {full_k.shape[2]}")
    return full_k[:, :, :seq].copy(), full_v[:, :, :seq].copy()


# ---- buffer-sharing append (merge_share) ------------------------------------------------------


def share_window(seqlens_k: np.ndarray, key_seq: int, capacity: int) -> tuple:
    """Per batch append window ``[start, end)`` of the buffer-sharing cache.

    ``end = min(capacity, max(key_seq, seqlens_k[b] + 1))`` (a right-padded first prompt, with
    fewer valid tokens than ``key_seq``, appends at row 0); ``start = end - key_seq``.
    """
    if key_seq > capacity:
        raise ValueError(f"key_seq={key_seq} does not fit the capacity {capacity}")
    end = np.minimum(capacity, np.maximum(key_seq, np.asarray(seqlens_k, dtype=np.int64) + 1))
    return end - key_seq, end


def row_mask(start: np.ndarray, end: np.ndarray, shape: tuple) -> np.ndarray:
    """``[B, H, S, D]`` mask of rows ``start[b] <= t < end[b]``."""
    t = np.arange(shape[2])[None, :]
    rows = (t >= np.asarray(start)[:, None]) & (t < np.asarray(end)[:, None])
    return np.broadcast_to(rows[:, None, :, None], shape).copy()


def place_rows(cache: np.ndarray, start: np.ndarray, rows: np.ndarray) -> None:
    """Write BNSH ``rows`` ``[B, H, n, D]`` into ``cache`` at rows ``start[b] + j``."""
    b = np.arange(cache.shape[0])[:, None]
    t = np.asarray(start)[:, None] + np.arange(rows.shape[2])[None, :]
    # Advanced indices on axes 0 and 2 move to the front: the target is [B, n, H, D].
    cache[b, :, t] = rows.transpose(0, 2, 1, 3)


def merge_share_retain(
    past_k: np.ndarray, past_v: np.ndarray, seqlens_k: np.ndarray, key_seq: int
) -> Written:
    """``merge_share`` retain pass: every row outside the append window copied from past."""
    start, end = share_window(seqlens_k, key_seq, past_k.shape[2])
    mask = ~row_mask(start, end, past_k.shape)
    return Written(past_k.copy(), past_v.copy(), mask)


def merge_share_append(
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    capacity: int,
    kv_heads: int,
    rotary: Rotary | None = None,
    dtype=np.float32,
) -> Written:
    """``merge_share`` append pass: the window rows from the new tokens.

    K is NeoX-rotated at its row index (in the shared cache a row is its absolute position).
    """
    k, v = split_heads(new_k, kv_heads), split_heads(new_v, kv_heads)
    b, h, s, d = k.shape
    start, end = share_window(seqlens_k, s, capacity)
    if rotary is not None:
        pos = (start[:, None] + np.arange(s))[:, None, :]
        k = rotate_neox(k, pos, rotary.cos, rotary.sin, rotary.half)
    shape = (b, h, capacity, d)
    out_k, out_v = np.zeros(shape, dtype), np.zeros(shape, dtype)
    place_rows(out_k, start, k.astype(dtype))
    place_rows(out_v, start, v.astype(dtype))
    return Written(out_k, out_v, row_mask(start, end, shape))


def merge_share(
    past_k: np.ndarray,
    past_v: np.ndarray,
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    rotary: Rotary | None = None,
) -> Written:
    """Both ``merge_share`` passes: the present cache after retain and append."""
    retain = merge_share_retain(past_k, past_v, seqlens_k, new_k.shape[1])
    heads, cap = past_k.shape[1], past_k.shape[2]
    append = merge_share_append(new_k, new_v, seqlens_k, cap, heads, rotary, past_k.dtype)
    return combine(retain, append)


# ---- build and quantised modes ----------------------------------------------------------------


def _prepare_k(
    k: np.ndarray, positions: np.ndarray, k_norm: KNorm | None, rotary: Rotary | None
) -> np.ndarray:
    """K RMSNorm, then NeoX rotary at ``positions``; float32 BNSH."""
    k = np.asarray(k, dtype=F32)
    if k_norm is not None:
        k = rms_norm(k, k_norm.weight, k_norm.eps)
    if rotary is not None:
        k = rotate_neox(k, positions, rotary.cos, rotary.sin, rotary.half)
    return k


def build(
    new_k: np.ndarray,
    new_v: np.ndarray,
    kv_heads: int,
    past_seq: int = 0,
    k_norm: KNorm | None = None,
    rotary: Rotary | None = None,
) -> tuple:
    """``build``: BNSH float32 from BSH; K normed then rotated at ``past_seq + t``; V copied."""
    k, v = split_heads(new_k, kv_heads), split_heads(new_v, kv_heads)
    pos = past_seq + np.arange(k.shape[2])[None, None, :]
    return _prepare_k(k, pos, k_norm, rotary), v.astype(F32)


def _quantize_kv(k: np.ndarray, v: np.ndarray, quant: Quant) -> tuple:
    """Quantise float32 BNSH K and V; pack pairs of nibbles for 4 bits."""
    _, h, _, d = k.shape
    qmin, qmax = quant.range
    ks = channel_scales(quant.k_scale, h, d, quant.per_channel)
    vs = channel_scales(quant.v_scale, h, d, quant.per_channel)
    qk, qv = quantize(k, ks, qmin, qmax), quantize(v, vs, qmin, qmax)
    if quant.bits == 8:
        return qk, qv
    if quant.bits == 4:
        return pack_int4(qk), pack_int4(qv)
    raise ValueError(f"bits={quant.bits}: expected 8 or 4")


def build_quant(
    new_k: np.ndarray,
    new_v: np.ndarray,
    kv_heads: int,
    quant: Quant,
    past_seq: int = 0,
    k_norm: KNorm | None = None,
    rotary: Rotary | None = None,
) -> tuple:
    """``build_quant``: :func:`build`, then K and V quantised.

    8 bits: int32 ``[B, H, S, D]``; 4 bits: uint32 ``[B, H, S, D/2]``.
    """
    k, v = build(new_k, new_v, kv_heads, past_seq, k_norm, rotary)
    return _quantize_kv(k, v, quant)


def append_quant(
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    capacity: int,
    kv_heads: int,
    quant: Quant,
    k_norm: KNorm | None = None,
    rotary: Rotary | None = None,
) -> Written:
    """``append_quant``: quantised new tokens into rows ``[end - S, end)`` of a shared cache.

    The window is :func:`share_window`'s (``end = min(capacity, max(S, seqlens_k[b] + 1))``);
    K is rotated at its row index, the absolute position in a buffer-sharing cache. Output
    caches are ``[B, H, capacity, D]`` int32 (8 bits) or ``[B, H, capacity, D/2]`` uint32.
    """
    k, v = split_heads(new_k, kv_heads), split_heads(new_v, kv_heads)
    b, h, s, _ = k.shape
    start, end = share_window(seqlens_k, s, capacity)
    pos = (start[:, None] + np.arange(s))[:, None, :]
    qk, qv = _quantize_kv(_prepare_k(k, pos, k_norm, rotary), v.astype(F32), quant)
    shape = (b, h, capacity, qk.shape[3])
    out_k, out_v = np.zeros(shape, qk.dtype), np.zeros(shape, qv.dtype)
    place_rows(out_k, start, qk)
    place_rows(out_v, start, qv)
    return Written(out_k, out_v, row_mask(start, end, shape))
