"""merge and merge_share kernels: GPU (and interpreter) against the numpy reference, the legacy
template's interface and outputs, and the config checks.

Outputs are poisoned with NaN before each run, so an element a pass should not own keeps its
poison and an element it should own but skips shows as NaN. Copies and conversions of equal
types are compared bit for bit; rotated K within a few ulps.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref
from kvdsl.ir import u32, workgroups
from kvdsl.ir.tree import Lit
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.merge import MergeConfig, merge
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from tests.helpers.cache_kernels import (
    BACKENDS,
    DT,
    SHAPES,
    TYPES,
    assert_bits,
    assert_close,
    nonzero,
    past_and_new,
    poison,
    rotary_tables,
    run_into_present,
)

# ---- merge ---------------------------------------------------------------------------------------

MERGE_CASES = [  # (batch, pastSeq, keySeq)
    (2, 5, 3),
    (3, 0, 4),  # no past: every row is new
    (1, 7, 1),  # decode
    (4, 20, 2),
]


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("walk", ["cooperative", "per_row"])
@pytest.mark.parametrize("heads,head_dim", SHAPES)
@pytest.mark.parametrize("types", TYPES, ids="-".join)
def test_merge(run, walk, heads, head_dim, types):
    cache, inp = types
    # A small workgroup and fold put several workgroups in x and y.
    cfg = MergeConfig(heads, head_dim, walk, cache, inp, workgroup_size=8, fold=3)
    kernel = merge(cfg)
    rng = np.random.default_rng(heads * 1000 + head_dim)
    for b, past, key in MERGE_CASES:
        seq = past + key
        pk = nonzero(rng, (b, heads, past, head_dim), DT[cache])
        pv = nonzero(rng, (b, heads, past, head_dim), DT[cache])
        nk = nonzero(rng, (b, key, heads * head_dim), DT[inp])
        nv = nonzero(rng, (b, key, heads * head_dim), DT[inp])
        out_shape = (b, heads, seq, head_dim)
        bufs = {
            # WebGPU has no empty buffers: an unread stand-in of one vector when there is no past.
            "past_k": pk.ravel() if past else poison(8, DT[cache]),
            "past_v": pv.ravel() if past else poison(8, DT[cache]),
            "new_k": nk.ravel(),
            "new_v": nv.ravel(),
            "present_key": poison(out_shape, DT[cache]).ravel(),
            "present_value": poison(out_shape, DT[cache]).ravel(),
        }
        params = {"count": b * heads * seq, "seq": seq, "pastSeq": past, "keySeq": key}
        out = run(kernel, bufs, params)
        want_k, want_v = ref.merge(pk, pv, nk, nv)
        check = assert_bits if cache == inp else assert_close
        check(out["present_key"], want_k)
        check(out["present_value"], want_v)


# ---- merge_share ---------------------------------------------------------------------------------

# (capacity, keySeq, seqlens_k per batch): right-padded first prompts (seqlens+1 < keySeq),
# decode steps with room, a full cache (seqlens+1 >= capacity, the window clamps to the end),
# empty and negative seqlens.
SHARE_CASES = [
    (12, 3, [1, 6, 20, -1]),
    (9, 1, [0, 5, 8, -7]),
    (5, 5, [4, 2, 11, 0]),
    (16, 4, [3, 15, 9, 6]),
]


def _share_inputs(rng, heads, head_dim, cap, key, seqlens, cache, inp, rotary):
    data = past_and_new(rng, heads, head_dim, cap, key, seqlens, cache, inp)
    return data, rotary_tables(rng, cap, head_dim // 2) if rotary else None


def _share_run(run, cfg, data, rot, present_k, present_v):
    return run_into_present(run, merge_share(cfg), cfg.region, data, rot, present_k, present_v)


SHARE_CONFIGS = [
    ("retain", "cooperative", False),
    ("retain", "per_row", False),
    ("append", "cooperative", False),
    ("append", "per_row", False),
    ("append", "hybrid", False),
    ("append", "cooperative", True),
    ("append", "per_row", True),
    ("append", "hybrid", True),
]


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("region,walk,rotary", SHARE_CONFIGS)
@pytest.mark.parametrize("heads,head_dim", SHAPES)
@pytest.mark.parametrize("types", TYPES, ids="-".join)
def test_merge_share_pass(run, region, walk, rotary, heads, head_dim, types):
    """Each pass alone writes exactly its rows; the other rows keep their poison."""
    cache, inp = types
    # Workgroup 16: the hybrid walk goes cooperative for the small cases, per-row for the rest.
    cfg = MergeShareConfig(
        heads, head_dim, region, walk, rotary, cache, inp, workgroup_size=16, fold=2
    )
    rng = np.random.default_rng(7 + heads + head_dim)
    for cap, key, seqlens in SHARE_CASES:
        data, rot = _share_inputs(rng, heads, head_dim, cap, key, seqlens, cache, inp, rotary)
        pk, pv = poison(data["past_k"].shape, DT[cache]), poison(data["past_v"].shape, DT[cache])
        got_k, got_v = _share_run(run, cfg, data, rot, pk, pv)
        if region == "retain":
            w = ref.merge_share_retain(data["past_k"], data["past_v"], data["seqlens_k"], key)
        else:
            w = ref.merge_share_append(
                data["new_k"], data["new_v"], data["seqlens_k"], cap, heads, rot, DT[cache]
            )
        want_k, want_v = w.over(pk, pv)
        exact = cache == inp or region == "retain"
        (assert_close if rotary or not exact else assert_bits)(got_k, want_k)
        (assert_bits if exact else assert_close)(got_v, want_v)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("walks", [("cooperative", "cooperative"), ("per_row", "hybrid")])
@pytest.mark.parametrize("rotary", [False, True])
def test_merge_share_passes_cover_the_cache(run, walks, rotary):
    """Retain then append on one present buffer: the union is the full merge, no poison left."""
    heads, head_dim = 2, 8
    rng = np.random.default_rng(3)
    retain = MergeShareConfig(heads, head_dim, "retain", walks[0], workgroup_size=16)
    append = MergeShareConfig(heads, head_dim, "append", walks[1], rotary, workgroup_size=16)
    for cap, key, seqlens in SHARE_CASES:
        data, rot = _share_inputs(rng, heads, head_dim, cap, key, seqlens, "f32", "f32", rotary)
        pk, pv = poison(data["past_k"].shape, np.float32), poison(data["past_v"].shape, np.float32)
        k, v = _share_run(run, retain, data, rot, pk, pv)
        k, v = _share_run(run, append, data, rot, k, v)
        w = ref.merge_share(**data, rotary=rot)
        assert w.mask.all()
        assert not np.isnan(k).any() and not np.isnan(v).any()
        (assert_close if rotary else assert_bits)(k, w.key)
        assert_bits(v, w.value)


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("walk", ["cooperative", "per_row", "hybrid"])
def test_merge_share_over_capacity_keeps_newest(run, walk):
    """keySeq > capacity: the append pass fills the cache with the newest tokens, retain nothing.

    (The template's ``activeEnd - keySeq`` wraps here and writes out of bounds.)
    """
    heads, head_dim, cap, key = 2, 8, 3, 5
    rng = np.random.default_rng(11)
    data, rot = _share_inputs(rng, heads, head_dim, cap, key, [4, 0], "f32", "f32", True)
    pk, pv = poison(data["past_k"].shape, np.float32), poison(data["past_v"].shape, np.float32)
    retain_walk = "per_row" if walk == "per_row" else "cooperative"
    retain = MergeShareConfig(heads, head_dim, "retain", retain_walk)
    k, v = _share_run(run, retain, data, rot, pk, pv)
    assert np.isnan(k).all() and np.isnan(v).all()
    append = MergeShareConfig(heads, head_dim, "append", walk, rotary=True)
    k, v = _share_run(run, append, data, rot, k, v)
    newest_k = ref.split_heads(data["new_k"], heads)[:, :, key - cap :]
    newest_v = ref.split_heads(data["new_v"], heads)[:, :, key - cap :]
    want_k = ref.rotate_neox(newest_k, np.arange(cap), rot.cos, rot.sin)
    assert_close(k, want_k)
    assert_bits(v, newest_v)


# ---- config checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make,field",
    [
        (lambda: MergeConfig(0, 8), "kv_heads"),
        (lambda: MergeConfig(2, -8), "head_dim"),
        (lambda: MergeConfig(2, 8, walk="hybrid"), "walk"),
        (lambda: MergeConfig(2, 8, present_type="i32"), "present_type"),
        (lambda: MergeConfig(2, 8, input_type="bf16"), "input_type"),
        (lambda: MergeShareConfig(2, 8, region="prefix"), "region"),
        (lambda: MergeShareConfig(2, 8, "retain", "hybrid"), "walk"),
        (lambda: MergeShareConfig(2, 7, "append", rotary=True), "head_dim"),
        (lambda: MergeShareConfig(2, 8, "retain", rotary=True), "rotary"),
        (lambda: MergeShareConfig(2, 8, rotary=1), "rotary"),
        (lambda: MergeShareConfig(2, 8, workgroup_size=512), "workgroup_size"),
    ],
)
def test_config_errors(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.field == field


# ---- drop-in parity with the legacy template -------------------------------------------------------

LEGACY = [  # (kvdsl config, template variables)
    (MergeConfig(2, 8), dict(mode="merge")),
    (MergeConfig(2, 8, "per_row"), dict(mode="merge", vendor="apple")),
    (
        MergeConfig(2, 8, present_type="f16", input_type="f16"),
        dict(mode="merge", present_type="f16"),
    ),
    (MergeShareConfig(2, 8, "retain"), dict(mode="merge_share")),
    (MergeShareConfig(2, 8, "retain", "per_row"), dict(mode="merge_share", vendor="apple")),
    (MergeShareConfig(2, 8, "append"), dict(mode="merge_share", share_region="append")),
    (
        MergeShareConfig(2, 8, "append", rotary=True),
        dict(mode="merge_share", share_region="append", rotary=True),
    ),
    (
        MergeShareConfig(2, 8, "append", "hybrid", rotary=True),
        dict(mode="merge_share", share_region="append", rotary=True, vendor="apple"),
    ),
    (
        MergeShareConfig(2, 8, "append", "hybrid", present_type="f16", input_type="f16"),
        dict(mode="merge_share", share_region="append", vendor="apple", present_type="f16"),
    ),
]


def _legacy(cfg, extra):
    from tests.helpers import legacy

    vars = legacy.legacy_vars(
        kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, workgroup_size=cfg.workgroup_size, **extra
    )
    return legacy, vars


@pytest.mark.parametrize("cfg,extra", LEGACY)
def test_legacy_interface(cfg, extra):
    """Same binding names, types and order, params struct and dispatch geometry."""
    legacy, vars = _legacy(cfg, extra)
    kernel = merge(cfg) if cfg.mode == "merge" else merge_share(cfg)
    assert legacy.host_interface(kernel.bindings) == legacy.host_interface(
        legacy.legacy_bindings(vars)
    )
    assert kernel.params == legacy.legacy_params_struct(vars)
    # Each workgroup owns the template's WG rows, whatever invocations it runs.
    assert kernel.dispatch.per_group == cfg.workgroup_size
    assert {c.name: c.value for c in kernel.consts}["WG"] == Lit(cfg.workgroup_size, u32)
    for count in (1, 63, 64, 65, 64 * 65535 + 1):
        params = {"count": count, "seq": 9, "pastSeq": 4, "keySeq": 5}
        assert workgroups(kernel, params) == legacy.legacy_workgroups(vars, params)


@pytest.mark.parametrize("cfg,extra", LEGACY)
def test_legacy_outputs(gpu, cfg, extra):
    """The template and kvdsl give the same present cache for valid inputs."""
    from kvdsl.runtime import run

    legacy, vars = _legacy(cfg, extra)
    kernel = merge(cfg) if cfg.mode == "merge" else merge_share(cfg)
    rng = np.random.default_rng(5)
    dt = DT[cfg.present_type]
    heads, hd = cfg.kv_heads, cfg.head_dim
    # keySeq 3 keeps the hybrid walk cooperative, keySeq 40 sends it per row.
    for b, cap, key, seqlens in [(3, 12, 3, [1, 6, 20]), (2, 48, 40, [50, 44])]:
        past = 7
        data = {
            "past_k": nonzero(rng, b * heads * (past if cfg.mode == "merge" else cap) * hd, dt),
            "new_k": nonzero(rng, b * key * heads * hd, dt),
            "seqlens_k": np.array(seqlens, np.int32),
        }
        rot = rotary_tables(rng, cap, hd // 2)
        data["cos_cache"], data["sin_cache"] = rot.cos, rot.sin
        data["past_v"], data["new_v"] = -data["past_k"], data["new_k"][::-1].copy()
        seq = past + key if cfg.mode == "merge" else cap
        rows = b * heads * (key if getattr(cfg, "region", "") == "append" else seq)
        params = {"count": rows, "seq": seq, "pastSeq": past, "keySeq": key}
        params = {f: params[f] for f, _ in kernel.params.fields}
        bufs = {bd.name: data.get(bd.name) for bd in kernel.bindings}
        bufs["present_key"] = poison(b * heads * seq * hd, dt)
        bufs["present_value"] = poison(b * heads * seq * hd, dt)
        mine = run(kernel, bufs, params)
        theirs = legacy.run_legacy(vars, kernel.bindings, kernel.params, dict(bufs), params)
        rotated = getattr(cfg, "rotary", False)
        (assert_close if rotated else assert_bits)(mine["present_key"], theirs["present_key"])
        assert_bits(mine["present_value"], theirs["present_value"])
