"""The legacy template through tests/helpers/legacy.py: every render compiles under naga (or is a
known template defect), and its GPU runs mean what kvdsl.reference says, on poisoned outputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kvdsl import reference as ref
from kvdsl.emit import emit
from kvdsl.kernels.transpose import TransposeConfig, transpose
from kvdsl.reference import KNorm, Quant, Rotary
from kvdsl.runtime import CompileError, compile_wgsl
from tests.helpers.legacy import (
    legacy_bindings,
    legacy_params_struct,
    legacy_vars,
    legacy_workgroups,
    render,
    resource_declarations,
    run_legacy,
)

B, H, D = 2, 3, 8
POISON = {np.float32: np.nan, np.float16: np.nan, np.int32: -559038737, np.uint32: 0xDEADBEEF}


def variants():
    """(mode, options) for every mode and sub-option of the template."""
    for vec4, pt in itertools.product([False, True], ["f32", "f16"]):
        yield "transpose", dict(vec4=vec4, present_type=pt)
    for vendor, pt in itertools.product(["nvidia", "apple"], ["f32", "u32", "f16"]):
        yield "copy", dict(vendor=vendor, present_type=pt)
    for vendor, pt in itertools.product(["nvidia", "apple"], ["f32", "f16"]):
        yield "merge", dict(vendor=vendor, present_type=pt)
    for vendor, region, rotary, pt in itertools.product(
        ["nvidia", "apple"], ["retain", "append"], [False, True], ["f32", "f16"]
    ):
        yield "merge_share", dict(
            vendor=vendor, share_region=region, rotary=rotary, present_type=pt
        )
    for k_norm, rotary in itertools.product([False, True], [False, True]):
        yield "build", dict(k_norm=k_norm, rotary=rotary)
    for mode, bits, k_norm, rotary in itertools.product(
        ["build_quant", "append_quant"], [8, 4], [False, True], [False, True]
    ):
        yield mode, dict(bits=bits, k_norm=k_norm, rotary=rotary)
    for region, rotary, pt in itertools.product(
        ["all", "shift", "append"], [False, True], ["f32", "f16"]
    ):
        yield "window_shift", dict(shift_region=region, rotary=rotary, present_type=pt)


def variant_id(mode: str, opts: dict) -> str:
    return "-".join([mode] + [f"{k}={v}" for k, v in opts.items()])


# Renders naga rejects: template defects, each with the part of naga's message that names it.
KNOWN_INVALID = {
    # The append region always rotates, but HALF is declared only under hasRotary.
    "window_shift-shift_region=append-rotary=False-present_type=f32": "`HALF`",
    # The append region loads f16 K into an f32 local without a conversion.
    "window_shift-shift_region=append-rotary=False-present_type=f16": "`f16` to `f32`",
    "window_shift-shift_region=append-rotary=True-present_type=f16": "`f16` to `f32`",
    # The cooperative append walk stores the f32 rotation into an f16 cache unconverted.
    "merge_share-vendor=nvidia-share_region=append-rotary=True-present_type=f16": "`f32` to `f16`",
    "merge_share-vendor=apple-share_region=append-rotary=True-present_type=f16": "`f32` to `f16`",
}


def interface(mode: str, **opts):
    v = legacy_vars(mode, kv_heads=H, head_dim=D, **opts)
    return v, legacy_bindings(v), legacy_params_struct(v)


def test_declarations_are_the_emitters():
    k = transpose(TransposeConfig(H, D, True, present_type="f16"))
    decls = resource_declarations(k.bindings, k.params)
    assert decls.startswith("enable f16;\n\nstruct Params {")
    assert emit(k).startswith(decls + "\n\nconst KV_HEADS")
    v = legacy_vars("transpose", kv_heads=H, head_dim=D, vec4=True, present_type="f16")
    assert legacy_bindings(v) == k.bindings and legacy_params_struct(v) == k.params
    assert decls in render(v, k.bindings, k.params)


@pytest.mark.parametrize(
    "mode, opts", [pytest.param(m, o, id=variant_id(m, o)) for m, o in variants()]
)
def test_render_compiles_or_is_a_known_defect(gpu, mode, opts):
    v, bindings, struct = interface(mode, **opts)
    wgsl = render(v, bindings, struct)
    defect = KNOWN_INVALID.get(variant_id(mode, opts))
    if len(bindings) > 8:
        # Not a WGSL error: WebGPU's default limit is 8 storage buffers per stage, and the
        # template's quantised modes with rotary (and K norm) bind 9 or 10.
        assert mode in ("build_quant", "append_quant") and opts["rotary"]
        defect = "limit is 8"
    if defect is None:
        compile_wgsl(wgsl)
    else:
        with pytest.raises(CompileError, match=defect):
            compile_wgsl(wgsl)


def test_legacy_workgroups_fold():
    v = legacy_vars("copy", workgroup_size=64, fold=3)
    assert legacy_workgroups(v, {"count": 64 * 7 - 1}) == (3, 3, 1)
    assert legacy_workgroups(v, {"count": 64 * 3}) == (3, 1, 1)


# ---- GPU runs against the reference ------------------------------------------------------------


def rnd(rng, *shape):
    mag = rng.uniform(0.25, 2.0, shape)
    return (mag * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def poisoned(shape, dtype):
    return np.full(shape, POISON[dtype], dtype)


def rotary_caches(rng, positions):
    theta = rng.uniform(0.1, 3.0, (positions, D // 2))
    return Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))


def check_written(out, want: ref.Written, before_k, before_v):
    """GPU caches equal the reference where written and the poison everywhere else."""
    k, v = want.over(before_k, before_v)
    np.testing.assert_array_equal(out["present_key"].reshape(k.shape), k)
    np.testing.assert_array_equal(out["present_value"].reshape(v.shape), v)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("vec4", [False, True])
@pytest.mark.parametrize("present", ["f32", "f16"])
def test_transpose_matches_reference(gpu, rng, vec4, present):
    s = 5
    dt = {"f32": np.float32, "f16": np.float16}[present]
    # fold=2 makes the dispatch spill into gid.y.
    v, bindings, struct = interface(
        "transpose", vec4=vec4, present_type=present, fold=2, workgroup_size=8
    )
    key, value = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    buffers = {
        "key": key.reshape(-1),
        "value": value.reshape(-1),
        "present_key": poisoned(B * H * s * D, dt),
        "present_value": poisoned(B * H * s * D, dt),
    }
    params = {"batchSize": B, "kvSeq": s}
    assert legacy_workgroups(v, params)[1] > 1
    out = run_legacy(v, bindings, struct, buffers, params)
    k, val = ref.transpose(key, value, H, dt)
    np.testing.assert_array_equal(out["present_key"].reshape(k.shape), k)
    np.testing.assert_array_equal(out["present_value"].reshape(val.shape), val)


@pytest.mark.parametrize("vendor", ["nvidia", "apple"])
def test_copy_and_merge_match_reference(gpu, rng, vendor):
    rows = B * H * 7
    words = rng.integers(1, 2**32, (rows, D), dtype=np.uint32)
    v, bindings, struct = interface("copy", vendor=vendor, present_type="u32")
    buffers = {"src_k": words, "src_v": ~words}
    buffers |= {n: poisoned((rows + 3, D), np.uint32) for n in ("present_key", "present_value")}
    out = run_legacy(v, bindings, struct, buffers, {"count": rows})
    k, val = ref.copy(words, ~words)
    np.testing.assert_array_equal(out["present_key"][:rows], k)
    np.testing.assert_array_equal(out["present_value"][:rows], val)
    assert np.all(out["present_key"][rows:] == 0xDEADBEEF)

    past, new = 4, 3
    pk, pv = rnd(rng, B, H, past, D), rnd(rng, B, H, past, D)
    nk, nv = rnd(rng, B, new, H * D), rnd(rng, B, new, H * D)
    v, bindings, struct = interface("merge", vendor=vendor)
    buffers = {"past_k": pk, "past_v": pv, "new_k": nk, "new_v": nv}
    buffers |= {
        n: poisoned((B, H, past + new, D), np.float32) for n in ("present_key", "present_value")
    }
    params = {"count": B * H * (past + new), "seq": past + new, "pastSeq": past, "keySeq": new}
    out = run_legacy(v, bindings, struct, buffers, params)
    k, val = ref.merge(pk, pv, nk, nv)
    np.testing.assert_array_equal(out["present_key"], k)
    np.testing.assert_array_equal(out["present_value"], val)


@pytest.mark.parametrize("vendor", ["nvidia", "apple"])
@pytest.mark.parametrize("rotary", [False, True])
def test_merge_share_passes_match_reference(gpu, rng, vendor, rotary):
    cap, s = 9, 3
    seqlens = np.array([5, 1], np.int32)  # batch 1: right-padded first prompt
    pk, pv = rnd(rng, B, H, cap, D), rnd(rng, B, H, cap, D)
    nk, nv = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    rot = rotary_caches(rng, cap) if rotary else None
    before = poisoned((B, H, cap, D), np.float32)
    v, bindings, struct = interface(
        "merge_share", vendor=vendor, share_region="retain", rotary=rotary
    )
    buffers = {"past_k": pk, "past_v": pv, "seqlens_k": seqlens}
    buffers |= {"present_key": before, "present_value": before}
    out = run_legacy(v, bindings, struct, buffers, {"count": B * H * cap, "seq": cap, "keySeq": s})
    check_written(out, ref.merge_share_retain(pk, pv, seqlens, s), before, before)

    v, bindings, struct = interface(
        "merge_share", vendor=vendor, share_region="append", rotary=rotary
    )
    buffers = {"new_k": nk, "new_v": nv, "seqlens_k": seqlens}
    buffers |= {"cos_cache": rot.cos, "sin_cache": rot.sin} if rotary else {}
    buffers |= {"present_key": before, "present_value": before}
    out = run_legacy(v, bindings, struct, buffers, {"count": B * H * s, "seq": cap, "keySeq": s})
    want = ref.merge_share_append(nk, nv, seqlens, cap, H, rot)
    k, val = want.over(before, before)
    np.testing.assert_allclose(out["present_key"], k, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out["present_value"], val)


def quant_buffers(rng, bits, per_channel):
    n = H * D if per_channel else 1
    qmax = 2 ** (bits - 1) - 1
    return Quant(
        bits,
        rng.uniform(1.5, 3.0, n).astype(np.float32) / qmax,
        rng.uniform(1.5, 3.0, n).astype(np.float32) / qmax,
        per_channel,
    )


def assert_quant_close(got, want, bits):
    """Equal, except a float-rounding difference of one step where x / scale lands near .5."""
    if bits == 4:
        got, want = ref.unpack_int4(got), ref.unpack_int4(want)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1 and np.mean(diff == 0) > 0.98


@pytest.mark.parametrize(
    "bits, k_norm, rotary",
    [(0, True, True), (0, False, False), (8, True, False), (8, False, True), (4, False, True)]
    + [(4, True, False), (8, False, False)],
)  # bits 0: the float build mode; quant with norm and rotary needs 9 storage buffers
def test_build_modes_match_reference(gpu, rng, bits, k_norm, rotary):
    s, past = 4, 3
    nk, nv = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    norm = KNorm(rnd(rng, D), 1e-5) if k_norm else None
    rot = rotary_caches(rng, past + s) if rotary else None
    mode = "build" if bits == 0 else "build_quant"
    v, bindings, struct = interface(mode, bits=bits or 8, k_norm=k_norm, rotary=rotary, eps=1e-5)
    buffers = {"src_k": nk, "src_v": nv}
    buffers |= {"k_norm_weight": norm.weight} if k_norm else {}
    buffers |= {"cos_cache": rot.cos, "sin_cache": rot.sin} if rotary else {}
    params = {"count": B * H * s, "seq": s, "pastSeq": past}
    if bits == 0:
        k, val = ref.build(nk, nv, H, past, norm, rot)
    else:
        quant = quant_buffers(rng, bits, per_channel=rotary)
        buffers |= {"k_scale": quant.k_scale, "v_scale": quant.v_scale}
        params["perChannel"] = int(quant.per_channel)
        k, val = ref.build_quant(nk, nv, H, quant, past, norm, rot)
    dt = k.dtype.type
    buffers |= {n: poisoned(k.shape, dt) for n in ("present_key", "present_value")}
    out = run_legacy(v, bindings, struct, buffers, params)
    if bits == 0:
        np.testing.assert_allclose(out["present_key"], k, rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(out["present_value"], val)
    else:
        assert_quant_close(out["present_key"], k, bits)
        assert_quant_close(out["present_value"], val, bits)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("per_channel", [False, True])
def test_append_quant_matches_reference(gpu, rng, bits, per_channel):
    # With rotary the template binds 9 storage buffers (past WebGPU's default 8): K norm only.
    cap, s = 10, 3
    seqlens = np.array([7, 4], np.int32)
    nk, nv = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    norm = KNorm(rnd(rng, D), 1e-5)
    quant = quant_buffers(rng, bits, per_channel)
    v, bindings, struct = interface("append_quant", bits=bits, k_norm=True, eps=1e-5)
    want = ref.append_quant(nk, nv, seqlens, cap, H, quant, norm)
    before = poisoned(want.key.shape, want.key.dtype.type)
    buffers = {"src_k": nk, "src_v": nv, "seqlens_k": seqlens, "k_norm_weight": norm.weight}
    buffers |= {"k_scale": quant.k_scale, "v_scale": quant.v_scale}
    buffers |= {"present_key": before, "present_value": before}
    params = {"count": B * H * s, "seq": s, "totalSeq": cap, "pastSeq": 0}
    out = run_legacy(v, bindings, struct, buffers, params | {"perChannel": int(per_channel)})
    m = want.mask
    assert np.all(out["present_key"][~m] == before[~m])
    assert np.all(out["present_value"][~m] == before[~m])
    rows = lambda a: a[m].reshape(B, H, s, -1)  # noqa: E731
    assert_quant_close(rows(out["present_key"]), rows(want.key), bits)
    assert_quant_close(rows(out["present_value"]), rows(want.value), bits)


@pytest.mark.parametrize("region, rotary", [("shift", False), ("append", True), ("all", False)])
def test_window_shift_matches_reference(gpu, rng, region, rotary):
    cap, s = 6, 2
    seqlens = np.array([3, 9], np.int32)  # batch 0 fills without evicting, batch 1 slides
    pk, pv = rnd(rng, B, H, cap, D), rnd(rng, B, H, cap, D)
    nk, nv = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    rot = rotary_caches(rng, 10) if rotary else None
    before = poisoned((B, H, cap, D), np.float32)
    v, bindings, struct = interface("window_shift", shift_region=region, rotary=rotary)
    names = {"past_k": pk, "past_v": pv, "new_k": nk, "new_v": nv, "seqlens_k": seqlens}
    names |= {"cos_cache": rot.cos, "sin_cache": rot.sin} if rotary else {}
    names |= {"present_key": before, "present_value": before}
    buffers = {b.name: names[b.name] for b in bindings}
    rows = s if region == "append" else cap
    out = run_legacy(v, bindings, struct, buffers, {"count": B * H * rows, "seq": cap, "keySeq": s})
    want = ref.window_shift(pk, pv, nk, nv, seqlens, region, rot)
    k, val = want.over(before, before)
    np.testing.assert_allclose(out["present_key"], k, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out["present_value"], val)


def test_window_shift_all_region_does_not_rotate(gpu, rng):
    """Template defect, pinned: with hasRotary the ``all`` region appends K unrotated."""
    cap, s = 6, 2
    seqlens = np.array([3, 9], np.int32)
    pk, pv = rnd(rng, B, H, cap, D), rnd(rng, B, H, cap, D)
    nk, nv = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    v, bindings, struct = interface("window_shift", shift_region="all", rotary=True)
    before = poisoned((B, H, cap, D), np.float32)
    buffers = {"past_k": pk, "past_v": pv, "new_k": nk, "new_v": nv, "seqlens_k": seqlens}
    buffers |= {"present_key": before, "present_value": before}
    out = run_legacy(v, bindings, struct, buffers, {"count": B * H * cap, "seq": cap, "keySeq": s})
    unrotated = ref.window_shift(pk, pv, nk, nv, seqlens, "all", None)
    rotated = ref.window_shift(pk, pv, nk, nv, seqlens, "all", rotary_caches(rng, 10))
    np.testing.assert_array_equal(out["present_key"], unrotated.key)
    assert not np.allclose(out["present_key"], rotated.key)
