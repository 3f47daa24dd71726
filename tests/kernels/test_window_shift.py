"""window_shift kernels: GPU (and interpreter) against the numpy reference, the legacy template's
interface and outputs, and the config checks. Outputs are NaN-poisoned before each run."""

from __future__ import annotations

import numpy as np
import pytest
from tests.helpers.cache_kernels import (
    BACKENDS,
    DT,
    SHAPES,
    TYPES,
    assert_bits,
    assert_close,
    past_and_new,
    poison,
    rotary_tables,
    run_into_present,
)

from kvdsl import reference as ref
from kvdsl.ir import workgroups
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.window_shift import WindowShiftConfig, window_shift

# (capacity, keySeq, seqlens_k per batch): a right-padded first prompt (seqlens+1 < keySeq), no
# eviction, eviction, an exactly full cache, a long past, empty and negative seqlens.
CASES = [
    (8, 3, [1, 4, 9, 7, 40, -1, -9]),
    (6, 1, [0, 5, 6, 30]),
    (5, 5, [4, 9, 2]),
]
OVER = [(4, 6, [5, 12, 2, -1])]  # more new tokens than the window holds


def _inputs(rng, heads, head_dim, cap, key, seqlens, cache, inp):
    data = past_and_new(rng, heads, head_dim, cap, key, seqlens, cache, inp)
    return data, rotary_tables(rng, max(seqlens) + 1 + key, head_dim // 2)


def _run(run, cfg, data, rot, present_k, present_v):
    return run_into_present(run, window_shift(cfg), cfg.region, data, rot, present_k, present_v)


REGIONS = [("all", False), ("shift", False), ("append", False), ("append", True)]


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("region,rotary", REGIONS)
@pytest.mark.parametrize("heads,head_dim", SHAPES)
@pytest.mark.parametrize("types", TYPES, ids="-".join)
def test_window_shift_pass(run, region, rotary, heads, head_dim, types):
    """Each pass writes exactly its rows (the rest keep their poison), with the reference's values."""
    cache, inp = types
    cfg = WindowShiftConfig(heads, head_dim, region, rotary, cache, inp, workgroup_size=8, fold=2)
    rng = np.random.default_rng(heads * 100 + head_dim)
    for cap, key, seqlens in CASES + OVER:
        data, rot = _inputs(rng, heads, head_dim, cap, key, seqlens, cache, inp)
        pk, pv = poison(data["past_k"].shape, DT[cache]), poison(data["past_v"].shape, DT[cache])
        got_k, got_v = _run(run, cfg, data, rot, pk, pv)
        w = ref.window_shift(**data, region=region, rotary=rot if rotary else None)
        want_k, want_v = w.over(pk, pv)
        exact = cache == inp or region == "shift"
        (assert_close if rotary or not exact else assert_bits)(got_k, want_k)
        (assert_bits if exact else assert_close)(got_v, want_v)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("rotary", [False, True])
def test_shift_then_append_is_the_whole_step(run, rotary):
    """Two passes on one present buffer leave no poison and equal the one-pass step."""
    heads, head_dim = 2, 8
    shift = WindowShiftConfig(heads, head_dim, "shift", workgroup_size=16)
    append = WindowShiftConfig(heads, head_dim, "append", rotary, workgroup_size=16)
    rng = np.random.default_rng(1)
    for cap, key, seqlens in CASES + OVER:
        data, rot = _inputs(rng, heads, head_dim, cap, key, seqlens, "f32", "f32")
        pk, pv = poison(data["past_k"].shape, np.float32), poison(data["past_v"].shape, np.float32)
        k, v = _run(run, shift, data, rot, pk, pv)
        k, v = _run(run, append, data, rot, k, v)
        assert not np.isnan(k).any() and not np.isnan(v).any()
        w = ref.window_shift(**data, region="all", rotary=rot if rotary else None)
        (assert_close if rotary else assert_bits)(k, w.key)
        assert_bits(v, w.value)
        if not rotary:
            one_k, one_v = _run(run, WindowShiftConfig(heads, head_dim), data, rot, pk, pv)
            assert_bits(one_k, k)
            assert_bits(one_v, v)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(kv_heads=0, head_dim=8), "kv_heads"),
        (dict(kv_heads=2, head_dim=0), "head_dim"),
        (dict(kv_heads=2, head_dim=8, region="evict"), "region"),
        (dict(kv_heads=2, head_dim=9, region="append", rotary=True), "head_dim"),
        (dict(kv_heads=2, head_dim=8, region="shift", rotary=True), "rotary"),
        (dict(kv_heads=2, head_dim=8, region="all", rotary=True, pairs=True), "pairs"),
        (dict(kv_heads=2, head_dim=8, rotary="yes"), "rotary"),
        (dict(kv_heads=2, head_dim=8, present_type="u32"), "present_type"),
        (dict(kv_heads=2, head_dim=8, input_type="f64"), "input_type"),
        (dict(kv_heads=2, head_dim=8, fold=0), "fold"),
    ],
)
def test_config_errors(kwargs, field):
    with pytest.raises(ConfigError) as err:
        WindowShiftConfig(**kwargs)
    assert err.value.field == field


# ---- drop-in parity with the legacy template -------------------------------------------------------

LEGACY = [  # (kvdsl config, template variables)
    (WindowShiftConfig(2, 8), dict()),
    (WindowShiftConfig(2, 8, present_type="f16", input_type="f16"), dict(present_type="f16")),
    (WindowShiftConfig(2, 8, "shift"), dict(shift_region="shift")),
    (
        WindowShiftConfig(2, 8, "shift", present_type="f16"),
        dict(shift_region="shift", present_type="f16"),
    ),
    (WindowShiftConfig(2, 8, "append", True), dict(shift_region="append", rotary=True)),
]


def _legacy(cfg, extra):
    from tests.helpers import legacy

    vars = legacy.legacy_vars("window_shift", kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, **extra)
    return legacy, vars


@pytest.mark.parametrize("cfg,extra", LEGACY)
def test_legacy_interface(cfg, extra):
    legacy, vars = _legacy(cfg, extra)
    kernel = window_shift(cfg)
    assert legacy.host_interface(kernel.bindings) == legacy.host_interface(
        legacy.legacy_bindings(vars)
    )
    assert kernel.params == legacy.legacy_params_struct(vars)
    for count in (1, 64, 65, 64 * 65535 + 1):
        params = {"count": count, "seq": 9, "keySeq": 5}
        assert workgroups(kernel, params) == legacy.legacy_workgroups(vars, params)


@pytest.mark.parametrize("cfg,extra", LEGACY)
def test_legacy_outputs(gpu, cfg, extra):
    """For valid inputs (keySeq <= capacity, seqlens_k >= -1) the template and kvdsl agree."""
    from kvdsl.runtime import run

    legacy, vars = _legacy(cfg, extra)
    kernel = window_shift(cfg)
    rng = np.random.default_rng(9)
    for cap, key, seqlens in [(8, 3, [1, 4, 9, 7, 40, -1]), (6, 1, [0, 5, 6, 30])]:
        data, rot = _inputs(rng, 2, 8, cap, key, seqlens, cfg.present_type, cfg.input_type)
        data["cos_cache"], data["sin_cache"] = rot.cos, rot.sin
        bufs = {bd.name: data[bd.name].ravel() for bd in kernel.bindings if bd.name in data}
        shape = data["past_k"].shape
        bufs["present_key"] = poison(shape, DT[cfg.present_type]).ravel()
        bufs["present_value"] = poison(shape, DT[cfg.present_type]).ravel()
        rows = len(seqlens) * 2 * (key if cfg.region == "append" else cap)
        params = {"count": rows, "seq": cap, "keySeq": key}
        mine = run(kernel, bufs, params)
        theirs = legacy.run_legacy(vars, kernel.bindings, kernel.params, dict(bufs), params)
        (assert_close if cfg.rotary else assert_bits)(mine["present_key"], theirs["present_key"])
        assert_bits(mine["present_value"], theirs["present_value"])
