"""The fused ``qkv`` and ``paged_qkv`` kernels into a dense format with K Walsh-Hadamard rotated
after its norm and rotary, before it is quantised (``rotation``): against the reference
(:mod:`kvdsl.reference.rotation` after the norm and rotary) on the interpreter, the GPU against
the interpreter, and against the unfused chain (``dense_append``/``paged_append`` with the same
``rotation``); Q and V as they are; the cache (contiguous, or pages through a page table) read
back by ``attend`` with the same rotation gives attention over K and V unrotated, nearer than
the unrotated cache does on K with large channels; a rotation an f32 or f16 cache cannot take
is refused by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.harness import cases_for, verify_variant
from kvdsl.harness.qkv import unfused
from kvdsl.harness.qkv_paged import unfused as paged_unfused
from kvdsl.kernels.attend import AttendConfig, attend
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.qkv import QkvConfig, qkv
from kvdsl.kernels.qkv_paged import PagedQkvConfig
from kvdsl.reference import formats as fm
from kvdsl.reference.attention import attention
from kvdsl.reference.qkv import project
from kvdsl.reference.rotation import rotation
from kvdsl.runtime import run as gpu_run
from tests.helpers.attend import attend_decode
from tests.helpers.cache_kernels import assert_same_bits, bits, fused_and_chained

#: Contiguous caches: int8, int4 and q4_0 (its blocks of 32 fit either rotation), the
#: head's whole block and blocks of 32, with the norms, rotary (whole and partial), the bias,
#: side scales, the quantiser's walks, partners staged and K and V in one invocation.
CONTIGUOUS = {
    "int8, blocks of 32": QkvConfig(2, 64, q_heads=4, format="int8", rotation=32),
    "int8, whole head, norms and rotary": QkvConfig(
        2, 64, q_heads=4, q_norm=True, k_norm=True, rotary=True, format="int8", rotation=64
    ),
    "int4, whole head, rotary and bias": QkvConfig(
        2, 64, q_heads=4, rotary=True, bias=True, format="int4", rotation=64
    ),
    "int4, blocks of 32, partial rotary, side scales": QkvConfig(
        1, 64, q_heads=2, rotary=True, rotary_half=16, format="int4", scales="side", rotation=32
    ),
    "q4_0, blocks of 32, K and V in one invocation": QkvConfig(
        2, 64, q_heads=4, rotary=True, k_norm=True, format="q4_0", split=False, rotation=32
    ),
    "int4 strided, partners staged, K normed, blocks of 32": QkvConfig(
        2,
        64,
        q_heads=4,
        k_norm=True,
        rotary=True,
        format="int4",
        walk="strided",
        pair_loads=False,
        rotation=32,
    ),
    "q4_0, whole head, pair loads": QkvConfig(
        1, 64, q_heads=2, rotary=True, format="q4_0", pair_loads=True, rotation=64
    ),
}

#: Paged caches: both addressings, NHD and HND, inline and side scales.
PAGED = {
    "int8 slots, blocks of 32": PagedQkvConfig(
        2, 64, q_heads=4, rotary=True, format="int8", rotation=32
    ),
    "int4 page table HND, whole head, norms": PagedQkvConfig(
        2,
        64,
        q_heads=4,
        q_norm=True,
        k_norm=True,
        rotary=True,
        format="int4",
        addressing="page_table",
        page_layout="hnd",
        rotation=64,
    ),
    "int4 side scales, blocks of 32": PagedQkvConfig(
        1, 64, q_heads=2, rotary=True, format="int4", scales="side", rotation=32
    ),
    "q4_0 page table, whole head": PagedQkvConfig(
        2, 64, q_heads=4, rotary=True, format="q4_0", addressing="page_table", rotation=64
    ),
}


@pytest.mark.parametrize("name", [*CONTIGUOUS, *PAGED])
def test_a_rotating_qkv_matches_the_reference_on_both_backends(name):
    """Contiguous (``qkv``) and paged (``paged_qkv``) caches alike."""
    cfg = (CONTIGUOUS | PAGED)[name]
    result = verify_variant(name, cfg, qkv(cfg), n_cases=3, seed=7)
    assert result.ok, "\n".join(result.problems)
    assert result.unsupported is None


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize(
    "name",
    ["int8, blocks of 32", "int4, whole head, rotary and bias", "q4_0, whole head, pair loads"]
    + ["int8 slots, blocks of 32", "q4_0 page table, whole head"],
)
def test_fused_equals_the_unfused_chain(name, backend):
    """The fused kernel's Q and cache equal, bit for bit, the unfused chain's, whose append
    (``dense_append``, ``paged_append``) rotates K after the split and the ``build`` steps'
    norm and rotary."""
    cfg = CONTIGUOUS.get(name) or PAGED[name]
    chain = unfused if cfg.mode == "qkv" else paged_unfused
    run = interp.run if backend == "interp" else gpu_run
    for case, fused, chained in fused_and_chained(cfg, qkv(cfg), chain, run):
        for out in fused:
            assert_same_bits(case, out, fused[out], chained[out])


@pytest.mark.parametrize(
    "name", ["int4, whole head, rotary and bias", "int4 side scales, blocks of 32"]
)
def test_the_kernel_rotates_k_and_leaves_q_and_v(name):
    """The same inputs with and without the rotation: the same Q and V, another K."""
    cfg = CONTIGUOUS.get(name) or PAGED[name]
    plain_cfg = dataclasses.replace(cfg, rotation=0)
    for case in cases_for(cfg, 2, seed=3):
        rotated = interp.run(qkv(cfg), dict(case.buffers), case.params)
        plain = interp.run(qkv(plain_cfg), dict(case.buffers), case.params)
        k_name = "present_key" if "present_key" in rotated else "key_pages"
        v_name = "present_value" if "present_value" in rotated else "value_pages"
        np.testing.assert_array_equal(bits(plain["q_out"]), bits(rotated["q_out"]))
        np.testing.assert_array_equal(plain[v_name], rotated[v_name])
        assert not np.array_equal(plain[k_name], rotated[k_name])


def _qkv_write(cfg: QkvConfig, x: np.ndarray, run) -> tuple[np.ndarray, dict]:
    """``x`` ``[B, S, (Hq + 2 Hkv) * D]`` through the fused kernel into a cache of ``S`` rows
    (``seqlens_k = S - 1``): Q ``[B, Hq, S, D]`` and the cache's bindings."""
    b, s = x.shape[:2]
    d, hq, hkv = cfg.head_dim, cfg.q_heads, cfg.kv_heads
    rows = b * hkv * s * cfg.row_words
    bufs = {
        "qkv": x.reshape(-1),
        "seqlens_k": np.full(b, s - 1, np.int32),
        "q_out": np.full(b * hq * s * d, np.nan, np.float32),
        "present_key": np.full(rows, 0xFFFFFFFF, np.uint32),
        "present_value": np.full(rows, 0xFFFFFFFF, np.uint32),
    }
    params = {"count": b * s * cfg.rows, "keySeq": s, "seq": s}
    got = run(qkv(cfg), bufs, params)
    return got["q_out"].reshape(b, hq, s, d), got


def _error_over_the_stored_rows(got, want, q, rows: list, block: int) -> float:
    """Asserts ``got`` is float64 attention of ``q`` over the cache's dequantised ``rows`` (K, V
    ``[B, H, S, D]``; K unrotated by blocks of ``block``, 0: none); its error against ``want``."""
    if block:
        rows[0] = rotation(rows[0].shape[-1], block).unrotate(rows[0])
    s = rows[0].shape[2]
    stored = attention(q, *rows, np.array([s]), scale=0.125)
    np.testing.assert_allclose(got, stored, rtol=1e-4, atol=1e-4)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_the_rotated_cache_read_by_attend_is_attention_over_it_unrotated(fmt, backend):
    """Q written by the fused kernel (unrotated) and its rotated cache, read by ``attend`` with
    the same rotation (Q rotated as it loads): float64 attention over the cache's rows
    dequantised and unrotated, and against float64 attention over the projection's Q, K and V
    within the unrotated cache's error (well within it where K has large channels)."""
    run = interp.run if backend == "interp" else gpu_run
    rng = np.random.default_rng(5)
    b, hkv, hq, s, d = 1, 2, 8, 24, 64
    heads = hq + 2 * hkv
    x = rng.standard_normal((b, s, heads, d)).astype(np.float32)
    x[:, :, hq : hq + hkv, [5, 40]] *= 30.0  # large channels, as K has
    x = x.reshape(b, s, heads * d)
    q, k, v = project(x, np.zeros((b, s), np.int64), hq, hkv)
    want = attention(q[:, :, -1:], k, v, np.array([s]), scale=0.125)
    errors = {}
    for block in (0, 32, 64):
        cfg = QkvConfig(hkv, d, q_heads=hq, format=fmt, rotation=block)
        q_out, cache = _qkv_write(cfg, x, run)
        np.testing.assert_array_equal(q_out, q)  # Q as it is, whatever the rotation
        reader = AttendConfig(hkv, d, hq, format=fmt, rotation=block)
        got = attend_decode(run, reader, q_out[:, :, -1:], cache, b, s).reshape(want.shape)
        rows = [
            fm.dequantize_rows(fmt, cache[n].reshape(b, hkv, s, -1), None, d).astype(np.float64)
            for n in ("present_key", "present_value")
        ]
        errors[block] = _error_over_the_stored_rows(got, want, q[:, :, -1:], rows, block)
    # The large channels stretch the unrotated rows' scale; the rotation spreads them over a
    # block (blocks of 32: each holds one of them, the whole head both).
    assert 0 < errors[64] < 0.6 * errors[0], errors
    assert 0 < errors[32] < errors[0], errors
    if fmt == "int8":
        assert max(errors[32], errors[64]) < 0.02, errors


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_attend_over_the_pages_paged_qkv_rotated_is_attention_over_them_unrotated(backend):
    """``paged_qkv`` into int4 pages through a shuffled page table, Q and the pages read by
    ``attend`` over the same table with the same rotation: float64 attention over the pages'
    rows dequantised and unrotated, nearer the projection's attention than unrotated pages."""
    run = interp.run if backend == "interp" else gpu_run
    rng = np.random.default_rng(9)
    hkv, hq, s, d, p = 2, 4, 24, 64, 16
    heads = hq + 2 * hkv
    x = rng.standard_normal((1, s, heads, d)).astype(np.float32)
    x[:, :, hq : hq + hkv, [3, 50]] *= 30.0  # large channels, as K has
    x = x.reshape(1, s, heads * d)
    q, k, v = project(x, np.zeros((1, s), np.int64), hq, hkv)
    want = attention(q[:, :, -1:], k, v, np.array([s]), scale=0.125)
    pages, table = 4, rng.permutation(4)[:2].astype(np.int32)  # two pages hold the 24 tokens
    errors = {}
    for block in (0, 64):
        cfg = PagedQkvConfig(
            hkv, d, q_heads=hq, format="int4", addressing="page_table", rotation=block
        )
        words = pages * p * hkv * cfg.row_words
        bufs = {
            "qkv": x.reshape(-1),
            "seqlens_k": np.full(1, s - 1, np.int32),
            "page_table": table,
            "q_out": np.full(hq * s * d, np.nan, np.float32),
            "key_pages": np.full(words, 0xFFFFFFFF, np.uint32),
            "value_pages": np.full(words, 0xFFFFFFFF, np.uint32),
        }
        params = {"count": s * cfg.rows, "keySeq": s, "maxPages": len(table)}
        out = run(qkv(cfg), bufs, params)
        q_out = out["q_out"].reshape(1, hq, s, d)
        reader = AttendConfig(hkv, d, hq, cache="paged", format="int4", rotation=block)
        bufs = {
            "seqlens_k": np.full(1, s - 1, np.int32),
            "query": np.ascontiguousarray(q_out[:, :, -1:]).reshape(-1),
            "page_table": table,
            "key_pages": out["key_pages"],
            "value_pages": out["value_pages"],
            "output": np.full(hq * d, np.nan, np.float32),
            "partials": np.full(hq * (d + 4), np.nan, np.float32),
        }
        params = dict(batch=1, maxPages=len(table), queries=1, chunk=s, chunks=1, rowBlocks=1)
        got = run(attend(reader), bufs, params | {"scale": 0.125})["output"]
        got = got.reshape(want.shape)
        rows = []
        for name in ("key_pages", "value_pages"):
            pool = out[name].reshape(pages, p, hkv, -1)  # NHD
            at = [pool[table[t // p], t % p] for t in range(s)]  # [S][H, W]
            stored = np.stack(at, axis=1)[None]  # [1, H, S, W]
            rows.append(fm.dequantize_rows("int4", stored, None, d).astype(np.float64))
        errors[block] = _error_over_the_stored_rows(got, want, q[:, :, -1:], rows, block)
    assert 0 < errors[64] < 0.6 * errors[0], errors


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"rotation": 64}, "rotation=64: expected 0 (unset) without a format"),
        ({"rotation": 32, "present_type": "f16"}, "rotation=32: expected 0 (unset) without a"),
        ({"format": "int8", "rotation": 48}, "rotation=48: expected 0 (none) or a power of two"),
        (
            {"format": "int4", "rotation": 128},
            "rotation=128: expected 0 (none) or a power of two dividing head_dim (64)",
        ),
    ],
)
@pytest.mark.parametrize("cls", [QkvConfig, PagedQkvConfig])
def test_a_rotation_it_cannot_do_is_refused_by_name(cls, fields, message):
    with pytest.raises(ConfigError) as err:
        cls(2, 64, q_heads=4, **fields)
    assert message in str(err.value)
