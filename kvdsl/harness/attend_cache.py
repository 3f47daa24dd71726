"""The quantised caches ``attend`` reads in its verification cases and ``kvdsl inputs``: K and V
rows encoded by the format's own reference encoder (:func:`kvdsl.reference.formats.quantize_rows`,
or the template's per-channel or per-tensor quantiser of :mod:`kvdsl.reference.modes`), so a
cache holds the codes and scales a writer of the format stores for such values, and the values
they decode to, which the reference attends over.

The template's scales are random, each between 0.8 and 1 of the largest value over the code
range: most values quantise inside it, the largest few clamp at its ends, as a calibrated
scale clamps outliers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvdsl.kernels.attend import AttendConfig
from kvdsl.reference import elementwise as ew
from kvdsl.reference import formats as fm
from kvdsl.reference.modes import Quant


@dataclass
class Encoded:
    """K and V ``[B, H, T, D]`` in a cache's format: its rows ``[B, H, T, W]`` of host values
    (u32 words, the template's int8 i32), the side scales ``[B, H, T, 2S]`` (K's stat words,
    then V's; None inline), the decoded values (f32) and the template's ``kv_scale`` binding
    and ``perChannel`` param."""

    key: np.ndarray
    value: np.ndarray
    side: np.ndarray | None
    k: np.ndarray
    v: np.ndarray
    buffers: dict[str, np.ndarray] = field(default_factory=dict)
    params: dict[str, int] = field(default_factory=dict)


def encode(cfg: AttendConfig, rng: np.random.Generator, k: np.ndarray, v: np.ndarray) -> Encoded:
    """``k`` and ``v`` ``[B, H, T, D]`` in ``cfg``'s format (a format of
    :mod:`kvdsl.nodes.formats` with its scales inline or aside, or the template's int8 or
    int4, its scales per channel or per tensor at random)."""
    if cfg.template_bits is not None:
        return _template(cfg, rng, k, v)
    fmt, inline = cfg.fmt, cfg.inline
    (kw, ks), (vw, vs) = (fm.quantize_rows(fmt, x, inline) for x in (k, v))
    dk, dv = (
        fm.dequantize_rows(fmt, w, None if inline else s, cfg.head_dim, inline)
        for w, s in ((kw, ks), (vw, vs))
    )
    side = None if inline else np.concatenate([ks, vs], axis=-1)
    return Encoded(kw, vw, side, dk, dv)


def _template(cfg: AttendConfig, rng: np.random.Generator, k: np.ndarray, v: np.ndarray):
    bits, h, d = cfg.template_bits, cfg.kv_heads, cfg.head_dim
    per_channel = bool(rng.integers(0, 2))
    n = h * d if per_channel else 1
    qmax = 2 ** (bits - 1) - 1
    k_scale, v_scale = (
        (rng.uniform(0.8, 1.0, n) * np.abs(x).max() / qmax).astype(np.float32) for x in (k, v)
    )
    quant = Quant(bits, k_scale, v_scale, per_channel)
    words, decoded = [], []
    for x, scale in ((k, k_scale), (v, v_scale)):
        scales = ew.channel_scales(scale, h, d, per_channel)
        q = ew.quantize(x, scales, *quant.range)
        words.append(q if bits == 8 else ew.pack_int4(q))
        decoded.append(ew.dequantize(q, scales))
    return Encoded(
        *words, None, *decoded, buffers={"kv_scale": quant.kv_scale()},
        params={"perChannel": int(per_channel)},
    )  # fmt: skip
