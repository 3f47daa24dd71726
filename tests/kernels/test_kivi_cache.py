"""KIVI's cache written by kvdsl's kernels (kvdsl.kernels.kivi): tokens appended into the f16
residual in chunks, each full residual flushed into 2-bit (or 4-bit) K-per-channel and
V-per-token codes, against kvdsl.reference.kivi bit for bit on the interpreter; the GPU
(llvmpipe) against the interpreter; the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.harness.compare import POISON_BITS
from kvdsl.harness.kivi import attend_inputs, kivi_rows
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.kivi import KiviAppendConfig, KiviFlushConfig, kivi_append, kivi_flush
from kvdsl.kernels.kivi_attend import KiviAttendConfig, kivi_attend
from kvdsl.reference import kivi
from kvdsl.runtime import run as gpu_run

F32, F16 = np.float32, np.float16
POISON = POISON_BITS[4]


def seeded_rows(n: int, d: int, seed: int) -> np.ndarray:
    """f16-exact rows [n, d]: Gaussian with an offset, two large channels (as K has), some
    rows scaled by 1e2 or 1e-2."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) + 0.3
    x[:, [3, d - 7]] *= rng.uniform(10, 50, 2)
    x[0::7] *= 1e2
    x[1::7] *= 1e-2
    return x.astype(F16).astype(F32)


def cache_of(cfg, batch: int, seq: int, chunks: list[int], run, seed: int = 5):
    """Append ``sum(chunks)`` tokens of ``batch`` sequences chunk by chunk through ``run``,
    flushing each full residual; returns the rows ``[B, H, T, D]`` and the final buffers."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, 32 // cfg.bits
    total = sum(chunks)
    k = seeded_rows(batch * total * h, d, seed).reshape(batch, total, h, d)
    v = seeded_rows(batch * total * h, d, seed + 1).reshape(batch, total, h, d)
    count = batch * h
    append = kivi_append(KiviAppendConfig(h, d, bits=cfg.bits, group=g))
    flush = kivi_flush(KiviFlushConfig(h, d, bits=cfg.bits, group=g))

    def poison(n: int) -> np.ndarray:
        return np.full(n, POISON, np.uint32)

    bufs = {
        "residual_k": poison(count * g * d // 2),
        "residual_v": poison(count * g * d // 2),
        "k_codes": poison(count * d * seq // per),
        "k_stats": poison(count * d * seq // g),
        "v_codes": poison(count * seq * d // per),
        "v_stats": poison(count * seq * d // g),
    }
    past = 0
    for n in chunks:
        src = {
            "src_k": np.ascontiguousarray(k[:, past : past + n]).reshape(-1),
            "src_v": np.ascontiguousarray(v[:, past : past + n]).reshape(-1),
            "residual_k": bufs["residual_k"],
            "residual_v": bufs["residual_v"],
        }
        params = {"batchSize": batch, "keySeq": n, "pastSeq": past}
        bufs |= {k_: w for k_, w in run(append, src, params).items() if k_.startswith("residual")}
        past += n
        if past % g == 0:
            params = {"count": count, "seq": seq, "flushGroup": past // g - 1}
            bufs |= run(flush, bufs, params)
    rows_k = k.transpose(0, 2, 1, 3)  # [B, H, T, D]
    rows_v = v.transpose(0, 2, 1, 3)
    return rows_k, rows_v, bufs


def unpack_stats(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    halves = np.stack([words & 0xFFFF, words >> 16]).astype(np.uint16).view(F16)
    return halves[0], halves[1]


def check_against_reference(cfg, batch, seq, rows_k, rows_v, bufs) -> None:
    """Every slice's quantised groups and residual equal kvdsl.reference.kivi's, bit for bit."""
    h, d, g, per = cfg.kv_heads, cfg.head_dim, cfg.group, 32 // cfg.bits
    total = rows_k.shape[2]
    n = total - total % g
    kc = bufs["k_codes"].reshape(batch, h, d, seq // per)
    ks, km = unpack_stats(bufs["k_stats"].reshape(batch, h, d, seq // g))
    vc = bufs["v_codes"].reshape(batch, h, seq, d // per)
    vs, vm = unpack_stats(bufs["v_stats"].reshape(batch, h, seq, d // g))
    res_k = bufs["residual_k"].view(F16).reshape(batch, h, g, d)
    res_v = bufs["residual_v"].view(F16).reshape(batch, h, g, d)
    for b in range(batch):
        for head in range(h):
            want = kivi.quantize(rows_k[b, head], rows_v[b, head], cfg.bits, g)
            at = f"batch {b} head {head}"
            assert np.array_equal(kc[b, head, :, : n // per], want.k_codes), at
            assert np.array_equal(
                ks[b, head, :, : n // g].view(np.uint16), want.k_scale.view(np.uint16)
            ), at
            assert np.array_equal(
                km[b, head, :, : n // g].view(np.uint16), want.k_min.view(np.uint16)
            ), at
            assert np.array_equal(vc[b, head, :n], want.v_codes), at
            assert np.array_equal(vs[b, head, :n].view(np.uint16), want.v_scale.view(np.uint16)), at
            assert np.array_equal(vm[b, head, :n].view(np.uint16), want.v_min.view(np.uint16)), at
            left = total - n
            assert np.array_equal(res_k[b, head, :left], want.k_residual), at
            assert np.array_equal(res_v[b, head, :left], want.v_residual), at
    # The groups not yet written keep their poison.
    assert np.all(kc[..., n // per :] == POISON) and np.all(vc[:, :, n:] == POISON)


CASES = {
    "2bit-g32": (KiviFlushConfig(2, 64, group=32), [5, 27, 32, 1, 13, 18, 3]),
    "2bit-g64": (KiviFlushConfig(2, 128, group=64), [64, 40, 24, 7]),
    "4bit-g32": (KiviFlushConfig(1, 64, bits=4, group=32), [32, 20, 12, 9]),
}


@pytest.mark.parametrize("case", CASES)
def test_the_interpreter_writes_the_references_bytes(case):
    cfg, chunks = CASES[case]
    seq = 4 * cfg.group
    rows_k, rows_v, bufs = cache_of(cfg, 2, seq, chunks, interp.run)
    check_against_reference(cfg, 2, seq, rows_k, rows_v, bufs)


def test_the_gpu_writes_the_interpreters_bytes(gpu):
    cfg, chunks = CASES["2bit-g32"]
    seq = 4 * cfg.group
    _, _, want = cache_of(cfg, 2, seq, chunks, interp.run)
    _, _, got = cache_of(cfg, 2, seq, chunks, gpu_run)
    for name in ("residual_k", "residual_v", "k_stats", "v_stats"):
        assert np.array_equal(got[name], want[name]), name
    # A code may move one step where (x - min) / scale lies on a half to an ulp (a GPU's
    # division or fma); none does on llvmpipe, at most 1 in 1,000 codes elsewhere.
    for name in ("k_codes", "v_codes"):
        g_codes = (got[name][:, None] >> (np.arange(16, dtype=np.uint32) * 2)) & 3
        w_codes = (want[name][:, None] >> (np.arange(16, dtype=np.uint32) * 2)) & 3
        step = np.abs(g_codes.astype(np.int64) - w_codes.astype(np.int64))
        assert step.max() <= 1 and (step > 0).sum() <= g_codes.size // 1000, name


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"bits": 3}, "bits"),
        ({"group": 24}, "group"),
        ({"head_dim": 96, "group": 64}, "head_dim"),
        ({"window": True}, "window"),
    ],
)
def test_a_kivi_layout_it_cannot_write_is_refused(fields, message):
    args = {"kv_heads": 2, "head_dim": 64, "group": 32} | fields
    with pytest.raises(ConfigError, match=message):
        KiviFlushConfig(**args)


ATTENDS = {
    "2bit-g32-mixed": (KiviAttendConfig(2, 64, q_heads=4, group=32), 2, 101, 128),
    "2bit-g64-residual-only": (KiviAttendConfig(2, 64, q_heads=2, group=64), 1, 40, 64),
    "2bit-g32-no-residual": (KiviAttendConfig(1, 64, q_heads=3, group=32), 2, 96, 128),
    "4bit-g32-long": (KiviAttendConfig(2, 64, q_heads=4, bits=4, group=32), 1, 300, 320),
}


@pytest.mark.parametrize("case", ATTENDS)
def test_attention_over_the_mixed_cache_is_the_references(case):
    cfg, batch, total, seq = ATTENDS[case]
    bufs, params, want = attend_inputs(cfg, batch, total, seq, 11)
    got = interp.run(kivi_attend(cfg), bufs, params)["output"]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


def test_the_gpu_attends_as_the_interpreter_does(gpu):
    cfg, batch, total, seq = ATTENDS["2bit-g32-mixed"]
    bufs, params, want = attend_inputs(cfg, batch, total, seq, 12)
    kernel = kivi_attend(cfg)
    got = gpu_run(kernel, bufs, params)["output"]
    np.testing.assert_allclose(
        got, interp.run(kernel, bufs, params)["output"], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


def test_a_session_of_1000_decode_steps_on_the_gpu(gpu):
    """A prompt of 37 tokens, then 1,000 decode steps of one token each, every kernel on the
    GPU: append, a flush whenever the residual fills, attention of the step's query. After every
    step the cache's bytes are the reference's of every token so far, and the attention output
    is float64 attention over the cache the reference decodes."""
    h, qh, d, g, batch = 2, 4, 64, 32, 2
    steps, prompt = 1000, 37
    total = prompt + steps
    seq = -(-total // g) * g
    per = 16
    append = kivi_append(KiviAppendConfig(h, d, group=g))
    flush = kivi_flush(KiviFlushConfig(h, d, group=g))
    attend = kivi_attend(KiviAttendConfig(h, d, q_heads=qh, group=g))
    rng = np.random.default_rng(21)
    k, v = (kivi_rows(rng, (batch, total, h, d)) for _ in range(2))
    q = rng.uniform(0.25, 2.0, (total, batch, qh, d)) * rng.choice([-1, 1], (total, batch, qh, d))
    q = q.astype(F32)
    count = batch * h
    cache = {
        "residual_k": np.full(count * g * d // 2, POISON, np.uint32),
        "residual_v": np.full(count * g * d // 2, POISON, np.uint32),
        "k_codes": np.full(count * d * seq // per, POISON, np.uint32),
        "k_stats": np.full(count * d * seq // g, POISON, np.uint32),
        "v_codes": np.full(count * seq * d // per, POISON, np.uint32),
        "v_stats": np.full(count * seq * d // g, POISON, np.uint32),
    }
    scale = 1.0 / np.sqrt(d)
    rows_k, rows_v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    mismatches, past, worst = 0, 0, 0.0
    for n in [prompt] + [1] * steps:
        done = 0
        while done < n:  # the prompt in pieces that fill the residual, each then flushed
            m = min(n - done, g - (past + done) % g)
            piece = {
                name: np.ascontiguousarray(x[:, past + done : past + done + m]).reshape(-1)
                for name, x in (("src_k", k), ("src_v", v))
            }
            params = {"batchSize": batch, "keySeq": m, "pastSeq": past + done}
            cache |= gpu_run(
                append, piece | {n_: cache[n_] for n_ in ("residual_k", "residual_v")}, params
            )
            done += m
            if (past + done) % g == 0:
                fl = {"count": count, "seq": seq, "flushGroup": (past + done) // g - 1}
                cache |= gpu_run(flush, cache, fl)
        past += n
        step_q = q[past - 1]
        bufs = cache | {
            "query": step_q.reshape(-1),
            "output": np.full(step_q.size, POISON, np.uint32).view(F32),
        }
        out = gpu_run(attend, bufs, {"batch": batch, "total": past, "seq": seq, "scale": scale})
        got = out["output"].reshape(batch, qh, d)
        for b in range(batch):
            for kv in range(h):
                c = kivi.quantize(rows_k[b, kv, :past], rows_v[b, kv, :past], 2, g)
                back_k, back_v = (x.astype(np.float64) for x in kivi.dequantize(c))
                for head in range(kv * qh // h, (kv + 1) * qh // h):
                    logit = back_k @ step_q[b, head].astype(np.float64) * scale
                    p = np.exp(logit - logit.max())
                    want = p @ back_v / p.sum()
                    ok = np.abs(got[b, head] - want) <= 1e-4 * (1 + np.abs(want))
                    mismatches += int((~ok).sum())
                    worst = max(
                        worst, float(np.max(np.abs(got[b, head] - want) / (1 + np.abs(want))))
                    )
    check_against_reference(KiviFlushConfig(h, d, group=g), batch, seq, rows_k, rows_v, cache)
    assert mismatches == 0, worst
