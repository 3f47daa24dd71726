"""Verification cases of ``kivi_append`` and ``kivi_flush`` (:mod:`kvdsl.kernels.kivi`),
against :mod:`kvdsl.reference.kivi`: random non-zero rows (f16-exact, an offset and two large
channels), the outputs poisoned."""

from __future__ import annotations

import numpy as np

from kvdsl.harness.cases import Case, case_generator
from kvdsl.harness.compare import POISON_BITS
from kvdsl.kernels.kivi import KiviAppendConfig, KiviFlushConfig
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
