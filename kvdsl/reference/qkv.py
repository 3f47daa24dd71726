"""What the ``qkv`` mode means: a layer's packed QKV projection split into heads, the bias added,
Q and K RMS-normed and NeoX-rotated at each token's position, Q returned and K and V appended
into a buffer-sharing cache (:func:`qkv`) or, ``paged_qkv``, into pages (:func:`project` gives
Q, K and V at each token's position; :mod:`kvdsl.reference.paged` places K and V).

The input is ``[B, S, (Hq + 2 Hkv) * D]``: per token the ``Hq`` query heads, then the ``Hkv``
key heads, then the ``Hkv`` value heads. Batch ``b``'s tokens land at rows ``[start, end)`` of
:func:`kvdsl.reference.modes.share_window`; a token's row is its rotary position. Float math in
float32, converted to the outputs' types at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvdsl.reference.elementwise import F32, rms_norm, rotate_neox, split_heads
from kvdsl.reference.formats import DenseWritten, quantized_at, stored_basis
from kvdsl.reference.modes import KNorm, Rotary, Written, place_rows, row_mask, share_window
from kvdsl.reference.rotation import rotation as rotation_of


@dataclass(frozen=True)
class Transforms:
    """What a projection applies to its heads (None: not): ``bias`` added to the packed row,
    Q's and K's RMSNorm, NeoX rotary."""

    bias: np.ndarray | None = None
    q_norm: KNorm | None = None
    k_norm: KNorm | None = None
    rotary: Rotary | None = None


def project(
    x: np.ndarray,
    positions: np.ndarray,
    q_heads: int,
    kv_heads: int,
    transforms: Transforms = Transforms(),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q, k, v)`` in float32, ``[B, H, S, D]`` each: the packed projection ``x`` ``[B, S,
    (Hq + 2 Hkv) * D]`` split into heads, the bias added, Q and K RMS-normed and NeoX-rotated
    at ``positions`` ``[B, S]`` (as ``transforms`` has them)."""
    t = transforms
    x = np.asarray(x, dtype=F32)
    width = x.shape[-1]
    heads = q_heads + 2 * kv_heads
    d = width // heads
    if t.bias is not None:
        x = x + np.asarray(t.bias, dtype=F32).reshape(1, 1, width)
    hq, hk = q_heads * d, kv_heads * d
    q = split_heads(x[..., :hq], q_heads)
    k = split_heads(x[..., hq : hq + hk], kv_heads)
    v = split_heads(x[..., hq + hk :], kv_heads)
    pos = np.asarray(positions)[:, None, :]
    if t.q_norm is not None:
        q = rms_norm(q, t.q_norm.weight, t.q_norm.eps)
    if t.k_norm is not None:
        k = rms_norm(k, t.k_norm.weight, t.k_norm.eps)
    if t.rotary is not None:
        q = rotate_neox(q, pos, t.rotary.cos, t.rotary.sin, t.rotary.half)
        k = rotate_neox(k, pos, t.rotary.cos, t.rotary.sin, t.rotary.half)
    return q, k, v


def qkv(
    x: np.ndarray,
    seqlens_k: np.ndarray,
    capacity: int,
    q_heads: int,
    kv_heads: int,
    transforms: Transforms = Transforms(),
    q_layout: str = "bnsh",
    q_dtype=np.float32,
    cache_dtype=np.float32,
    fmt: str | None = None,
    inline: bool = True,
    rotation: int = 0,
) -> tuple[np.ndarray, Written | DenseWritten]:
    """``(q, cache)``: Q as BNSH ``[B, Hq, S, D]`` (``q_layout="bsh"``: ``[B, S, Hq * D]``) of
    ``q_dtype`` (``transforms`` applied as :func:`project` applies them), and the caches
    ``[B, Hkv, capacity, D]`` of ``cache_dtype`` with the rows the
    step writes (:class:`Written`); with a dense format ``fmt``
    (:mod:`kvdsl.reference.formats`), its words and side scales (:class:`DenseWritten`), K
    Walsh-Hadamard rotated over blocks of ``rotation`` before it is quantised
    (:mod:`kvdsl.reference.rotation`; 0: not; Q and V are not), then K and V in the format's
    stored basis (:func:`kvdsl.reference.formats.stored_basis`)."""
    start, end = share_window(seqlens_k, x.shape[1], capacity)
    pos = start[:, None] + np.arange(x.shape[1])
    q, k, v = project(x, pos, q_heads, kv_heads, transforms)
    b, s, d = q.shape[0], q.shape[2], q.shape[3]
    hq = q_heads * d
    q = q.astype(q_dtype)
    if q_layout == "bsh":
        q = q.transpose(0, 2, 1, 3).reshape(b, s, hq)
    if fmt is not None:
        if rotation:
            k = rotation_of(k.shape[-1], rotation).rotate(np.asarray(k, F32))
        k, v = stored_basis(fmt, np.asarray(k, F32)), stored_basis(fmt, np.asarray(v, F32))
        return q, quantized_at(k, v, start, capacity, fmt, inline)
    if rotation:
        raise ValueError(f"qkv: rotation={rotation}: expected 0 without a dense format")
    shape = (b, kv_heads, capacity, d)
    out_k, out_v = np.zeros(shape, cache_dtype), np.zeros(shape, cache_dtype)
    place_rows(out_k, start, k.astype(cache_dtype))
    place_rows(out_v, start, v.astype(cache_dtype))
    return q, Written(out_k, out_v, row_mask(start, end, shape))
