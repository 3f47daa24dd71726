"""The quantised caches ``attend`` reads in its verification cases and ``kvdsl inputs``: K and V
rows encoded by the format's own reference encoder (:func:`kvdsl.reference.formats.quantize_rows`,
in the basis the format stores them in, :func:`kvdsl.reference.formats.stored_basis`, and the
decoded rows rotated back,
or the template's per-channel or per-tensor quantiser of :mod:`kvdsl.reference.modes`), so a
cache holds the codes and scales a writer of the format stores for such values, and the values
they decode to, which the reference attends over.

The template's scales are random, each between 0.8 and 1 of the largest value over the code
range: most values quantise inside it, the largest few clamp at its ends, as a calibrated
scale clamps outliers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kvdsl.kernels.attend import AttendConfig, CacheLayout
from kvdsl.kernels.paged import Pool
from kvdsl.reference import elementwise as ew
from kvdsl.reference import formats as fm
from kvdsl.reference import kivi
from kvdsl.reference.judge import poison, values
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


def encode(
    cfg: AttendConfig,
    rng: np.random.Generator,
    k: np.ndarray,
    v: np.ndarray,
    per_channel: bool | None = None,
) -> Encoded:
    """``k`` and ``v`` ``[B, H, T, D]`` in ``cfg``'s format (a format of
    :mod:`kvdsl.nodes.formats` with its scales inline or aside, or the template's int8 or
    int4, its scales per channel or per tensor as ``per_channel`` says, None: at random)."""
    if cfg.template_bits is not None:
        if per_channel is None:
            per_channel = bool(rng.integers(0, 2))
        return _template(cfg, rng, k, v, per_channel)
    fmt, inline = cfg.fmt, cfg.inline
    stored = (fm.stored_basis(fmt, np.asarray(x, np.float32)) for x in (k, v))
    (kw, ks), (vw, vs) = (fm.quantize_rows(fmt, x, inline) for x in stored)
    dk, dv = (
        fm.original_basis(
            fmt, fm.dequantize_rows(fmt, w, None if inline else s, cfg.head_dim, inline)
        )
        for w, s in ((kw, ks), (vw, vs))
    )
    side = None if inline else np.concatenate([ks, vs], axis=-1)
    return Encoded(kw, vw, side, dk, dv)


def _template(cfg: AttendConfig, rng: np.random.Generator, k, v, per_channel: bool) -> Encoded:
    bits, h, d = cfg.template_bits, cfg.kv_heads, cfg.head_dim
    n = h * d if per_channel else 1
    qmax = 2 ** (bits - 1) - 1
    k_scale, v_scale = (
        (rng.uniform(0.8, 1.0, n) * np.abs(x).max(initial=1.0) / qmax).astype(np.float32)
        for x in (k, v)
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


def random_cache(
    cfg: AttendConfig, shape: dict[str, int], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The bindings of a quantised cache of ``shape`` (``kvdsl inputs``): every row of the
    contiguous cache or of the pool's pages random values (:func:`kvdsl.reference.judge.values`)
    encoded (:func:`encode`), the side scales in the rows' order (a page's scale rows are in
    its layout, as its value rows are), the template's ``kv_scale`` per channel or not as
    ``perChannel`` says."""
    if cfg.kivi_bits is not None:
        return _random_kivi(cfg, shape, rng)
    if cfg.cache is CacheLayout.BNSH:
        lead = (shape["batch"], cfg.kv_heads, shape["seq"])
        names = ("key", "value", "scales")
    else:
        lead = (1, 1, shape["pages"] * cfg.page_size * cfg.kv_heads)
        names = ("key_pages", "value_pages", "scale_pages")
    k, v = (values(rng, lead + (cfg.head_dim,), np.float32) for _ in range(2))
    enc = encode(cfg, rng, k, v, bool(shape.get("perChannel", 1)))
    out = dict(enc.buffers)
    if cfg.pool is Pool.COMBINED and cfg.cache is CacheLayout.PAGED:
        pages = shape["pages"]
        both = np.stack([enc.key.reshape(pages, -1), enc.value.reshape(pages, -1)], axis=1)
        out["kv_pages"] = both.reshape(-1)
    else:
        out |= {names[0]: enc.key.reshape(-1), names[1]: enc.value.reshape(-1)}
    if enc.side is not None:
        out[names[2]] = enc.side.reshape(-1)
    return out


def _random_kivi(
    cfg: AttendConfig, shape: dict[str, int], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """A KIVI cache of ``shape``'s words at random: every word two finite f16 halves (the
    residuals' values and the stats' scales and minimums are such halves; any bits are
    codes)."""
    h, d, g = cfg.kv_heads, cfg.head_dim, cfg.kivi_group
    per = 32 // cfg.kivi_bits
    words = {n: shape["batch"] * h * g * d // 2 for n in ("residual_k", "residual_v")}
    if cfg.cache is CacheLayout.BNSH:
        words["kivi_cache"] = shape["batch"] * shape["groups"] * h * 2 * (d * g // per + d)
    else:
        words["kivi_pages"] = (
            shape["pages"] * h * kivi.page_words(d, cfg.kivi_bits, g, cfg.page_size)
        )
    return {
        n: rng.standard_normal(2 * w).astype(np.float16).view(np.uint32) for n, w in words.items()
    }


@dataclass
class KiviCache:
    """A KIVI cache of K and V ``[B, H, T, D]`` as ``kivi_append`` and ``kivi_flush`` leave it
    for sequences of ``lengths`` keys: its bindings, the shape variables and params it adds,
    and the values its keys decode to (f32 ``[B, H, T, D]``; past a sequence's length as
    given)."""

    buffers: dict[str, np.ndarray]
    shape: dict[str, int]
    params: dict[str, int]
    k: np.ndarray
    v: np.ndarray


def kivi_cache(
    cfg: AttendConfig,
    rng: np.random.Generator,
    k: np.ndarray,
    v: np.ndarray,
    lengths: np.ndarray,
    released: Callable[[int, int], bool] = lambda s, first: False,
) -> KiviCache:
    """``k`` and ``v`` ``[B, H, T, D]`` in KIVI's cache (:mod:`kvdsl.reference.kivi`'s layout):
    each sequence's first ``n - n % GROUP`` keys in groups, the rest in the f16 residual; words
    no group reaches and residual rows past a sequence's keys poisoned. Contiguous: a part of
    ``seq`` keys (a spare group past the longest at random) per (sequence, KV head). Paged:
    pages of ``page_size`` keys shuffled over a pool with spare pages, ``maxPages`` entries a
    sequence (one spare at random); a page ``released(sequence, first key)`` says is -1 in
    the table and never written."""
    b, h, _, d = k.shape
    g, bits = cfg.kivi_group, cfg.kivi_bits
    longest = int(max(lengths))
    caches = [
        [
            kivi.quantize(k[s, x, : int(lengths[s])], v[s, x, : int(lengths[s])], bits, g)
            for x in range(h)
        ]
        for s in range(b)
    ]
    residual = {n: poison((b * h, g, d // 2), np.uint32) for n in ("residual_k", "residual_v")}
    dk, dv = np.array(k, np.float32), np.array(v, np.float32)
    for s in range(b):
        n = int(lengths[s])
        for x, c in enumerate(caches[s]):
            left = n - c.quantised
            residual["residual_k"][s * h + x, :left] = c.k_residual.view(np.uint32)
            residual["residual_v"][s * h + x, :left] = c.v_residual.view(np.uint32)
            dk[s, x, :n], dv[s, x, :n] = kivi.dequantize(c)
    out = {name: a.reshape(-1) for name, a in residual.items()}
    if cfg.cache is CacheLayout.BNSH:
        groups = -(-longest // g) + int(rng.integers(0, 2))
        seq = groups * g
        cache = poison((b, h, kivi.page_words(d, bits, g, seq)), np.uint32)
        for s in range(b):
            kivi.write_pages(cache, np.array([s]), caches[s], seq)
        out["kivi_cache"] = cache.reshape(-1)
        return KiviCache(out, {"groups": groups}, {"seq": seq}, dk, dv)
    size = cfg.page_size
    owned = [-(-int(n) // size) for n in lengths]
    max_pages = max(owned) + int(rng.integers(0, 2))
    ids = rng.permutation(sum(owned) + int(rng.integers(1, 3)))
    table = np.full((b, max_pages), -1, np.int32)
    at = 0
    for s in range(b):
        for page in range(owned[s]):
            if not released(s, page * size):
                table[s, page], at = ids[at], at + 1
    pool = poison((len(ids), h, kivi.page_words(d, bits, g, size)), np.uint32)
    for s in range(b):
        kivi.write_pages(pool, table[s], caches[s], size)
    out |= {"page_table": table.reshape(-1), "kivi_pages": pool.reshape(-1)}
    return KiviCache(
        out, {"pages": len(ids), "maxPages": max_pages}, {"maxPages": max_pages}, dk, dv
    )
