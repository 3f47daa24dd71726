"""ONNX Runtime WebGPU's 4-bit KV cache ("TurboQuant", the ``Q4`` cache), in numpy, byte for byte.

A row is one token of one KV head, K or V alike (``d`` values, ``d`` a power of two, at least 8).
ORT writes it as ``d / 8 + 1`` u32 words (68 B at ``d`` = 128):

- **word 0**: the row's L2 norm, an f32's bits (``bitcast<u32>``), taken *after* the rotation.
- **words 1 ..**: ``d`` four-bit centroid indices, 8 per word, value ``8 w + j`` in bits ``4 j ..
  4 j + 3`` of word ``1 + w`` (the first value in the lowest nibble; a little-endian buffer's bytes
  therefore hold value ``2 b`` in the low nibble of byte ``b`` and ``2 b + 1`` in its high nibble).

The encoder, as ``turbo_quant_hadamard.wgsl.template`` (``TurboQuantCopyToQuantizedKVCache``) and
``turbo_quant_fused_rotary_hadamard.wgsl.template`` (the same after rotary on K) write it, all in
f32 (an f16 input is widened first):

1. **Rotation**: the unsigned Walsh-Hadamard transform of the whole head (no random signs, no
   blocks): ``hadamard_transform_common.wgsl.template``'s ``wht_butterfly``, stages at pair
   distance 1, 2, 4, ... (``a + b`` at ``i``, ``a - b`` at ``i + distance``), then every value
   times ``1 / sqrt(d)`` (``1.0f / sqrt(f32(d))``). It is Sylvester's ``H`` (``H[i, j] =
   (-1)^popcount(i & j) / sqrt(d)``), symmetric and its own inverse. K and V are both rotated;
   attention rotates Q with the same transform (``ApplyHadamardTransform`` in
   ``flash_attention.cc``) and rotates its output back (V is rotated too).
2. **Norm**: ``sqrt`` of the sum of the rotated values' squares, summed as the workgroup does:
   ``w = min(d / 2, 64)`` threads, thread ``t`` adds the squares of ``t, t + w, t + 2w, ...`` in
   that order (from 0), then a tree ``p[t] += p[t + s]`` for ``s = w / 2, w / 4, ..., 1``.
3. **Index**: ``u = x * (1 / norm)`` (``inv = 0`` where the norm is 0), then the index is the
   number of the 15 decision boundaries ``TQ_BOUNDARIES`` (f32) that are ``<= u``: a value on a
   boundary takes the upper centroid. This is ``searchsorted_tq`` (a 4-step binary search with
   ``val >= boundary``) in ``turbo_quant_common.wgsl.template``.
4. **Packing**: as above (``turbo_quant_hadamard.wgsl.template``'s pack loop); the norm word first.

The decoder (``turbo_quant_dequant.wgsl.template``'s ``tq_unpack_nibbles``,
``kv_cache_quantization_dequant.wgsl.template``'s ``kv_cache_quant_unpack_vec4`` for 4 bits) reads
nibble ``j`` of a word as ``tq_lut[(w >> 4 j) & 0xF]``, the LUT preloaded from ``TQ_CENTROIDS``,
scaled by the row's norm: ``centroid[index] * norm`` is the row *in the rotated basis*
(:func:`dequantize_rotated`); :func:`dequantize` rotates it back (the same transform).

The centroids are ORT's literal table, ``TQ_CENTROIDS`` (16 values, ``C[i] = -C[15 - i]``,
``+-0.0113 .. +-0.2377``): the MSE-optimal (Lloyd-Max) 4-bit quantiser for one coordinate of a
uniformly random unit vector in 128 dimensions (about ``N(0, 1/128)``), used at every head size
(not rescaled by ``d``). The rotation has no random signs, so what it does not spread is a
common offset: ``H`` sends a row's mean, times ``sqrt(d)``, to value 0 alone, where a large one
is clipped to the outer centroid. The boundaries are ORT's literal ``TQ_BOUNDARIES``: the centroids'
midpoints rounded to 4 decimals (so ``argmin |u - C|`` differs from ORT's index for ``u`` within
5e-5 of a midpoint; ORT's table is what decides).

Where the stored source is not one thing (what a reader should check against ORT):

- The newest stored ``turbo_quant_hadamard.wgsl.template`` calls ``snap_to_centroid_index(u)``,
  whose definition is not in the stored ``turbo_quant_common.wgsl.template`` (which defines
  ``searchsorted_tq`` over ``TQ_BOUNDARIES``, as used by ``turbo_quant_rotate_quantize``). This
  module implements ``searchsorted_tq``'s rule; if ``snap_to_centroid_index`` is a nearest-
  centroid search instead, a value within 5e-5 of a midpoint takes the other index (on 2,000
  Gaussian rows of 128 with large channels: 364 of 256,000 codes, in 333 rows). Checking ORT's
  bytes on a GPU settles it.
- ``kv_cache_quantization.h`` sizes a quantised head as ``1 + d * bits / 32`` words (``bits`` = 4:
  ``d / 8 + 1``), as here. ORT enforces a power of two of at least 4, but at ``d`` = 4 its pack
  loop writes ``d / 8 = 0`` code words: this module refuses ``d`` < 8.
- ORT's attention casts the LUT's centroids to its ``q_element_t`` (f16 where the model is f16)
  before scaling; :func:`dequantize_rotated` keeps them f32.
- WGSL's ``sqrt`` and division are not required to be correctly rounded; this module rounds them
  correctly (numpy's f32), which is what a GPU gives in practice.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

#: ``TQ_CENTROIDS`` (``turbo_quant_common.wgsl.template``): the 4-bit codebook, ascending.
CENTROIDS = np.array(
    [-0.2377, -0.1809, -0.1419, -0.1104, -0.0829, -0.0578, -0.0342, -0.0113]
    + [0.0113, 0.0342, 0.0578, 0.0829, 0.1104, 0.1419, 0.1809, 0.2377],
    dtype=F32,
)
#: ``TQ_BOUNDARIES``: the 15 interior decision boundaries, ascending.
BOUNDARIES = np.array(
    [-0.2093, -0.1614, -0.1261, -0.0966, -0.0704, -0.0460, -0.0227, 0.0]
    + [0.0227, 0.0460, 0.0704, 0.0966, 0.1261, 0.1614, 0.2093],
    dtype=F32,
)
#: ORT's workgroup for one row: ``min(d / 2, 64)`` threads (``turbo_quant_hadamard.cc``).
MAX_THREADS = 64


def check_head_size(d: object) -> int:
    """``d`` as an int, or one error naming it and what is allowed."""
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 8 or d & (d - 1):
        raise ValueError(
            f"ort_tq: head size {d!r}: expected a power of two, at least 8 (ORT packs 8 "
            "four-bit indices per u32 after a whole-head Walsh-Hadamard transform)"
        )
    return int(d)


def row_bytes(d: int) -> int:
    """The bytes of one row: an f32 norm and ``d`` nibbles (``kv_cache_quantization.h``)."""
    return 4 * (check_head_size(d) // 8 + 1)


def hadamard(x: np.ndarray) -> np.ndarray:
    """ORT's orthonormal Walsh-Hadamard transform of each row of ``x`` ``[..., d]`` in f32:
    butterflies at pair distance 1, 2, 4, ..., then each value times ``f32(1) / sqrt(f32(d))``.
    Its own inverse (up to rounding)."""
    d = check_head_size(x.shape[-1])
    lead = x.shape[:-1]
    y = np.asarray(x, dtype=F32).reshape(-1, d)
    dist = 1
    while dist < d:
        y = y.reshape(-1, d // (2 * dist), 2, dist)
        a, b = y[:, :, 0, :], y[:, :, 1, :]
        y = np.stack([a + b, a - b], axis=2)
        dist *= 2
    scale = F32(1) / np.sqrt(F32(d))
    return (y.reshape(*lead, d) * scale).astype(F32)


def norms(rotated: np.ndarray) -> np.ndarray:
    """The L2 norm of each rotated row ``[..., d]`` (f32), summed in ORT's workgroup order."""
    d = rotated.shape[-1]
    w = min(d // 2, MAX_THREADS)
    sq = np.asarray(rotated, dtype=F32) ** 2
    sq = sq.reshape(*sq.shape[:-1], d // w, w)  # [..., pass, thread]
    part = np.zeros(sq.shape[:-2] + (w,), dtype=F32)
    for k in range(d // w):
        part = part + sq[..., k, :]
    s = w // 2
    while s:
        part = part[..., :s] + part[..., s : 2 * s]
        s //= 2
    return np.sqrt(part[..., 0]).astype(F32)


def indices(unit: np.ndarray) -> np.ndarray:
    """The centroid index of each unit-scaled value: how many boundaries are ``<=`` it."""
    return np.searchsorted(BOUNDARIES, np.asarray(unit, dtype=F32), side="right").astype(np.uint32)


def quantize(rows: np.ndarray) -> np.ndarray:
    """Rows ``[..., d]`` (f16 or f32; f64 is rounded to f32 first) -> ORT's words ``[..., d / 8 +
    1]`` (u32): the norm's bits, then the packed indices."""
    rows = np.asarray(rows)
    if rows.ndim < 1:
        raise ValueError("ort_tq.quantize: rows: expected an array of rows [..., d], got a scalar")
    d = check_head_size(rows.shape[-1])
    if rows.dtype.kind != "f":
        raise ValueError(f"ort_tq.quantize: rows: dtype {rows.dtype}: expected a float array")
    x = rows.astype(F32)
    if not np.all(np.isfinite(x)):
        raise ValueError("ort_tq.quantize: rows: expected finite values (in float32)")
    rotated = hadamard(x)
    norm = norms(rotated)
    inv = np.where(norm > 0, F32(1) / np.where(norm > 0, norm, F32(1)), F32(0)).astype(F32)
    idx = indices(rotated * inv[..., None])
    nib = idx.reshape(*idx.shape[:-1], d // 8, 8)
    packed = np.bitwise_or.reduce(nib << (4 * np.arange(8, dtype=np.uint32)), axis=-1)
    words = np.empty(rows.shape[:-1] + (d // 8 + 1,), dtype=np.uint32)
    words[..., 0] = norm.view(np.uint32)
    words[..., 1:] = packed
    return words


def _split(words: np.ndarray, d: int, who: str) -> tuple[np.ndarray, np.ndarray]:
    d = check_head_size(d)
    words = np.asarray(words)
    if words.dtype != np.uint32 or words.ndim < 1 or words.shape[-1] != d // 8 + 1:
        raise ValueError(
            f"ort_tq.{who}: words: shape {words.shape} dtype {words.dtype}: expected u32 "
            f"[..., {d // 8 + 1}] for head size {d}"
        )
    norm = words[..., 0].view(F32)
    shifts = 4 * np.arange(8, dtype=np.uint32)
    idx = (words[..., 1:, None] >> shifts) & np.uint32(0xF)
    return norm, idx.reshape(*words.shape[:-1], d)


def codes(words: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """ORT's words -> the norms ``[...]`` (f32) and the centroid indices ``[..., d]`` (u32)."""
    return _split(words, d, "codes")


def dequantize_rotated(words: np.ndarray, d: int) -> np.ndarray:
    """ORT's words -> the rows in the rotated basis, ``centroid[index] * norm`` (f32), as ORT's
    attention reads them (against a rotated Q)."""
    norm, idx = _split(words, d, "dequantize_rotated")
    return (CENTROIDS[idx] * norm[..., None]).astype(F32)


def dequantize(words: np.ndarray, d: int) -> np.ndarray:
    """ORT's words -> the rows (f32): :func:`dequantize_rotated`, rotated back."""
    return hadamard(dequantize_rotated(words, d))
