"""Verification cases for the dense-format modes (``dense_append``, ``dense_read``).

Rows mix magnitudes (each row scaled by a power of ten from 1e-2 to 1e2) so that every scale is
exercised; ``seqlens_k`` covers right-padded first prompts, appends in the middle, a cache filled
exactly and more tokens than fit. Outputs are poisoned; the rows not written must keep the
poison. Cache words are quantised codes packed in u32 words (``Case.packed``): against the GPU
each code may move by one step in a few elements (WGSL's f32 division is accurate to 2.5 ULP).
"""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator, dtype, values
from kvdsl.harness.compare import poison
from kvdsl.kernels.dense import DenseAppendConfig, DenseReadConfig
from kvdsl.reference import formats as fm
from kvdsl.reference.modes import Rotary

CACHE = ("present_key", "present_value")


def _rows(rng: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """Random non-zero values, each row of the last axis scaled by 10^k, k in -2..2."""
    scale = 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))
    return (values(rng, shape, np.float32) * scale).astype(dt)


def _seqlens(rng: np.random.Generator, batch: int, key_seq: int, cap: int, i: int) -> np.ndarray:
    kinds = [
        lambda: int(rng.integers(0, key_seq)) - 1,  # right-padded first prompt (or empty)
        lambda: int(rng.integers(key_seq, cap + 1)) - 1,  # append in the middle
        lambda: cap - 1,  # fills the cache exactly
        lambda: int(rng.integers(cap, 2 * cap + 2)) - 1,  # more than the capacity
    ]
    return np.array([kinds[(i + b) % 4]() for b in range(batch)], np.int32)


@case_generator("dense_append")
def dense_append_case(cfg: DenseAppendConfig, rng: np.random.Generator, i: int) -> Case:
    batch = 2 + i % 2
    cap, seq = [(20, 4), (9, 1), (12, 12)][i % 3]
    h, d = cfg.kv_heads, cfg.head_dim
    dt = dtype(cfg.input_type.value)
    new_k = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    new_v = _rows(rng, (batch, seq, h, d), dt).reshape(batch, seq, h * d)
    seqlens = _seqlens(rng, batch, seq, cap, i)
    bufs = {"src_k": new_k, "src_v": new_v, "seqlens_k": seqlens}
    rot = None
    if cfg.rotary:
        theta = rng.uniform(0, 2 * np.pi, (cap, d // 2))
        rot = Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    w = fm.dense_append(new_k, new_v, seqlens, cap, h, cfg.format.value, cfg.inline, rot)
    expected = {"present_key": w.key, "present_value": w.value}
    written = {"present_key": w.mask(w.key), "present_value": w.mask(w.value)}
    bufs |= {name: poison(w.key.size, np.uint32) for name in CACHE}
    if not cfg.inline:
        expected["present_scales"] = w.scales
        written["present_scales"] = w.mask(w.scales)
        bufs["present_scales"] = poison(w.scales.size, np.float32)
    bits = cfg.fmt.bits
    case = Case(
        {"batch": batch, "keySeq": seq, "seq": cap},
        {k: np.ascontiguousarray(a).reshape(-1) for k, a in bufs.items()},
        {"count": batch * h * seq, "keySeq": seq, "seq": cap},
        {k: a.reshape(-1) for k, a in expected.items()},
        {k: a.reshape(-1) for k, a in written.items()},
        codes={name: bits for name in CACHE},
        packed=CACHE,
    )
    if not cfg.inline:
        # A side scale is an f32 quotient: an ulp apart where the GPU divides approximately.
        case.tolerance = {"present_scales": 1e-6}
    return case


@case_generator("dense_read")
def dense_read_case(cfg: DenseReadConfig, rng: np.random.Generator, i: int) -> Case:
    rows = [1, int(rng.integers(2, 40)), int(rng.integers(100, 200))][i % 3]
    d, fmt = cfg.head_dim, cfg.format.value
    k, v = _rows(rng, (rows, d), np.float32), _rows(rng, (rows, d), np.float32)
    if rows > 1:
        k[0] = 0  # an all-zero row: a zero scale (q4_0: a negative zero)
    (wk, sk), (wv, sv) = fm.quantize_rows(fmt, k, cfg.inline), fm.quantize_rows(fmt, v, cfg.inline)
    bufs = {"cache_key": wk.reshape(-1), "cache_value": wv.reshape(-1)}
    if not cfg.inline:
        bufs["cache_scales"] = np.concatenate([sk, sv], axis=-1).reshape(-1)
    want_k = fm.dequantize_rows(fmt, wk, sk, d, cfg.inline)
    want_v = fm.dequantize_rows(fmt, wv, sv, d, cfg.inline)
    bufs |= {"key": poison(rows * d, np.float32), "value": poison(rows * d, np.float32)}
    case = Case(
        {"rows": rows},
        bufs,
        {"count": rows},
        {"key": want_k.reshape(-1), "value": want_v.reshape(-1)},
    )
    if cfg.fmt.asymmetric:
        # q * scale + zero: a GPU may contract it into one fma.
        case.tolerance = {"key": 1e-6, "value": 1e-6}
    return case
