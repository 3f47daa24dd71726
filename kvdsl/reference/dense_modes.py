"""The cache modes over a dense quantised cache: ``merge_share``'s retain pass, ``window_shift``
and format-to-format copies, as numpy.

A dense cache row is ``W`` u32 words (:func:`kvdsl.reference.formats.quantize_rows`), with its
scale (and zero point) inline or in a side array of ``2 S`` f32 per row (K's ``S`` then V's).
Moving a row moves its words and its side scales, bit for bit: the retain pass and the shift
are the f32 modes' meaning (:func:`kvdsl.reference.modes.merge_share_retain`,
:func:`kvdsl.reference.window.window_shift`) applied to the stored rows. New tokens are
quantised after rotary at their absolute position, as ``window_shift`` rotates them.

A row past ``resident`` is zeroed: all-zero words and side scales. Every element of a zeroed
row decodes to zero in every format: the scale (a dense header or side word, or a ggml block's
f16 ``d``) is ``+0.0``, so ``q * 0.0`` is ``+0.0`` for a code of ``0`` (int8, q8_0; int4_asym's
``0 * 0.0 + 0.0``) and ``-0.0`` for a nibble ``0`` read as ``-8`` (int4, q4_0), which equals
``0.0``.

A copy from one format to another (``dense_convert``) reads each source row as f32 (f32, f16
widened exactly, or a dense row dequantised: :func:`kvdsl.reference.formats.dequantize_rows`)
and quantises it into the destination format, its scales computed from the row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvdsl.reference.elementwise import rotate_neox, split_heads
from kvdsl.reference.formats import (
    F32,
    FORMATS,
    DenseWritten,
    dequantize_rows,
    quantize_rows,
)
from kvdsl.reference.modes import Rotary, share_window
from kvdsl.reference.window import REGIONS, window_plan, window_shift

#: The element types a ``dense_convert`` source may hold besides a dense format.
FLOAT_SOURCES = ("f32", "f16")


def dense_retain(
    past_k: np.ndarray,
    past_v: np.ndarray,
    past_scales: np.ndarray,
    seqlens_k: np.ndarray,
    key_seq: int,
) -> DenseWritten:
    """``merge_share``'s retain pass over a dense cache: words ``[B, H, capacity, W]`` and side
    scales ``[B, H, capacity, 2S]`` (``S`` = 0 inline) of every row outside the append window
    (:func:`kvdsl.reference.modes.share_window`), as they are."""
    start, end = share_window(seqlens_k, key_seq, past_k.shape[2])
    t = np.arange(past_k.shape[2])[None, :]
    outside = (t < start[:, None]) | (t >= end[:, None])
    rows = np.broadcast_to(outside[:, None, :], past_k.shape[:3]).copy()
    return DenseWritten(past_k.copy(), past_v.copy(), np.asarray(past_scales, F32).copy(), rows)


def quantize_new(
    new: np.ndarray,
    kv_heads: int,
    fmt: Any,
    inline: bool,
    pos: np.ndarray | None,
    rotary: Rotary | None,
) -> tuple[np.ndarray, np.ndarray]:
    """New BSH rows ``[B, S, H*D]`` quantised: ``(words [B, H, S, W], side [B, H, S, S'])``,
    rotated at positions ``pos`` ``[B, 1, S]`` first where ``rotary`` is given."""
    x = split_heads(new, kv_heads).astype(F32)
    if rotary is not None:
        x = rotate_neox(x, pos, rotary.cos, rotary.sin, rotary.half)
    return quantize_rows(fmt, x, inline)


def _bsh(rows: np.ndarray) -> np.ndarray:
    """BNSH ``[B, H, S, W]`` as BSH ``[B, S, H*W]``."""
    b, h, s, w = rows.shape
    return rows.transpose(0, 2, 1, 3).reshape(b, s, h * w)


def dense_window_shift(
    past_k: np.ndarray,
    past_v: np.ndarray,
    past_scales: np.ndarray,
    new_k: np.ndarray,
    new_v: np.ndarray,
    seqlens_k: np.ndarray,
    fmt: Any,
    inline: bool = True,
    region: str = "all",
    rotary: Rotary | None = None,
) -> DenseWritten:
    """One sliding-window step of a dense cache (:func:`kvdsl.reference.window.window_shift`'s
    meaning on stored rows): past words ``[B, H, L, W]`` and side scales ``[B, H, L, 2S]``, new
    BSH K/V ``[B, S, H*D]`` quantised (K rotated at its absolute position ``absTotal - keySeq +
    j``); the rows ``region`` writes. Rows past ``resident`` are zero words and zero scales."""
    if region not in REGIONS:
        raise ValueError(f"region={region!r}: expected one of {REGIONS}")
    b, h, cap, _ = past_k.shape
    key_seq = new_k.shape[1]
    plan = window_plan(seqlens_k, key_seq, cap)
    pos = (plan.abs_total[:, None] - key_seq + np.arange(key_seq))[:, None, :]
    wk, sk = quantize_new(new_k, h, fmt, inline, pos, rotary)
    wv, sv = quantize_new(new_v, h, fmt, inline, None, None)
    key = window_shift(past_k, past_k, _bsh(wk), _bsh(wk), seqlens_k, region)
    value = window_shift(past_v, past_v, _bsh(wv), _bsh(wv), seqlens_k, region)
    side = np.asarray(past_scales, F32)
    new_side = _bsh(np.concatenate([sk, sv], axis=-1))
    scales = window_shift(side, side, new_side, new_side, seqlens_k, region)
    return DenseWritten(key.key, value.key, scales.key, key.mask[..., 0])


def decode_source(source: Any, rows: np.ndarray, side: np.ndarray | None, d: int, inline: bool):
    """Source rows as f32 ``[..., d]``: f32 as they are, f16 widened, a dense format's words
    (and side scales, a built-in's name or a format's parameters) dequantised."""
    if isinstance(source, str) and source in FLOAT_SOURCES:
        return np.asarray(rows).astype(F32)
    if isinstance(source, str) and source not in FORMATS:
        raise ValueError(f"source {source!r}: expected one of {', '.join(FLOAT_SOURCES + FORMATS)}")
    return dequantize_rows(source, rows, side, d, inline)


def dense_convert(
    src_k: np.ndarray,
    src_v: np.ndarray,
    src_scales: np.ndarray | None,
    source: Any,
    source_inline: bool,
    fmt: Any,
    inline: bool,
    d: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``[N, ...]`` of ``source`` (``f32``, ``f16`` or a dense format, its side scales
    ``[N, 2S]`` K's then V's) in format ``fmt``: ``(key words [N, W], value words [N, W], side
    scales [N, 2S'])``."""
    n = 0 if src_scales is None else np.asarray(src_scales).shape[-1] // 2
    ks = None if src_scales is None else np.asarray(src_scales)[..., :n]
    vs = None if src_scales is None else np.asarray(src_scales)[..., n:]
    k = decode_source(source, src_k, ks, d, source_inline)
    v = decode_source(source, src_v, vs, d, source_inline)
    (wk, sk), (wv, sv) = quantize_rows(fmt, k, inline), quantize_rows(fmt, v, inline)
    return wk, wv, np.concatenate([sk, sv], axis=-1)
