"""``build``: every sub-option on the interpreter and the GPU against the reference, and parity
with the legacy template on the GPU.

Inputs are random and never zero; outputs are poisoned with NaN. Without K RMSNorm and rotary the
kernel only moves (and converts) values, so results must be bit-exact. With them, the GPU's
approximate ``inverseSqrt`` (and any FMA contraction) and the interpreter's in-order sum of squares
(numpy sums pairwise) differ from the reference by a few ulp: compared with ``rtol=1e-5``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from kvdsl import interp, reference as ref, runtime
from kvdsl.ir import f16
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.config import ConfigError
from tests.helpers import legacy

BACKENDS = [pytest.param(interp.run, id="interp"), pytest.param(runtime.run, id="gpu")]
DT = {"f32": np.float32, "f16": np.float16}


@functools.lru_cache(maxsize=None)
def kernel(cfg: BuildConfig):
    return build(cfg)


def nonzero(rng, shape, dtype=np.float32):
    x = rng.uniform(0.1, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(dtype)


def make_inputs(rng, cfg: BuildConfig, batch: int, seq: int, past: int) -> tuple[dict, dict]:
    """Buffers (present poisoned) and the reference's keyword arguments."""
    hidden = cfg.kv_heads * cfg.head_dim
    dt = DT[cfg.input_type]
    bufs = {"src_k": nonzero(rng, (batch, seq, hidden), dt)}
    bufs["src_v"] = nonzero(rng, (batch, seq, hidden), dt)
    kw: dict = {}
    if cfg.k_norm:
        bufs["k_norm_weight"] = rng.uniform(0.5, 1.5, cfg.head_dim).astype(np.float32)
        kw["k_norm"] = ref.KNorm(bufs["k_norm_weight"], cfg.eps)
    if cfg.rotary:
        ang = rng.uniform(0.1, 3.0, (past + seq + 2, cfg.head_dim // 2))
        bufs["cos_cache"] = np.cos(ang).astype(np.float32).reshape(-1)
        bufs["sin_cache"] = np.sin(ang).astype(np.float32).reshape(-1)
        kw["rotary"] = ref.Rotary(bufs["cos_cache"], bufs["sin_cache"])
    size = batch * seq * hidden
    pt = DT[cfg.present_type]
    bufs["present_key"] = np.full(size, np.nan, pt)
    bufs["present_value"] = np.full(size, np.nan, pt)
    return bufs, kw


SHAPES = [(1, 8), (2, 16), (3, 6)]  # (kv_heads, head_dim)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("heads,head_dim", SHAPES)
@pytest.mark.parametrize(
    "k_norm,rotary", [(False, False), (True, False), (False, True), (True, True)]
)
def test_build(run, heads, head_dim, k_norm, rotary):
    rng = np.random.default_rng(heads * 100 + head_dim)
    cfg = BuildConfig(heads, head_dim, k_norm=k_norm, rotary=rotary, eps=1e-5)
    batch, seq, past = 2, 5, 3
    bufs, kw = make_inputs(rng, cfg, batch, seq, past)
    params = {"count": batch * heads * seq, "seq": seq, "pastSeq": past}
    out = run(kernel(cfg), bufs, params)
    want_k, want_v = ref.build(bufs["src_k"], bufs["src_v"], heads, past, **kw)
    got_k = out["present_key"].reshape(want_k.shape)
    got_v = out["present_value"].reshape(want_v.shape)
    np.testing.assert_array_equal(got_v, want_v)
    if k_norm or rotary:
        np.testing.assert_allclose(got_k, want_k, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got_k, want_k)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize(
    "input_type,present_type", [("f32", "f16"), ("f16", "f16"), ("f16", "f32")]
)
@pytest.mark.parametrize("rotary", [False, True])
def test_build_f16(run, input_type, present_type, rotary):
    rng = np.random.default_rng(5)
    cfg = BuildConfig(2, 8, rotary=rotary, input_type=input_type, present_type=present_type)
    batch, seq, past = 2, 3, 1
    bufs, kw = make_inputs(rng, cfg, batch, seq, past)
    params = {"count": batch * 2 * seq, "seq": seq, "pastSeq": past}
    out = run(kernel(cfg), bufs, params)
    want_k, want_v = ref.build(bufs["src_k"], bufs["src_v"], 2, past, **kw)
    pt = DT[present_type]
    got_k = out["present_key"].reshape(want_k.shape)
    np.testing.assert_array_equal(out["present_value"].reshape(want_v.shape), want_v.astype(pt))
    if rotary:  # one f16 rounding of a value a few f32 ulp away
        np.testing.assert_allclose(got_k.astype(np.float32), want_k.astype(pt), rtol=1e-3)
    else:
        np.testing.assert_array_equal(got_k, want_k.astype(pt))


def test_build_folded_dispatch():
    """More rows than one x dimension holds: gid.y carries the high part (fold = 2)."""
    rng = np.random.default_rng(9)
    cfg = BuildConfig(2, 4, fold=2, workgroup_size=4)
    bufs, _ = make_inputs(rng, cfg, 3, 7, 0)
    params = {"count": 3 * 2 * 7, "seq": 7, "pastSeq": 0}
    out = runtime.run(kernel(cfg), bufs, params)
    want_k, want_v = ref.build(bufs["src_k"], bufs["src_v"], 2)
    np.testing.assert_array_equal(out["present_key"].reshape(want_k.shape), want_k)
    np.testing.assert_array_equal(out["present_value"].reshape(want_v.shape), want_v)


@pytest.mark.parametrize("k_norm,rotary", [(False, False), (True, True)])
def test_build_matches_legacy_template(k_norm, rotary):
    """Same bindings, params and dispatch as the template: bit-identical on the GPU."""
    rng = np.random.default_rng(11)
    cfg = BuildConfig(2, 16, k_norm=k_norm, rotary=rotary, eps=1e-5)
    bufs, _ = make_inputs(rng, cfg, 2, 4, 2)
    params = {"count": 2 * 2 * 4, "seq": 4, "pastSeq": 2}
    k = kernel(cfg)
    vars = legacy.legacy_vars("build", kv_heads=2, head_dim=16, k_norm=k_norm, rotary=rotary)
    vars["qkEps"] = cfg.eps
    bindings, struct = legacy.legacy_bindings(vars), legacy.legacy_params_struct(vars)
    assert legacy.host_interface(bindings) == legacy.host_interface(k.bindings)
    assert struct == k.params
    old = legacy.run_legacy(vars, bindings, struct, bufs, params)
    new = runtime.run(k, bufs, params)
    # K RMSNorm sums the row in another order than the template's loop.
    same = np.testing.assert_array_equal if not k_norm else _close
    for name in ("present_key", "present_value"):
        same(new[name], old[name])


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_legacy_f16_present_is_invalid_wgsl():
    """Template defect: it stores the f32 row into an f16 present without converting."""
    vars = legacy.legacy_vars("build", present_type="f16")
    bindings = legacy.legacy_bindings(vars)
    assert [b.elem for b in bindings if b.name.startswith("present")] == [f16, f16]
    wgsl = legacy.render(vars, bindings, legacy.legacy_params_struct(vars))
    with pytest.raises(runtime.CompileError):
        runtime.compile_wgsl(wgsl)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"kv_heads": 0, "head_dim": 8}, "kv_heads"),
        ({"kv_heads": 1, "head_dim": -2}, "head_dim"),
        ({"kv_heads": 1, "head_dim": 7, "rotary": True}, "head_dim"),
        ({"kv_heads": 1, "head_dim": 8, "k_norm": 1}, "k_norm"),
        ({"kv_heads": 1, "head_dim": 8, "eps": 0.0}, "eps"),
        ({"kv_heads": 1, "head_dim": 8, "eps": float("nan")}, "eps"),
        ({"kv_heads": 1, "head_dim": 8, "input_type": "i32"}, "input_type"),
        ({"kv_heads": 1, "head_dim": 8, "present_type": "u32"}, "present_type"),
        ({"kv_heads": 1, "head_dim": 8, "workgroup_size": 512}, "workgroup_size"),
        ({"kv_heads": 1, "head_dim": 8, "fold": 0}, "fold"),
    ],
)
def test_build_config_errors(kwargs, field):
    with pytest.raises(ConfigError) as e:
        BuildConfig(**kwargs)
    assert e.value.field == field
