"""The legacy template's defects 1-5 (numbers as in ``docs/legacy.md``), in window_shift and
merge_share: the append region without rotary, all + rotary, more new tokens than the capacity,
negative ``seqlens_k``.

Each test shows the difference as ``tests/helpers/legacy_checks.py`` says; the legacy bridge
gives kvdsl's kernel with the meaning fixed.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl import reference as ref
from kvdsl.interp import OutOfBounds
from kvdsl.ir.features import limits
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from kvdsl.kernels.window_shift import WindowShiftConfig, window_shift
from kvdsl.legacy import config_from_vars
from kvdsl.runtime import run as gpu_run
from tests.helpers.legacy import run_legacy
from tests.helpers.legacy_checks import (
    B,
    D,
    H,
    close,
    naga_error,
    poison,
    rnd,
    rotary,
    run_parsed,
    share_data,
    variables,
    with_buffers,
    with_buffers_legacy,
)

# ---- 1. window_shift append without hasRotary ---------------------------------------------------


def test_01_window_shift_append_needs_rotary(gpu):
    v, bindings, struct = variables("window_shift", shift_region="append", rotary=False)
    assert "`HALF`" in naga_error(v, bindings, struct)
    # The bridge gives kvdsl's unrotated append pass: the new rows, K as given.
    cfg = config_from_vars(v)
    assert cfg == WindowShiftConfig(H, D, "append", rotary=False)
    rng = np.random.default_rng(1)
    cap, s, seqlens = 6, 2, np.array([3, 9], np.int32)
    data = {"new_k": rnd(rng, B, s, H * D), "new_v": rnd(rng, B, s, H * D), "seqlens_k": seqlens}
    data |= {"present_key": poison((B, H, cap, D)), "present_value": poison((B, H, cap, D))}
    kernel = window_shift(cfg)
    out = gpu_run(kernel, with_buffers(kernel, data), {"count": B * H * s, "seq": cap, "keySeq": s})
    past = rnd(rng, B, H, cap, D)  # not read by the append pass
    want = ref.window_shift(past, past, data["new_k"], data["new_v"], seqlens, "append")
    k, val = want.over(data["present_key"], data["present_value"])
    assert close(out["present_key"], k) and close(out["present_value"], val)


# ---- 2. window_shift all + hasRotary appends K unrotated -----------------------------------------


def _window_data(rng, cap, s, seqlens, positions):
    data = share_data(rng, cap, s, seqlens)
    del data["present_key"], data["present_value"]  # each test poisons its own
    return data, rotary(rng, positions)


def test_02_window_shift_all_with_rotary_disagrees_with_two_passes(gpu):
    rng = np.random.default_rng(2)
    cap, s = 6, 2
    data, rot = _window_data(rng, cap, s, [3, 9], 16)
    # The template's tables, and kvdsl's 'all' pass's one packed table (cos, then sin a position).
    full = data | {"cos_cache": rot.cos, "sin_cache": rot.sin, "rotary_table": rot.table(D // 2)}
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
    # The bridge gives kvdsl's one-pass kernel with the meaning fixed: appended K rotated, as
    # the template's append region does. It binds the packed rotary_table: eight storage
    # buffers, WebGPU's default, with no limit to state.
    cfg = config_from_vars(v_all)
    assert cfg == WindowShiftConfig(H, D, "all", rotary=True)
    kernel = window_shift(cfg)
    assert len(kernel.bindings) == 8 and limits(kernel) == {}
    bufs = full | {"present_key": poison(shape), "present_value": poison(shape)}
    for run_one in (interp.run, gpu_run):
        one_pass = run_one(kernel, with_buffers(kernel, bufs), params)
        assert close(one_pass["present_key"], want.key)
        assert close(one_pass["present_value"], want.value)
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
    # The template's tables, and kvdsl's 'all' pass's one packed table (cos, then sin a position).
    full = data | {"cos_cache": rot.cos, "sin_cache": rot.sin, "rotary_table": rot.table(D // 2)}
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


def test_04_merge_share_more_new_tokens_than_capacity(gpu):
    rng = np.random.default_rng(4)
    cap, s = 3, 5
    data = share_data(rng, cap, s, [4, 0])
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
    data = share_data(rng, cap, s, [-5, 3])
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
