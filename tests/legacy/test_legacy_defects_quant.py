"""The legacy template's defects in the build family and the quantised caches (numbers as in
``docs/legacy.md``): the append_quant window (6) and rotary position (7), more than eight storage
buffers (8), f16 build caches (10), bits other than 8 or 4 and int4 with an odd head dim (14), a
wider int4 clamp range (16), rotary with an odd head dim (18).

Each test shows the difference as ``tests/helpers/legacy_checks.py`` says.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.ir.features import limits
from kvdsl import reference as ref
from kvdsl.emit import emit
from kvdsl.interp import OutOfBounds
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, append_quant, build_quant
from kvdsl.legacy import binding_note, config_from_vars
from kvdsl.runtime import compile_wgsl
from kvdsl.runtime import run as gpu_run
from tests.helpers.legacy import host_interface, render, run_legacy
from tests.helpers.legacy_checks import (
    B,
    BAD_INT,
    D,
    F32,
    H,
    bridge_error,
    naga_error,
    poison,
    retype,
    rnd,
    rotary,
    run_parsed,
    variables,
    with_buffers,
    with_buffers_legacy,
)

# ---- 6. append_quant window -------------------------------------------------------------------


def _quant(rng, bits=8, per_channel=True, heads=H, head_dim=D):
    n = heads * head_dim if per_channel else 1
    qmax = 2 ** (bits - 1) - 1
    return ref.Quant(
        bits,
        (rng.uniform(1.5, 3.0, n) / qmax).astype(F32),
        (rng.uniform(1.5, 3.0, n) / qmax).astype(F32),
        per_channel,
    )


def _quant_data(rng, batch, s, cap, seqlens, quant, positions=0, extra_rows=0):
    words = D if quant.bits == 8 else D // 2
    dt = np.int32 if quant.bits == 8 else np.uint32
    rows = batch * H * cap + extra_rows
    data = {
        "src_k": rnd(rng, batch, s, H * D),
        "src_v": rnd(rng, batch, s, H * D),
        "seqlens_k": np.array(seqlens, np.int32),
        "k_scale": quant.k_scale,
        "v_scale": quant.v_scale,
        "present_key": np.full((rows, words), 0xDEADBEEF, np.uint32).view(dt),
        "present_value": np.full((rows, words), 0xDEADBEEF, np.uint32).view(dt),
    }
    if positions:
        rot = rotary(rng, positions)
        data |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    return data


def codes_equal(got: np.ndarray, want: np.ndarray) -> bool:
    """The interpreter's codes: its f32 division is exact (as the reference's), so every code
    equals the reference's."""
    return np.array_equal(got.astype(np.int64).ravel(), want.astype(np.int64).ravel())


def far_apart(got: np.ndarray, want: np.ndarray) -> bool:
    """Codes that differ by more than one step somewhere, or in more than 5% of them: not
    what a rounding of x / scale could explain."""
    diff = np.abs(got.astype(np.int64).ravel() - want.astype(np.int64).ravel())
    return bool(diff.max() > 1 or np.mean(diff == 0) <= 0.95)


# WGSL's f32 division may be off by 2.5 ULP: a quotient that close to a .5 may round either way.
DIVISION_SLACK = 3 * 2.0**-23


def nudged(quant: ref.Quant, by: float) -> ref.Quant:
    """``quant`` with every scale moved by the relative amount ``by`` (x / scale moves by about
    ``-by``)."""
    move = lambda s: (s.astype(np.float64) * (1 + by)).astype(F32)  # noqa: E731
    return ref.Quant(quant.bits, move(quant.k_scale), move(quant.v_scale), quant.per_channel)


def gpu_codes_close(got: np.ndarray, make, quant: ref.Quant) -> bool:
    """GPU codes: each equals the reference's (``make(quant)``), or the reference's with the
    quotient moved by the division's slack either way (one step, and only where x / scale lies
    within that slack of a rounding boundary)."""
    got = got.astype(np.int64).ravel()
    exact, lo, hi = (
        np.asarray(make(q), np.int64).ravel()
        for q in (quant, nudged(quant, DIVISION_SLACK), nudged(quant, -DIVISION_SLACK))
    )
    return bool(np.all((got == exact) | (got == lo) | (got == hi)))


def test_06_append_quant_right_padded_prompt_wraps():
    rng = np.random.default_rng(6)
    cap, s = 8, 3
    quant = _quant(rng)
    data = _quant_data(rng, B, s, cap, [1, 5], quant)  # batch 0: 2 valid tokens < 3 new
    params = {"count": B * H * s, "seq": s, "pastSeq": 0, "totalSeq": cap, "perChannel": 1}
    v, bindings, struct = variables("append_quant")
    with pytest.raises(OutOfBounds, match="present_key"):
        run_parsed(v, bindings, struct, with_buffers_legacy(bindings, data), params)
    kernel = append_quant(AppendQuantConfig(H, D))
    mine = interp.run(kernel, with_buffers(kernel, data), params)
    want = ref.append_quant(data["src_k"], data["src_v"], data["seqlens_k"], cap, H, quant)
    k, val = want.over(data["present_key"], data["present_value"])
    assert codes_equal(mine["present_key"], k) and codes_equal(mine["present_value"], val)
    assert np.all(mine["present_key"].reshape(k.shape)[~want.mask] == BAD_INT)


def test_06_append_quant_past_capacity_spills_into_the_next_head(gpu):
    rng = np.random.default_rng(61)
    cap, s = 6, 3
    quant = _quant(rng)
    # One spare head of rows: where the template's last head spills.
    data = _quant_data(rng, 1, s, cap, [8], quant, extra_rows=cap)
    params = {"count": H * s, "seq": s, "pastSeq": 0, "totalSeq": cap, "perChannel": 1}
    v, bindings, struct = variables("append_quant")
    theirs = run_legacy(v, bindings, struct, with_buffers_legacy(bindings, data), params)
    kernel = append_quant(AppendQuantConfig(H, D))
    mine = gpu_run(kernel, with_buffers(kernel, data), params)
    n = H * cap

    def codes(q: ref.Quant, which: int):
        want = ref.append_quant(data["src_k"], data["src_v"], data["seqlens_k"], cap, H, q)
        return want.over(data["present_key"][:n], data["present_value"][:n])[which]

    assert gpu_codes_close(mine["present_key"][:n], lambda q: codes(q, 0), quant)
    assert gpu_codes_close(mine["present_value"][:n], lambda q: codes(q, 1), quant)
    assert np.all(mine["present_key"][n:] == BAD_INT)
    # The template: head 0's window rows 3..5 never written, head 1's rows 0..2 overwritten.
    assert np.all(theirs["present_key"][cap - s : cap] == BAD_INT)
    assert not np.any(theirs["present_key"][cap : cap + s] == BAD_INT)
    assert not np.any(theirs["present_key"][n : n + s] == BAD_INT)  # past the buffer's heads


# ---- 7. append_quant rotary position --------------------------------------------------------------


def test_07_append_quant_rotates_every_batch_at_past_seq():
    rng = np.random.default_rng(7)
    cap, s = 10, 2
    quant = _quant(rng)
    data = _quant_data(rng, B, s, cap, [3, 8], quant, positions=cap)  # windows at rows 2, 7
    params = {"count": B * H * s, "seq": s, "pastSeq": 2, "totalSeq": cap, "perChannel": 1}
    v, bindings, struct = variables("append_quant", rotary=True)
    assert len(bindings) == 9
    theirs = run_parsed(v, bindings, struct, with_buffers_legacy(bindings, data), params)
    rot = ref.Rotary(data["cos_cache"], data["sin_cache"])
    want = ref.append_quant(
        data["src_k"], data["src_v"], data["seqlens_k"], cap, H, quant, None, rot
    )
    k, _ = want.over(data["present_key"], data["present_value"])
    k = k.reshape(B, H, cap, D)
    theirs_k = theirs["present_key"].reshape(k.shape)
    assert codes_equal(theirs_k[0], k[0])  # batch 0's window starts at pastSeq
    assert far_apart(theirs_k[1], k[1])  # batch 1's K rotated at rows 2, 3, sits at 7, 8
    row = AppendQuantConfig(H, D, rotary=True, bindings="template")
    kernel = append_quant(row)
    mine = interp.run(kernel, with_buffers(kernel, data), params)
    assert codes_equal(mine["present_key"], k)
    kernel = append_quant(
        AppendQuantConfig(H, D, rotary=True, bindings="template", rotary_position="past_seq")
    )
    compat = interp.run(kernel, with_buffers(kernel, data), params)
    assert codes_equal(compat["present_key"], theirs["present_key"])


# ---- 8. more than 8 storage buffers ------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,k_norm,rotary,count",
    [
        ("build_quant", True, True, 9),
        ("append_quant", False, True, 9),
        ("append_quant", True, True, 10),
    ],
)
def test_08_more_than_eight_storage_buffers(gpu, mode, k_norm, rotary, count):
    """The template's render fails at WebGPU's default 8 storage buffers. With no limit stated
    the bridge gives the packed kernel (at most 8, no limit to request) and says how its
    bindings differ; a device stated to allow ``count`` gets the drop-in, which needs exactly
    that limit, and the render compiles there too."""
    v, bindings, struct = variables(mode, k_norm=k_norm, rotary=rotary)
    assert len(bindings) == count
    assert "limit is 8" in naga_error(v, bindings, struct)
    need = {"maxStorageBuffersPerShaderStage": count}
    compile_wgsl(render(v, bindings, struct), need)
    for most in (None, 8, count - 1):
        cfg = config_from_vars(v, most)
        kernel = catalog.build_config(cfg)
        assert cfg.bindings == "packed" and len(kernel.bindings) <= 8
        names = {b.name for b in kernel.bindings}
        assert {"rotary_table", "kv_scale"} <= names and not {"cos_cache", "k_scale"} & names
        assert limits(kernel) == {}
        assert binding_note(cfg).endswith(f"pass --max-storage-buffers {count} (or more)")
        compile_wgsl(emit(kernel))
    for most in (count, 524288):
        cfg = config_from_vars(v, most)
        kernel = catalog.build_config(cfg)
        assert cfg.bindings == "template" and binding_note(cfg) is None
        assert host_interface(kernel.bindings) == host_interface(bindings)
        assert limits(kernel) == need
        compile_wgsl(emit(kernel), need)


# ---- 10. build family with f16 ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["build", "build_quant", "append_quant"])
def test_10_build_family_with_f16_is_invalid_wgsl(gpu, mode):
    v, bindings, struct = variables(mode, present_type="f16")
    if mode == "build":
        # L435: the f32 row stored into the f16 present.
        assert "`f32` to `f16`" in naga_error(v, bindings, struct)
        kernel = build(config_from_vars(v))
    else:
        # The quantised caches are integers; f16 new K/V (L414: loaded into the f32 row) fail.
        bindings = retype(bindings, src_k="f16", src_v="f16")
        assert "`f16` to `f32`" in naga_error(v, bindings, struct)
        cls, make = (
            (BuildQuantConfig, build_quant)
            if mode == "build_quant"
            else (AppendQuantConfig, append_quant)
        )
        kernel = make(cls(H, D, input_type="f16"))
    compile_wgsl(emit(kernel))


def test_10_build_f16_present_matches_reference(gpu):
    rng = np.random.default_rng(10)
    s = 3
    data = {"src_k": rnd(rng, B, s, H * D), "src_v": rnd(rng, B, s, H * D)}
    data |= {n: poison((B, H, s, D), np.float16) for n in ("present_key", "present_value")}
    kernel = build(BuildConfig(H, D, present_type="f16"))
    out = gpu_run(kernel, data, {"count": B * H * s, "seq": s, "pastSeq": 0})
    k, val = ref.build(data["src_k"], data["src_v"], H)
    np.testing.assert_array_equal(out["present_key"].reshape(k.shape), k.astype(np.float16))
    np.testing.assert_array_equal(out["present_value"].reshape(val.shape), val.astype(np.float16))


# ---- 14. bits other than 8 or 4; int4 with an odd head dim ----------------------------------------


def test_14_bits_6_takes_the_int4_branch(gpu):
    v, bindings, struct = variables("build_quant", bits=6)
    wgsl = render(v, bindings, struct)
    assert "<< 4u" in wgsl and "PACKED: u32 = 4u" in wgsl  # packed nibbles, not 6-bit values
    assert bridge_error(v).field == "bits"


def test_14_int4_odd_head_dim_drops_the_last_element(gpu):
    rng = np.random.default_rng(14)
    d, s = 7, 2
    v, bindings, struct = variables("build_quant", bits=4, head_dim=d, kv_heads=1)
    assert v["packed"] == 3
    quant = _quant(rng, 4, per_channel=False, heads=1, head_dim=d)
    data = {"src_k": rnd(rng, 1, s, d), "src_v": rnd(rng, 1, s, d)}
    data |= {"k_scale": quant.k_scale, "v_scale": quant.v_scale}
    data |= {n: np.full(s * 3, 0xDEADBEEF, np.uint32) for n in ("present_key", "present_value")}
    params = {"count": s, "seq": s, "pastSeq": 0, "perChannel": 0}
    first = run_legacy(v, bindings, struct, dict(data), params)
    changed = dict(data, src_k=data["src_k"].copy())
    changed["src_k"][..., d - 1] *= -3.0  # the last element never reaches the cache
    second = run_legacy(v, bindings, struct, changed, params)
    np.testing.assert_array_equal(first["present_key"], second["present_key"])
    assert bridge_error(v).field == "headDim"
    with pytest.raises(ConfigError) as err:
        BuildQuantConfig(1, d, bits=4)
    assert err.value.field == "head_dim"


# ---- 16. int4 with a clamp range wider than its nibble ------------------------------------------


def test_16_int4_with_a_wider_clamp_range_wraps_nibbles(gpu):
    rng = np.random.default_rng(16)
    s = 3
    v, bindings, struct = variables("build_quant", bits=4, qmin=-128, qmax=127)
    quant = ref.Quant(4, np.full(1, 0.05, F32), np.full(1, 0.05, F32), False)  # |x/scale| 10..40
    data = {"src_k": rnd(rng, B, s, H * D), "src_v": rnd(rng, B, s, H * D)}
    data |= {"k_scale": quant.k_scale, "v_scale": quant.v_scale}
    data |= {
        n: np.full((B, H, s, D // 2), 0xDEADBEEF, np.uint32)
        for n in ("present_key", "present_value")
    }
    params = {"count": B * H * s, "seq": s, "pastSeq": 0, "perChannel": 0}
    out = run_legacy(v, bindings, struct, data, params)
    stored = ref.unpack_int4(out["present_value"])
    clamped = np.clip(np.rint(ref.split_heads(data["src_v"], H) / F32(0.05)), -8, 7)
    assert np.mean(np.sign(stored) != np.sign(clamped)) > 0.2  # 9 -> -7, -9 -> 7, ...
    assert bridge_error(v).field == "qmin"


# ---- 18. rotary with an odd head dim ------------------------------------------------------------


def test_18_rotary_with_an_odd_head_dim_leaves_the_last_element(gpu):
    rng = np.random.default_rng(18)
    d, s = 7, 2
    v, bindings, struct = variables("build", rotary=True, head_dim=d, kv_heads=1)
    rot = rotary(rng, s, d // 2)
    data = {"src_k": rnd(rng, 1, s, d), "src_v": rnd(rng, 1, s, d)}
    data |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    data |= {n: poison((1, 1, s, d)) for n in ("present_key", "present_value")}
    out = run_legacy(v, bindings, struct, data, {"count": s, "seq": s, "pastSeq": 0})
    np.testing.assert_array_equal(
        out["present_key"][..., d - 1].ravel(), data["src_k"][..., d - 1].ravel()
    )
    # The host's half = 3 of 7 is partial rotary: the bridge gives rotary_half=3, whose last
    # element passes through as in the template, and kvdsl equals the template and the reference.
    cfg = config_from_vars(v)
    assert cfg == BuildConfig(1, d, rotary=True, rotary_half=d // 2)
    kernel = build(cfg)
    mine = gpu_run(kernel, with_buffers(kernel, data), {"count": s, "seq": s, "pastSeq": 0})
    np.testing.assert_array_equal(mine["present_key"], out["present_key"])
    want_k, _ = ref.build(
        data["src_k"], data["src_v"], 1, 0, rotary=ref.Rotary(rot.cos, rot.sin, 3)
    )
    np.testing.assert_allclose(mine["present_key"].reshape(want_k.shape), want_k, rtol=1e-6)
    # Rotary over the whole head (no half given) needs an even head_dim.
    del v["half"]
    assert bridge_error(v).field == "headDim"
