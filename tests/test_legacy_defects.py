"""The legacy template's defects, one test each (numbers as in ``docs/legacy.md``).

Each test shows the difference: the template's render fails under naga (the message names the
problem), or its output (GPU, or the interpreter on the render parsed by ``kvdsl.frontend``)
differs from ``kvdsl.reference`` while kvdsl's kernel equals it, or the legacy bridge refuses
the variables with a ConfigError naming the variable. Inputs are random and never zero; outputs
are poisoned before every run.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl import reference as ref
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds
from kvdsl.ir import Binding
from kvdsl.ir.types import SCALARS
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.merge import MergeConfig, merge
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, append_quant, build_quant
from kvdsl.kernels.window_shift import WindowShiftConfig, window_shift
from kvdsl.legacy import config_from_vars
from kvdsl.runtime import CompileError, ParamsError, compile_wgsl
from kvdsl.runtime import run as gpu_run
from legacy import (
    legacy_bindings,
    legacy_params_struct,
    legacy_vars,
    legacy_workgroups,
    render,
    run_legacy,
)

B, H, D = 2, 2, 8
F32 = np.float32
NAN = np.nan
BAD_INT = np.int32(-559038737)  # 0xDEADBEEF


# ---- helpers -----------------------------------------------------------------------------------


def rnd(rng: np.random.Generator, *shape: int, dtype=F32) -> np.ndarray:
    """Random values in ±[0.5, 2): never zero, exact in f16."""
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def poison(shape: tuple, dtype=F32) -> np.ndarray:
    return np.full(shape, BAD_INT if np.dtype(dtype).kind == "i" else NAN, dtype)


def rotary(rng: np.random.Generator, positions: int, half: int = D // 2) -> ref.Rotary:
    ang = rng.uniform(0.1, 3.0, positions * half)
    return ref.Rotary(np.cos(ang).astype(F32), np.sin(ang).astype(F32))


def variables(mode: str, **kw) -> tuple:
    """Template variables with their bindings and params struct (H kv heads, head dim D)."""
    kw.setdefault("kv_heads", H)
    kw.setdefault("head_dim", D)
    v = legacy_vars(mode, **kw)
    return v, legacy_bindings(v), legacy_params_struct(v)


def naga_error(v: dict, bindings: tuple, struct) -> str:
    """naga's message for the template's render (the test fails if it compiles)."""
    with pytest.raises(CompileError) as err:
        compile_wgsl(render(v, bindings, struct))
    return str(err.value)


def bridge_error(v: dict) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        config_from_vars(v)
    return err.value


def run_parsed(v: dict, bindings: tuple, struct, buffers: dict, params: dict) -> dict:
    """The template's render parsed into IR and run on the interpreter (no storage limit)."""
    kernel = parse(render(v, bindings, struct))
    return interp.run(kernel, buffers, params, legacy_workgroups(v, params))


def close(got: np.ndarray, want: np.ndarray) -> bool:
    """Same NaNs, equal elsewhere within a few f32 ulps of values around 1."""
    got, want = np.asarray(got, F32).ravel(), np.asarray(want, F32).ravel()
    same_nan = np.array_equal(np.isnan(got), np.isnan(want))
    return same_nan and bool(np.nanmax(np.abs(got - want), initial=0.0) <= 1e-5)


def with_buffers(kernel, data: dict) -> dict:
    """The arrays ``kernel`` binds, by name."""
    return {b.name: data[b.name] for b in kernel.bindings}


def with_buffers_legacy(bindings: tuple, data: dict) -> dict:
    """The arrays the template's ``bindings`` name."""
    return {b.name: data[b.name] for b in bindings}


# ---- 1. window_shift append without hasRotary ---------------------------------------------------


def test_01_window_shift_append_needs_rotary(gpu):
    v, bindings, struct = variables("window_shift", shift_region="append", rotary=False)
    assert "`HALF`" in naga_error(v, bindings, struct)
    assert bridge_error(v).field == "hasRotary"
    # kvdsl's unrotated append pass: the new rows, K as given.
    rng = np.random.default_rng(1)
    cap, s, seqlens = 6, 2, np.array([3, 9], np.int32)
    data = {"new_k": rnd(rng, B, s, H * D), "new_v": rnd(rng, B, s, H * D), "seqlens_k": seqlens}
    data |= {"present_key": poison((B, H, cap, D)), "present_value": poison((B, H, cap, D))}
    kernel = window_shift(WindowShiftConfig(H, D, "append", rotary=False))
    out = gpu_run(kernel, with_buffers(kernel, data), {"count": B * H * s, "seq": cap, "keySeq": s})
    past = rnd(rng, B, H, cap, D)  # not read by the append pass
    want = ref.window_shift(past, past, data["new_k"], data["new_v"], seqlens, "append")
    k, val = want.over(data["present_key"], data["present_value"])
    assert close(out["present_key"], k) and close(out["present_value"], val)


# ---- 2. window_shift all + hasRotary appends K unrotated -----------------------------------------


def _window_data(rng, cap, s, seqlens, positions):
    data = {
        "past_k": rnd(rng, B, H, cap, D),
        "past_v": rnd(rng, B, H, cap, D),
        "new_k": rnd(rng, B, s, H * D),
        "new_v": rnd(rng, B, s, H * D),
        "seqlens_k": np.array(seqlens, np.int32),
    }
    rot = rotary(rng, positions)
    return data, rot


def test_02_window_shift_all_with_rotary_disagrees_with_two_passes(gpu):
    rng = np.random.default_rng(2)
    cap, s = 6, 2
    data, rot = _window_data(rng, cap, s, [3, 9], 16)
    full = data | {"cos_cache": rot.cos, "sin_cache": rot.sin}
    shape = (B, H, cap, D)
    params = {"count": B * H * cap, "seq": cap, "keySeq": s}
    append_params = params | {"count": B * H * s}

    def legacy_pass(region, before_k, before_v, p):
        v, bindings, struct = variables("window_shift", shift_region=region, rotary=True)
        bufs = {b.name: full[b.name] for b in bindings if b.name in full}
        bufs |= {"present_key": before_k, "present_value": before_v}
        return run_legacy(v, bindings, struct, bufs, p), v

    one, v_all = legacy_pass("all", poison(shape), poison(shape), params)
    two, _ = legacy_pass("shift", poison(shape), poison(shape), params)
    two, _ = legacy_pass("append", two["present_key"], two["present_value"], append_params)
    want = ref.window_shift(**data, region="all", rotary=rot)
    assert close(two["present_key"], want.key)
    assert not close(one["present_key"], two["present_key"])  # one pass: K left unrotated
    assert close(one["present_key"], ref.window_shift(**data, region="all").key)
    assert bridge_error(v_all).field == "hasRotary"
    # kvdsl: shift then rotary append is the rotated reference.
    mine = {"present_key": poison(shape), "present_value": poison(shape)}
    for cfg, p in [
        (WindowShiftConfig(H, D, "shift"), params),
        (WindowShiftConfig(H, D, "append", rotary=True), append_params),
    ]:
        kernel = window_shift(cfg)
        mine = gpu_run(kernel, with_buffers(kernel, full | mine), p)
    assert close(mine["present_key"], want.key) and close(mine["present_value"], want.value)


# ---- 3. window_shift keySeq > capacity ------------------------------------------------------------


@pytest.mark.parametrize("region", ["all", "append"])
def test_03_window_shift_more_new_tokens_than_capacity(region):
    rng = np.random.default_rng(3)
    cap, s = 4, 6
    data, rot = _window_data(rng, cap, s, [5, 12], 32)
    rotated = region == "append"  # the template's append region always rotates
    full = data | {"cos_cache": rot.cos, "sin_cache": rot.sin}
    shape = (B, H, cap, D)
    full |= {"present_key": poison(shape), "present_value": poison(shape)}
    rows = s if region == "append" else cap
    params = {"count": B * H * rows, "seq": cap, "keySeq": s}
    v, bindings, struct = variables("window_shift", shift_region=region, rotary=rotated)
    bufs = {b.name: full[b.name] for b in bindings}
    with pytest.raises(OutOfBounds):  # all: past rows past the capacity; append: rows ~2^32
        run_parsed(v, bindings, struct, bufs, params)
    kernel = window_shift(WindowShiftConfig(H, D, region, rotary=rotated))
    out = interp.run(kernel, with_buffers(kernel, full), params)
    want = ref.window_shift(**data, region=region, rotary=rot if rotated else None)
    k, val = want.over(full["present_key"], full["present_value"])
    assert close(out["present_key"], k) and close(out["present_value"], val)
    newest = ref.split_heads(data["new_v"], H)[:, :, s - cap :]
    np.testing.assert_array_equal(out["present_value"].reshape(shape), newest)


def test_03_window_shift_all_over_capacity_on_gpu_writes_no_new_token(gpu):
    rng = np.random.default_rng(31)
    cap, s = 4, 6
    data, _ = _window_data(rng, cap, s, [5, 12], 1)
    shape = (B, H, cap, D)
    v, bindings, struct = variables("window_shift")
    bufs = {b.name: data[b.name] for b in bindings if b.name in data}
    bufs |= {"present_key": poison(shape), "present_value": poison(shape)}
    out = run_legacy(v, bindings, struct, bufs, {"count": B * H * cap, "seq": cap, "keySeq": s})
    assert not np.isin(data["new_v"], out["present_value"]).any()
    # Head 0's rows 2..3 of batch 0 are head 1's rows 0..1: past rows of the wrong head.
    assert np.array_equal(out["present_value"][0, 0, 2:], data["past_v"][0, 1, :2])


# ---- 4. merge_share keySeq > capacity -----------------------------------------------------------


def _share_data(rng, cap, s, seqlens, positions=None):
    data = {
        "past_k": rnd(rng, B, H, cap, D),
        "past_v": rnd(rng, B, H, cap, D),
        "new_k": rnd(rng, B, s, H * D),
        "new_v": rnd(rng, B, s, H * D),
        "seqlens_k": np.array(seqlens, np.int32),
        "present_key": poison((B, H, cap, D)),
        "present_value": poison((B, H, cap, D)),
    }
    if positions:
        rot = rotary(rng, positions)
        data |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    return data


def test_04_merge_share_more_new_tokens_than_capacity(gpu):
    rng = np.random.default_rng(4)
    cap, s = 3, 5
    data = _share_data(rng, cap, s, [4, 0])
    retain_params = {"count": B * H * cap, "seq": cap, "keySeq": s}
    append_params = {"count": B * H * s, "seq": cap, "keySeq": s}
    # Retain: appendStart = activeEnd - keySeq wraps, so every row counts as outside the window.
    v, bindings, struct = variables("merge_share", share_region="retain")
    theirs = run_legacy(v, bindings, struct, with_buffers_legacy(bindings, data), retain_params)
    assert np.array_equal(theirs["present_key"], data["past_k"])
    kernel = merge_share(MergeShareConfig(H, D, "retain"))
    mine = gpu_run(kernel, with_buffers(kernel, data), retain_params)
    assert np.isnan(mine["present_key"]).all() and np.isnan(mine["present_value"]).all()
    # Append: rows activeEnd - keySeq + j wrap to ~2^32 for the oldest tokens.
    v, bindings, struct = variables("merge_share", share_region="append")
    with pytest.raises(OutOfBounds):
        run_parsed(v, bindings, struct, with_buffers_legacy(bindings, data), append_params)
    kernel = merge_share(MergeShareConfig(H, D, "append"))
    mine = interp.run(kernel, with_buffers(kernel, data), append_params)
    newest_k = ref.split_heads(data["new_k"], H)[:, :, s - cap :]
    newest_v = ref.split_heads(data["new_v"], H)[:, :, s - cap :]
    np.testing.assert_array_equal(mine["present_key"].reshape(newest_k.shape), newest_k)
    np.testing.assert_array_equal(mine["present_value"].reshape(newest_v.shape), newest_v)


# ---- 5. seqlens_k < -1 ----------------------------------------------------------------------------


def test_05_negative_seqlens_merge_share_appends_at_the_end(gpu):
    rng = np.random.default_rng(5)
    cap, s = 7, 2
    data = _share_data(rng, cap, s, [-5, 3])
    params = {"count": B * H * s, "seq": cap, "keySeq": s}
    v, bindings, struct = variables("merge_share", share_region="append")
    theirs = run_legacy(v, bindings, struct, with_buffers_legacy(bindings, data), params)
    kernel = merge_share(MergeShareConfig(H, D, "append"))
    mine = gpu_run(kernel, with_buffers(kernel, data), params)
    want = ref.merge_share_append(data["new_k"], data["new_v"], data["seqlens_k"], cap, H)
    k, val = want.over(data["present_key"], data["present_value"])
    assert close(mine["present_key"], k) and close(mine["present_value"], val)
    new_v = ref.split_heads(data["new_v"], H)
    assert np.array_equal(mine["present_value"][0, :, :s], new_v[0])  # row 0: empty sequence
    assert np.array_equal(theirs["present_value"][0, :, cap - s :], new_v[0])  # the template: end
    assert np.isnan(theirs["present_value"][0, :, :s]).all()


def test_05_negative_seqlens_window_shift_treats_the_window_as_full(gpu):
    rng = np.random.default_rng(51)
    cap, s = 6, 2
    data, _ = _window_data(rng, cap, s, [-5, 3], 1)
    shape = (B, H, cap, D)
    params = {"count": B * H * cap, "seq": cap, "keySeq": s}
    full = data | {"present_key": poison(shape), "present_value": poison(shape)}
    v, bindings, struct = variables("window_shift")
    theirs = run_legacy(v, bindings, struct, with_buffers_legacy(bindings, full), params)
    kernel = window_shift(WindowShiftConfig(H, D))
    mine = gpu_run(kernel, with_buffers(kernel, full), params)
    want = ref.window_shift(**data)
    assert close(mine["present_key"], want.key) and close(mine["present_value"], want.value)
    assert not close(theirs["present_value"], want.value)
    # The template keeps past rows 2..5 of batch 0 as if the window were full.
    assert np.array_equal(theirs["present_value"][0, :, : cap - s], data["past_v"][0, :, s:])


def test_05_negative_seqlens_rotary_reads_far_out_of_bounds():
    rng = np.random.default_rng(52)
    cap, s = 6, 2
    data, rot = _window_data(rng, cap, s, [-5, 3], cap + s)
    shape = (B, H, cap, D)
    full = data | {"cos_cache": rot.cos, "sin_cache": rot.sin}
    full |= {"present_key": poison(shape), "present_value": poison(shape)}
    params = {"count": B * H * s, "seq": cap, "keySeq": s}
    v, bindings, struct = variables("window_shift", shift_region="append", rotary=True)
    with pytest.raises(OutOfBounds, match="cos_cache"):
        run_parsed(v, bindings, struct, with_buffers_legacy(bindings, full), params)
    kernel = window_shift(WindowShiftConfig(H, D, "append", rotary=True))
    mine = interp.run(kernel, with_buffers(kernel, full), params)
    want = ref.window_shift(**data, region="append", rotary=rot)
    k, val = want.over(full["present_key"], full["present_value"])
    assert close(mine["present_key"], k) and close(mine["present_value"], val)


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


def quant_close(got: np.ndarray, want: np.ndarray) -> bool:
    """int8 values equal but for one step where x / scale lands within rounding of .5."""
    diff = np.abs(got.astype(np.int64).ravel() - want.astype(np.int64).ravel())
    return bool(diff.max() <= 1 and np.mean(diff == 0) > 0.95)


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
    assert quant_close(mine["present_key"], k) and quant_close(mine["present_value"], val)
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
    want = ref.append_quant(data["src_k"], data["src_v"], data["seqlens_k"], cap, H, quant)
    n = H * cap
    k, val = want.over(data["present_key"][:n], data["present_value"][:n])
    assert quant_close(mine["present_key"][:n], k) and quant_close(mine["present_value"][:n], val)
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
    assert quant_close(theirs_k[0], k[0])  # batch 0's window starts at pastSeq
    assert not quant_close(theirs_k[1], k[1])  # batch 1's K rotated at rows 2, 3, sits at 7, 8
    row = AppendQuantConfig(H, D, rotary=True, storage_buffer_limit=9)
    kernel = append_quant(row)
    mine = interp.run(kernel, with_buffers(kernel, data), params)
    assert quant_close(mine["present_key"], k)
    kernel = append_quant(
        AppendQuantConfig(H, D, rotary=True, storage_buffer_limit=9, rotary_position="past_seq")
    )
    compat = interp.run(kernel, with_buffers(kernel, data), params)
    assert quant_close(compat["present_key"], theirs["present_key"])


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
    v, bindings, struct = variables(mode, k_norm=k_norm, rotary=rotary)
    assert len(bindings) == count
    assert "limit is 8" in naga_error(v, bindings, struct)
    err = bridge_error(v)
    assert err.field == "k_norm/rotary" and "storage_buffer_limit" in err.allowed
    cls, make = (
        (BuildQuantConfig, build_quant)
        if mode == "build_quant"
        else (AppendQuantConfig, append_quant)
    )
    kernel = make(cls(H, D, k_norm=k_norm, rotary=rotary, storage_buffer_limit=count))
    assert len(kernel.bindings) == count
    parse(emit(kernel))  # valid WGSL for a device that raises the limit


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
    data = _share_data(rng, cap, s, [1, 6], positions=cap)
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


# ---- 10. build family with f16 ------------------------------------------------------------------


def _retype(bindings: tuple, **types: str) -> tuple:
    return tuple(
        Binding(b.name, SCALARS[types[b.name]], b.access) if b.name in types else b
        for b in bindings
    )


@pytest.mark.parametrize("mode", ["build", "build_quant", "append_quant"])
def test_10_build_family_with_f16_is_invalid_wgsl(gpu, mode):
    v, bindings, struct = variables(mode, present_type="f16")
    if mode == "build":
        # L435: the f32 row stored into the f16 present.
        assert "`f32` to `f16`" in naga_error(v, bindings, struct)
        kernel = build(config_from_vars(v))
    else:
        # The quantised caches are integers; f16 new K/V (L414: loaded into the f32 row) fail.
        bindings = _retype(bindings, src_k="f16", src_v="f16")
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
    bindings = _retype(bindings, new_k="f32", new_v="f32")
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
    assert bridge_error(v).field == "head_dim"
    with pytest.raises(ConfigError) as err:
        BuildQuantConfig(1, d, bits=4)
    assert err.value.field == "head_dim"


# ---- 15. cooperative rotary index -------------------------------------------------------------


def test_15_cooperative_rotary_pair_index_does_not_wrap(gpu):
    v, bindings, struct = variables("merge_share", share_region="append", rotary=True)
    assert "select(d - HALF, d, d < HALF)" in render(v, bindings, struct)
    wgsl = emit(merge_share(config_from_vars(v)))
    assert "d % HALF" in wgsl and "d - HALF" not in wgsl


# ---- more: int4 clamp range, vec4 transpose of an odd head, rotary with an odd head ---------------


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
    assert bridge_error(v).field == "head_dim"


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
    assert bridge_error(v).field == "head_dim"
