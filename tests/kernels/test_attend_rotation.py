"""``attend`` with Q rotated (``rotation``): over a cache whose K rows were rotated by the
signed Walsh-Hadamard matrix (:mod:`kvdsl.reference.rotation`), on the interpreter and the GPU
against the float64 reference; the rotation itself checked against attention over the cache
unrotated; planted bugs in the rotation fail; bad rotations are refused by name."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.harness.runner import verify_variant
from kvdsl.kernels.attend import AttendConfig, attend
from kvdsl.kernels.config import ConfigError
from kvdsl.reference.attention import attention
from kvdsl.reference.rotation import rotation
from kvdsl.runtime import run as gpu_run

CONFIGS = {
    "f32 whole head": dict(kv_heads=2, head_dim=64, q_heads=8, rotation=64),
    "f16 paged, blocks of 16, BSH": dict(
        kv_heads=2, head_dim=64, q_heads=4, max_queries=2, cache="paged", cache_type="f16",
        q_layout="bsh", q_type="f16", rotation=16,
    ),
    "f32 blocks of 4, sinks and a window": dict(
        kv_heads=1, head_dim=32, q_heads=2, sinks=True, sliding_window=True, rotation=4,
    ),
    "int8 whole head": dict(kv_heads=1, head_dim=64, q_heads=4, format="int8", rotation=64),
    "int4 paged HND, blocks of 32, side": dict(
        kv_heads=1, head_dim=64, q_heads=2, cache="paged", page_layout="hnd", format="int4",
        scales="side", rotation=32,
    ),
    "f16 paged HND, whole head of 128": dict(
        kv_heads=1, head_dim=128, q_heads=4, cache="paged", page_layout="hnd",
        cache_type="f16", rotation=128,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_a_rotating_attend_matches_the_reference_on_both_backends(name):
    cfg = AttendConfig(**CONFIGS[name])
    result = verify_variant(name, cfg, attend(cfg), n_cases=3)
    assert result.ok, "\n".join(result.problems)
    assert result.max_error > 0  # the outputs were compared, not skipped


def _rotated_cache_problem(seed: int = 0):
    """Q, K, V (K with a few large channels) and the f32 cache of K rotated, V as it is."""
    rng = np.random.default_rng(seed)
    b, hkv, hq, t, d = 2, 2, 8, 50, 64
    q = rng.standard_normal((b, hq, 1, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, t, d)).astype(np.float32)
    k[..., [3, 40]] *= 20.0
    v = rng.standard_normal((b, hkv, t, d)).astype(np.float32)
    rot = rotation(d)
    k_rot = rot.rotate(k.astype(np.float64)).astype(np.float32)
    lengths = np.array([t, 37])
    buffers = {
        "seqlens_k": (lengths - 1).astype(np.int32),
        "query": q.reshape(-1),
        "key": k_rot.reshape(-1),
        "value": v.reshape(-1),
        "output": np.full(b * hq * d, np.nan, np.float32),
        "partials": np.full(b * hq * (d + 4), np.nan, np.float32),
    }
    params = dict(batch=b, seq=t, queries=1, chunk=t, chunks=1, rowBlocks=1, scale=0.125)
    want = attention(q, k, v, lengths, scale=0.125)
    return AttendConfig(hkv, d, hq, rotation=d), buffers, params, want


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_attention_over_a_rotated_cache_is_attention_over_it_unrotated(backend):
    cfg, buffers, params, want = _rotated_cache_problem()
    run = interp.run if backend == "interp" else gpu_run
    got = run(attend(cfg), buffers, params)["output"].astype(np.float64).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # Without the rotation the same cache gives another answer.
    plain = run(attend(replace(cfg, rotation=0)), buffers, params)["output"]
    assert np.abs(plain.reshape(want.shape) - want).max() > 0.05


PLANTED = {
    "a stage's difference made a sum": ("qs[lo + 2u] = a - b;", "qs[lo + 2u] = a + b;"),
    "every sign +1": ("return select(1.0f, -1.0f,", "return select(1.0f, 1.0f,"),
    "no 1 / sqrt(block)": (" * 0.125f;", ";"),
    "the butterfly at distance 2 swapped": ("half.x - half.z, half.y - half.w", "half.y - half.w, half.x - half.z"),
}  # fmt: skip


@pytest.mark.parametrize("bug", PLANTED)
def test_planted_bugs_in_the_rotation_fail(bug):
    cfg, buffers, params, want = _rotated_cache_problem(seed=1)
    kernel = attend(cfg)
    source = emit(kernel)
    text, planted = PLANTED[bug]
    assert text in source
    bad = parse(source.replace(text, planted), "attend", dispatch=kernel.dispatch)
    bad = replace(bad, extents=kernel.extents, requires=kernel.requires)
    got = interp.run(bad, buffers, params)["output"].astype(np.float64).reshape(want.shape)
    assert np.abs(got - want).max() > 1e-3


@pytest.mark.parametrize(
    "fields,message",
    [
        (dict(rotation=48), "rotation=48: expected 0 (none) or a power of two, at least 4"),
        (dict(rotation=2), "rotation=2: expected 0 (none) or a power of two, at least 4"),
        (dict(rotation=128), "rotation=128: expected 0 (none) or a power of two dividing head_dim (64)"),
        (dict(rotation=64, format="template_int8"), "rotation=64: expected 0 (unset) for format 'template_int8'"),
    ],
)  # fmt: skip
def test_a_rotation_it_cannot_do_is_refused_by_name(fields, message):
    with pytest.raises(ConfigError) as err:
        AttendConfig(**({"kv_heads": 2, "head_dim": 64, "q_heads": 8} | fields))
    assert message in str(err.value)
