"""Verification cases of ``kivi_append`` and ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`),
against :mod:`kvdsl.reference.kivi`: random non-zero rows (f16-exact, an offset and two large
channels), the outputs poisoned."""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator
from kvdsl.harness.compare import POISON_BITS
from kvdsl.kernels.kivi import KiviAppendConfig, KiviFlushConfig
from kvdsl.kernels.kivi_attend import KiviAttendConfig
from kvdsl.reference import kivi

F16, F32 = np.float16, np.float32
POISON = POISON_BITS[4]


def kivi_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random non-zero f16-exact rows ``[..., D]`` with an offset and two large channels."""
    x = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape) + 0.3
    x[..., 3] *= 40.0
    x[..., -7] *= 12.0
    return x.astype(F16).astype(F32)


def _poison(n: int) -> np.ndarray:
    return np.full(n, POISON, np.uint32)


def _halves(x: np.ndarray) -> np.ndarray:
    """f32 rows ``[..., D]`` as u32 words of f16 pairs ``[..., D / 2]``, the lower channel low."""
    return np.ascontiguousarray(x.astype(F16)).view(np.uint32)


def _stats(scale: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``pack2x16float(scale, min)`` words of f16 arrays."""
    return scale.view(np.uint16).astype(np.uint32) | (lo.view(np.uint16).astype(np.uint32) << 16)


@case_generator("kivi_append")
def kivi_append_case(cfg: KiviAppendConfig, rng: np.random.Generator, i: int) -> Case:
    h, d, g = cfg.kv_heads, cfg.head_dim, cfg.group
    batch = [1, 2, 3][i % 3]
    past = [0, int(rng.integers(1, g)), int(rng.integers(g, 4 * g))][i % 3]
    key_seq = int(rng.integers(1, g - past % g + 1))
    src_k, src_v = (kivi_rows(rng, (batch, key_seq, h, d)) for _ in range(2))
    expected, written = {}, {}
    for name, src in (("residual_k", src_k), ("residual_v", src_v)):
        res = np.full((batch, h, g, d // 2), POISON, np.uint32)
        rows = (past + np.arange(key_seq)) % g
        res[:, :, rows] = _halves(src.transpose(0, 2, 1, 3))
        expected[name] = res.reshape(-1)
        mask = np.zeros(res.shape, bool)
        mask[:, :, rows] = True
        written[name] = mask.reshape(-1)
    return Case(
        {"batch": batch, "keySeq": key_seq, "pastSeq": past},
        {
            "src_k": src_k.reshape(-1),
            "src_v": src_v.reshape(-1),
            "residual_k": _poison(batch * h * g * d // 2),
            "residual_v": _poison(batch * h * g * d // 2),
        },
        {"batchSize": batch, "keySeq": key_seq, "pastSeq": past},
        expected,
        written,
    )


@case_generator("kivi_flush")
def kivi_flush_case(cfg: KiviFlushConfig, rng: np.random.Generator, i: int) -> Case:
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, cfg.per
    batch = [1, 2, 1][i % 3]
    groups = [1, 3, 2][i % 3]
    seq = groups * g
    flush = int(rng.integers(0, groups))
    count = batch * h
    k, v = (kivi_rows(rng, (count, g, d)) for _ in range(2))
    out = {
        "k_codes": np.full((count, d, seq // per), POISON, np.uint32),
        "k_stats": np.full((count, d, seq // g), POISON, np.uint32),
        "v_codes": np.full((count, seq, d // per), POISON, np.uint32),
        "v_stats": np.full((count, seq, d // g), POISON, np.uint32),
    }
    expected = {name: a.copy() for name, a in out.items()}
    words = slice(flush * g // per, (flush + 1) * g // per)
    rows = slice(flush * g, (flush + 1) * g)
    for s in range(count):
        c = kivi.quantize(k[s], v[s], cfg.bits, g)
        expected["k_codes"][s, :, words] = c.k_codes
        expected["k_stats"][s, :, flush] = _stats(c.k_scale, c.k_min)[:, 0]
        expected["v_codes"][s, rows] = c.v_codes
        expected["v_stats"][s, rows] = _stats(c.v_scale, c.v_min)
    written = {name: (a != POISON).reshape(-1) for name, a in expected.items()}
    written["k_codes"] = np.zeros(out["k_codes"].shape, bool)
    written["k_codes"][:, :, words] = True
    written["v_codes"] = np.zeros(out["v_codes"].shape, bool)
    written["v_codes"][:, rows] = True
    written = {name: m.reshape(-1) for name, m in written.items()}
    bufs = {"residual_k": _halves(k).reshape(-1), "residual_v": _halves(v).reshape(-1)}
    bufs |= {name: a.reshape(-1) for name, a in out.items()}
    # The codes come from (x - min) * (1 / scale): a GPU's division may move one a step.
    codes = {"k_codes": cfg.bits, "v_codes": cfg.bits}
    return Case(
        {"batch": batch, "groups": groups, "flushGroup": flush},
        bufs,
        {"count": count, "seq": seq, "flushGroup": flush},
        {name: a.reshape(-1) for name, a in expected.items()},
        written,
        codes=codes,
    )


def attend_inputs(cfg: KiviAttendConfig, batch: int, total: int, seq: int, seed: int):
    """A KIVI cache of ``total`` tokens per slice laid out by the reference, a query per
    (sequence, query head), and attention in float64 over the cache the reference decodes."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, cfg.per
    rng = np.random.default_rng(seed)
    k = kivi_rows(rng, (batch * h, total, d)).reshape(batch * h, total, d)
    v = kivi_rows(rng, (batch * h, total, d)).reshape(batch * h, total, d)
    q = (
        rng.uniform(0.25, 2.0, (batch, cfg.q_heads, d))
        * rng.choice([-1, 1], (batch, cfg.q_heads, d))
    ).astype(F32)
    n = total - total % g
    bufs = {
        "query": q.reshape(-1),
        "residual_k": np.full((batch * h, g, d // 2), POISON, np.uint32),
        "residual_v": np.full((batch * h, g, d // 2), POISON, np.uint32),
        "k_codes": np.full((batch * h, d, seq // per), POISON, np.uint32),
        "k_stats": np.full((batch * h, d, seq // g), POISON, np.uint32),
        "v_codes": np.full((batch * h, seq, d // per), POISON, np.uint32),
        "v_stats": np.full((batch * h, seq, d // g), POISON, np.uint32),
        "output": np.full(q.size, POISON, np.uint32).view(F32),
    }
    scale = 1.0 / np.sqrt(d)
    want = np.zeros((batch, cfg.q_heads, d))
    for s in range(batch * h):
        c = kivi.quantize(k[s], v[s], cfg.bits, g)
        bufs["k_codes"][s, :, : n // per] = c.k_codes
        bufs["k_stats"][s, :, : n // g] = _stats(c.k_scale, c.k_min)
        bufs["v_codes"][s, :n] = c.v_codes
        bufs["v_stats"][s, :n] = _stats(c.v_scale, c.v_min)
        left = total - n
        bufs["residual_k"][s, :left] = c.k_residual.view(np.uint32)
        bufs["residual_v"][s, :left] = c.v_residual.view(np.uint32)
        back_k, back_v = (x.astype(np.float64) for x in kivi.dequantize(c))
        b, kv = divmod(s, h)
        for qh in range(kv * cfg.q_heads // h, (kv + 1) * cfg.q_heads // h):
            logit = back_k @ q[b, qh].astype(np.float64) * scale
            p = np.exp(logit - logit.max())
            want[b, qh] = p @ back_v / p.sum()
    bufs = {name: a.reshape(-1) for name, a in bufs.items()}
    return bufs, {"batch": batch, "total": total, "seq": seq, "scale": scale}, want.reshape(-1)


def _stats(scale: np.ndarray, lo: np.ndarray) -> np.ndarray:
    return scale.view(np.uint16).astype(np.uint32) | (lo.view(np.uint16).astype(np.uint32) << 16)


@case_generator("kivi_attend")
def kivi_attend_case(cfg: KiviAttendConfig, rng: np.random.Generator, i: int) -> Case:
    g = cfg.group
    batch = [1, 2, 1][i % 3]
    total = [int(rng.integers(1, g)), int(rng.integers(g, 3 * g)), 3 * g][i % 3]
    seq = -(-total // g) * g
    bufs, params, want = attend_inputs(cfg, batch, total, seq, int(rng.integers(1 << 30)))
    # The logits reach tens (K's large channel): a few ulps of an f32 logit move a weight, and
    # the output, by ~1e-5 relative; 1e-4 of 1 + |x| bounds it (attend's TOL is 5e-5 for
    # logits of a few units).
    return Case(
        {"batch": batch, "total": total, "groups": seq // g},
        bufs,
        params,
        {"output": want.astype(F32)},
        tolerance={"output": 1e-4},
    )
