"""``dense_append``, ``dense_build`` and ``paged_append`` (a dense format) with K Walsh-Hadamard
rotated before it is quantised (``rotation``): against the reference (:mod:`kvdsl.reference.rotation` after the norm and rotary)
on the interpreter and the GPU; the cache it writes read back by ``attend`` with the same
rotation gives attention over the cache unrotated, nearer than an unrotated int8 cache does on
K with large channels; the row's lanes rotate it together (each loads what the unrotated
writer loads: its own vectors, not the whole row), 32 lanes a row too; a bad rotation is
refused by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.harness import cases_for
from kvdsl.harness.runner import verify_variant
from kvdsl.kernels.attend import AttendConfig
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import DenseAppendConfig, DenseBuildConfig, dense_append, dense_build
from kvdsl.kernels.paged import PagedAppendConfig
from kvdsl.kernels.paged_append import paged_append
from kvdsl.reference.attention import attention
from kvdsl.runtime import run as gpu_run
from tests.helpers.attend import attend_decode

CONFIGS = {
    "int8": dict(format="int8", rotation=64),
    "int4, K normed and rotary, blocks of 32": dict(
        format="int4", rotary=True, k_norm=True, rotation=32
    ),
    "q4_0 with rotary, K and V in one invocation": dict(
        format="q4_0", rotary=True, split=False, rotation=64
    ),
    "int4_asym, side scales": dict(format="int4_asym", scales="side", rotation=64),
}
MODES = {"dense_append": (DenseAppendConfig, dense_append), "dense_build": (DenseBuildConfig, dense_build)}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", CONFIGS)
def test_a_rotating_writer_matches_the_reference_on_both_backends(mode, name):
    cls, build = MODES[mode]
    cfg = cls(kv_heads=2, head_dim=64, **CONFIGS[name])
    result = verify_variant(name, cfg, build(cfg), n_cases=2)
    assert result.ok, "\n".join(result.problems)
    assert result.shapes


PAGED = {
    "int4 HND pages, rotary, blocks of 32": dict(
        format="int4", rotary=True, page_layout="hnd", rotation=32
    ),
    "int8 K normed, blocks of 16": dict(format="int8", k_norm=True, rotation=16),
    "q4_0 page table, rotary": dict(
        format="q4_0", rotary=True, addressing="page_table", rotation=64
    ),
    "int4_asym side scales": dict(format="int4_asym", scales="side", rotation=64),
}


@pytest.mark.parametrize("name", PAGED)
def test_a_rotating_paged_append_matches_the_reference_on_both_backends(name):
    cfg = PagedAppendConfig(kv_heads=2, head_dim=64, page_size=16, **PAGED[name])
    result = verify_variant(name, cfg, paged_append(cfg), n_cases=2)
    assert result.ok, "\n".join(result.problems)


def test_lanes_wider_than_a_subgroup_rotate_their_row_together():
    """32 lanes a row (one vector each), wider than llvmpipe's subgroups of 8: the rotation's
    stages pair lanes up to 16 apart through workgroup memory."""
    cfg = DenseAppendConfig(kv_heads=2, head_dim=128, format="int8", run=1, rotation=128)
    assert cfg.row_lanes == 32
    result = verify_variant("int8, a vector a lane", cfg, dense_append(cfg), n_cases=2)
    assert result.ok, "\n".join(result.problems)


ROTATED = sorted(n for n in catalog.VARIANTS if "rotation" in n and n.startswith("dense_"))


@pytest.mark.parametrize("name", ROTATED)
def test_a_rotated_writer_loads_what_the_unrotated_one_does(name):
    """The catalog's rotated writers load each input vector as often as the same kernel
    unrotated: a lane its own vectors (and rotary's partners), never the whole row again."""
    cfg = catalog.config(name)
    plain = dataclasses.replace(cfg, rotation=0, walk=cfg.walk)
    loaded = {}
    for c in (cfg, plain):
        kernel = catalog.build_config(c)
        case = cases_for(c, 1, seed=2)[0]
        counted: dict[str, list[int]] = {}
        interp.run(kernel, dict(case.buffers), case.params, accesses=counted)
        loaded[c.rotation] = (counted["src_k"], counted["src_v"])
    assert loaded[cfg.rotation] == loaded[0]
    assert loaded[0][0][0] > 0


def test_f32_pages_refuse_a_rotation():
    with pytest.raises(ConfigError) as err:
        PagedAppendConfig(kv_heads=2, head_dim=64, page_size=16, rotation=64)
    assert "rotation=64: expected 0 (unset) without a format" in str(err.value)


def _write(cfg: DenseAppendConfig, k: np.ndarray, v: np.ndarray, backend) -> dict:
    """K, V ``[B, Hkv, T, D]`` appended at rows 0 .. by ``dense_append`` (``backend``)."""
    b, h, t, d = k.shape
    rw = cfg.fmt.row_words(d, cfg.inline)
    bufs = {
        "src_k": np.ascontiguousarray(k.transpose(0, 2, 1, 3)).reshape(-1),
        "src_v": np.ascontiguousarray(v.transpose(0, 2, 1, 3)).reshape(-1),
        "seqlens_k": np.full(b, t - 1, np.int32),
        "present_key": np.full(b * h * t * rw, 0xFFFFFFFF, np.uint32),
        "present_value": np.full(b * h * t * rw, 0xFFFFFFFF, np.uint32),
    }
    return backend(dense_append(cfg), bufs, {"count": b * h * t, "keySeq": t, "seq": t})


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_the_rotated_cache_read_by_attend_is_attention_over_it_unrotated(backend):
    run = interp.run if backend == "interp" else gpu_run
    rng = np.random.default_rng(5)
    b, h, hq, t, d = 1, 2, 8, 40, 64
    k = rng.standard_normal((b, h, t, d)).astype(np.float32)
    k[..., [5, 33]] *= 30.0  # large channels, as K has
    v = rng.standard_normal((b, h, t, d)).astype(np.float32)
    q = rng.standard_normal((b, hq, 1, d)).astype(np.float32)
    want = attention(q, k, v, np.array([t]), scale=0.125)
    errors = {}
    for block in (0, 64):
        cache = _write(DenseAppendConfig(h, d, format="int8", rotation=block), k, v, run)
        reader = AttendConfig(h, d, hq, format="int8", rotation=block)
        got = attend_decode(run, reader, q, cache, b, t).reshape(want.shape)
        errors[block] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    # int8 of the rotated rows is close; the large channels stretch the unrotated rows' scale.
    assert 0 < errors[64] < 0.02
    assert errors[64] < 0.5 * errors[0]


def test_the_writer_rotates_k_and_leaves_v():
    rng = np.random.default_rng(1)
    k = rng.standard_normal((1, 2, 8, 64)).astype(np.float32) + 0.5
    v = rng.standard_normal((1, 2, 8, 64)).astype(np.float32) - 0.5
    plain = _write(DenseAppendConfig(2, 64, format="int8"), k, v, interp.run)
    rotated = _write(DenseAppendConfig(2, 64, format="int8", rotation=64), k, v, interp.run)
    assert not np.array_equal(plain["present_key"], rotated["present_key"])
    np.testing.assert_array_equal(plain["present_value"], rotated["present_value"])


@pytest.mark.parametrize(
    "rotation,message",
    [
        (48, "rotation=48: expected 0 (none) or a power of two, at least 4"),
        (128, "rotation=128: expected 0 (none) or a power of two dividing head_dim (64)"),
    ],
)
def test_a_rotation_it_cannot_do_is_refused_by_name(rotation, message):
    with pytest.raises(ConfigError) as err:
        DenseAppendConfig(2, 64, format="int8", rotation=rotation)
    assert message in str(err.value)
