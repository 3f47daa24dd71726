"""The legacy template's defects of element types, host params and the bridge's variables
(numbers as in ``docs/legacy.md``): f16 caches with rotary (9), new K/V of another type (11), merge
with a present longer than past + new (12), transpose vec4's default presentElement (13), the
cooperative rotary pair index (15), vec4 transpose of a head dim not divisible by four (17).

Each test shows the difference as ``tests/helpers/legacy_checks.py`` says.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref
from kvdsl.emit import emit
from kvdsl.interp import OutOfBounds
from kvdsl.kernels.merge import MergeConfig, merge
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from kvdsl.kernels.window_shift import window_shift
from kvdsl.legacy import config_from_vars
from kvdsl.runtime import ParamsError, compile_wgsl
from kvdsl.runtime import run as gpu_run
from tests.helpers.legacy import render, run_legacy
from tests.helpers.legacy_checks import (
    B,
    D,
    H,
    bridge_error,
    close,
    naga_error,
    poison,
    retype,
    rnd,
    run_parsed,
    share_data,
    variables,
    with_buffers,
)

# ---- 9. f16 caches with rotary ----------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,opts,message",
    [
        # L151-153: f16 new K times f32 cos/sin, the f32 result stored into the f16 cache.
        ("merge_share", dict(share_region="append"), "`f32` to `f16`"),
        # Apple's hybrid kernel holds the same cooperative walk (then the per-row L187).
        ("merge_share", dict(share_region="append", vendor="apple"), "`f32` to `f16`"),
        # L352: f16 new K loaded into the f32 row.
        ("window_shift", dict(shift_region="append"), "`f16` to `f32`"),
    ],
)
def test_09_f16_cache_with_rotary_is_invalid_wgsl(gpu, mode, opts, message):
    v, bindings, struct = variables(mode, rotary=True, present_type="f16", **opts)
    assert message in naga_error(v, bindings, struct)
    cfg = config_from_vars(v)
    assert cfg.rotary and cfg.present_type == "f16"
    kernel = merge_share(cfg) if mode == "merge_share" else window_shift(cfg)
    compile_wgsl(emit(kernel))


def test_09_f16_rotary_append_matches_reference(gpu):
    rng = np.random.default_rng(9)
    cap, s = 8, 3
    data = share_data(rng, cap, s, [1, 6], positions=cap)
    f16 = {
        n: data[n].astype(np.float16) for n in ("new_k", "new_v", "present_key", "present_value")
    }
    kernel = merge_share(
        MergeShareConfig(H, D, "append", rotary=True, present_type="f16", input_type="f16")
    )
    mine = gpu_run(
        kernel, with_buffers(kernel, data | f16), {"count": B * H * s, "seq": cap, "keySeq": s}
    )
    rot = ref.Rotary(data["cos_cache"], data["sin_cache"])
    want = ref.merge_share_append(
        f16["new_k"], f16["new_v"], data["seqlens_k"], cap, H, rot, np.float16
    )
    k, val = want.over(f16["present_key"], f16["present_value"])
    np.testing.assert_allclose(mine["present_key"].reshape(k.shape), k, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(mine["present_value"].reshape(val.shape), val)


# ---- 11. new K/V stored unconverted ---------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,opts",
    [
        ("merge", {}),
        ("merge_share", dict(share_region="append")),
        ("window_shift", {}),
    ],
)
def test_11_new_kv_of_another_type_is_invalid_wgsl(gpu, mode, opts):
    v, bindings, struct = variables(mode, present_type="f16", **opts)
    bindings = retype(bindings, new_k="f32", new_v="f32")
    assert "`f32` to `f16`" in naga_error(v, bindings, struct)


def test_11_kvdsl_converts_new_kv(gpu):
    rng = np.random.default_rng(11)
    past, s = 3, 2
    data = {
        "past_k": rnd(rng, B, H, past, D, dtype=np.float16),
        "past_v": rnd(rng, B, H, past, D, dtype=np.float16),
        "new_k": rnd(rng, B, s, H * D),
        "new_v": rnd(rng, B, s, H * D),
    }
    data |= {n: poison((B, H, past + s, D), np.float16) for n in ("present_key", "present_value")}
    kernel = merge(MergeConfig(H, D, present_type="f16", input_type="f32"))
    params = {"count": B * H * (past + s), "seq": past + s, "pastSeq": past, "keySeq": s}
    out = gpu_run(kernel, data, params)
    k, val = ref.merge(data["past_k"], data["past_v"], data["new_k"], data["new_v"])
    np.testing.assert_array_equal(out["present_key"].reshape(k.shape), k)
    np.testing.assert_array_equal(out["present_value"].reshape(val.shape), val)


# ---- 12. merge with seq > pastSeq + keySeq ------------------------------------------------------------


def test_12_merge_present_longer_than_past_plus_new(gpu):
    rng = np.random.default_rng(12)
    past, s, seq = 2, 2, 5
    data = {
        "past_k": rnd(rng, B, H, past, D),
        "past_v": rnd(rng, B, H, past, D),
        "new_k": rnd(rng, B, s, H * D),
        "new_v": rnd(rng, B, s, H * D),
        "present_key": poison((B, H, seq, D)),
        "present_value": poison((B, H, seq, D)),
    }
    params = {"count": B * H * seq, "seq": seq, "pastSeq": past, "keySeq": s}
    v, bindings, struct = variables("merge")
    theirs = run_legacy(v, bindings, struct, dict(data), params)
    # Batch 0's last row is batch 1's first new token.
    new_v = ref.split_heads(data["new_v"], H)
    assert np.array_equal(theirs["present_value"][0, :, seq - 1], new_v[1, :, 0])
    with pytest.raises(OutOfBounds, match="new_"):  # the last batch reads past the new tokens
        run_parsed(v, bindings, struct, dict(data), params)
    with pytest.raises(ValueError):
        ref.merge(data["past_k"], data["past_v"], data["new_k"], data["new_v"], seq)
    kernel = merge(config_from_vars(v))
    with pytest.raises(ParamsError, match="pastSeq \\+ keySeq"):
        gpu_run(kernel, data, params)


# ---- 13. transpose vec4 with the default presentElement ------------------------------------------


def test_13_transpose_vec4_default_present_element(gpu):
    v, bindings, struct = variables("transpose", vec4=True)
    del v["presentElement"]  # the template defaults it to presentScalar
    assert "cannot cast a vec4<f32> to a f32" in naga_error(v, bindings, struct)
    cfg = config_from_vars(v)
    assert cfg.vec4 and cfg.present_type == "f32"
    assert bridge_error(v | {"presentElement": "f32"}).field == "presentElement"


# ---- 15. cooperative rotary index -------------------------------------------------------------


def test_15_cooperative_rotary_pair_index_does_not_wrap(gpu):
    v, bindings, struct = variables("merge_share", share_region="append", rotary=True)
    assert "select(d - HALF, d, d < HALF)" in render(v, bindings, struct)
    wgsl = emit(merge_share(config_from_vars(v)))
    assert "d4 % HALF_V4" in wgsl and "- HALF" not in wgsl


# ---- 19. cooperative merge_share append with partial rotary --------------------------------------


def test_19_cooperative_partial_rotary_rotates_past_the_rotated_part(gpu):
    """half = 2 of head dim 12: dimensions 4..11 must pass through. The template's cooperative
    append takes ``d - HALF`` as their pair (the wrong partner, and a cos/sin entry of the next
    position's row); kvdsl's kernel (the bridge's) equals the reference."""
    rng = np.random.default_rng(19)
    d, half, cap, s = 12, 2, 6, 2
    v, bindings, struct = variables(
        "merge_share", share_region="append", rotary=True, head_dim=d, half=half
    )
    ang = rng.uniform(0.1, 3.0, (cap + 1, half))
    rot = ref.Rotary(np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32), half)
    seqlens = np.array([3, 5], np.int32)
    data = {"new_k": rnd(rng, B, s, H * d), "new_v": rnd(rng, B, s, H * d), "seqlens_k": seqlens}
    data |= {"cos_cache": rot.cos.ravel(), "sin_cache": rot.sin.ravel()}
    data |= {n: poison((B, H, cap, d)) for n in ("present_key", "present_value")}
    params = {"count": B * H * s, "seq": cap, "keySeq": s}
    theirs = run_legacy(v, bindings, struct, data, params)
    w = ref.merge_share_append(data["new_k"], data["new_v"], seqlens, cap, H, rot)
    want_k, want_v = w.over(data["present_key"], data["present_value"])
    cfg = config_from_vars(v)
    assert cfg == MergeShareConfig(H, d, "append", rotary=True, rotary_half=half)
    kernel = merge_share(cfg)
    mine = gpu_run(kernel, with_buffers(kernel, data), params)
    assert close(mine["present_key"], want_k) and close(mine["present_value"], want_v)
    got = theirs["present_key"].reshape(want_k.shape)
    assert close(got[..., : 2 * half], want_k[..., : 2 * half])  # the rotated part is right
    written = w.mask[..., 2 * half :]
    assert np.all(got[..., 2 * half :][written] != want_k[..., 2 * half :][written])
    assert close(theirs["present_value"], want_v)


# ---- 17. vec4 transpose of a head dim not divisible by four -------------------------------------


def test_17_vec4_transpose_of_a_head_dim_not_divisible_by_four(gpu):
    rng = np.random.default_rng(17)
    d, s = 6, 3
    v, bindings, struct = variables("transpose", vec4=True, head_dim=d)
    assert v["headDimV4"] == 1  # 6 // 4: two elements of every row are lost
    key = rnd(rng, B, s, H * d)
    data = {"key": key, "value": key.copy()}
    data |= {n: poison((B, H, s, d)) for n in ("present_key", "present_value")}
    out = run_legacy(v, bindings, struct, data, {"batchSize": B, "kvSeq": s})
    assert np.isnan(out["present_key"]).sum() == B * H * s * 2
    assert bridge_error(v).field == "headDim"
