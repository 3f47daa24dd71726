"""kvdsl.runtime.windows: the window planner (pure Python) and every mode run by windows on the
GPU at reduced limits, over a cache several windows large held in several buffers, against the
numpy reference of the whole cache (outputs poisoned)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.harness.cases import CASES, Case
from kvdsl.kernels.config import window_bindings
from kvdsl.runtime.layout import to_storage
from kvdsl.runtime.windows import Limits, WindowError, plan_windows, run_windows

# ---- the planner --------------------------------------------------------------------------------


def covered(plan) -> list[int]:
    """How many windows hold each slice."""
    seen = [0] * plan.slices
    for w in plan.windows:
        for s in range(w.first, w.end):
            seen[s] += 1
    return seen


def check_plan(plan, limits: Limits) -> None:
    """Every slice in exactly one window; windows in order, whole, in one buffer; every bound
    range aligned, within the binding limit and inside its buffer; buffers within theirs."""
    assert covered(plan) == [1] * plan.slices
    assert [w.first for w in plan.windows] == sorted(w.first for w in plan.windows)
    for name, per in plan.cache.items():
        sizes = [(e - a) * per for a, e in plan.buffers]
        assert max(sizes) <= limits.buffer
        for w in plan.windows:
            a, e = plan.buffers[w.buffer]
            assert a <= w.first < w.end <= e
            r = plan.cache_range(name, w)
            assert r.offset % limits.alignment == 0
            assert 0 < r.size <= limits.binding
            assert r.offset + r.size <= (e - a) * per
    for name, per in plan.sources.items():
        for w in plan.windows:
            r = plan.source_range(name, w)
            assert r.offset % limits.alignment == 0 and 0 < r.size <= limits.binding
            if plan.by_batch:
                assert w.first % plan.heads == 0 and w.batch_base == w.first // plan.heads
                assert r.offset == w.batch_base * per
                assert r.size == -(-w.end // plan.heads) * per - r.offset


def test_windows_of_the_default_limits_for_a_32_head_16k_cache():
    # 32 heads x 16K tokens x 128 f32: 8 MiB per slice, 256 MiB per K/V: two 128 MiB windows.
    per = 16384 * 128 * 4
    plan = plan_windows(32, 32, {"present_key": per, "present_value": per})
    assert plan.window_slices == 16 and plan.buffer_slices == 32
    assert [(w.first, w.end, w.buffer) for w in plan.windows] == [(0, 16, 0), (16, 32, 0)]
    check_plan(plan, Limits())


def test_a_cache_past_one_buffer_is_split_at_whole_windows():
    # 8 heads x 64K x 128 f32 x 2 batches: 512 MiB per K/V, two 256 MiB buffers.
    per = 65536 * 128 * 4
    plan = plan_windows(16, 8, {"present_key": per})
    assert plan.window_slices == 4 and plan.buffer_slices == 8
    assert [w.buffer for w in plan.windows] == [0, 0, 1, 1]
    assert plan.buffers == ((0, 8), (8, 16))
    assert plan.cache_range("present_key", plan.windows[3]).offset == 4 * per
    check_plan(plan, Limits())


@pytest.mark.parametrize("slice_bytes", [4, 12, 100, 384, 1024, 4096])
@pytest.mark.parametrize("slices", [1, 7, 12, 30, 200])
def test_windows_keep_alignment_and_cover_every_slice_once(slice_bytes, slices):
    limits = Limits(binding=16384, buffer=40000)
    plan = plan_windows(
        slices, 1, {"past_k": slice_bytes, "present_key": 2 * slice_bytes}, limits=limits
    )
    check_plan(plan, limits)
    # The window is the largest multiple of the alignment unit within the binding limit.
    unit = 256 // np.gcd(slice_bytes, 256)
    assert plan.window_slices % unit == 0
    assert plan.window_slices == min(16384 // (2 * slice_bytes) // unit, -(-slices // unit)) * unit


def test_sources_past_one_binding_make_windows_of_whole_batches():
    limits = Limits(binding=4096, buffer=8192)
    # 3 batches x 4 heads; a slice is 256 bytes; a batch of the source is 2048 bytes: the whole
    # source (6144) is past the binding, so windows hold whole batches (two: 8 slices).
    plan = plan_windows(12, 4, {"present_key": 256}, {"new_k": 2048}, limits=limits)
    assert plan.by_batch and plan.window_slices == 8
    assert [(w.first, w.end, w.batch_base) for w in plan.windows] == [(0, 8, 0), (8, 12, 2)]
    check_plan(plan, limits)
    # A source that fits one binding is bound whole, and windows need not start on a batch.
    plan = plan_windows(12, 4, {"present_key": 256}, {"new_k": 256}, limits=limits)
    assert not plan.by_batch and plan.window_slices == 12
    assert plan.source_range("new_k", plan.windows[0]).size == 768


def test_a_limit_that_cannot_be_kept_is_an_error_naming_it():
    with pytest.raises(
        WindowError,
        match=r"'present_key': one \(batch, kv head\) slice is 8192 bytes, past the binding limit of 4096",
    ):
        plan_windows(4, 1, {"present_key": 8192}, limits=Limits(binding=4096))
    with pytest.raises(
        WindowError, match="'cos_cache' is bound whole: 5000 bytes, past the binding limit of 4096"
    ):
        plan_windows(
            4, 1, {"present_key": 256}, whole={"cos_cache": 5000}, limits=Limits(binding=4096)
        )
    with pytest.raises(WindowError, match="'src_k': one batch of the source is 8192 bytes"):
        plan_windows(8, 2, {"present_key": 256}, {"src_k": 8192}, limits=Limits(binding=4096))
    # 100-byte slices align every 64 slices (6400 bytes), past a 4096-byte binding.
    with pytest.raises(
        WindowError, match="a multiple of 64 slices .* 6400 bytes, past the binding limit of 4096"
    ):
        plan_windows(100, 1, {"present_key": 100}, limits=Limits(binding=4096))
    with pytest.raises(WindowError, match="slices=6: expected a multiple of heads=4"):
        plan_windows(6, 4, {"present_key": 256})
    with pytest.raises(WindowError, match="limits alignment=100: expected a power of two"):
        Limits(alignment=100)


# ---- every mode by windows on the GPU -----------------------------------------------------------

#: One windowed variant per mode (copy: its flat variant, position-independent), with the case
#: number whose shape has the most slices.
MODES = [
    ("transpose_windowed_llama31_8b", 2),
    ("copy_flat_llama31_8b", 2),
    ("merge_windowed_llama31_8b", 1),
    ("merge_share_retain_windowed_llama31_8b", 1),
    ("merge_share_append_rotary_windowed_llama31_8b", 1),
    ("window_shift_windowed_llama31_8b", 1),
    ("window_shift_shift_windowed_gemma2_2b", 1),
    ("window_shift_append_rotary_windowed_llama31_8b", 1),
    ("build_rotary_windowed_llama31_8b", 1),
    ("build_knorm_rotary_windowed_qwen3_06b", 1),
    ("build_quant_int8_windowed_llama31_8b", 1),
    ("build_quant_int4_windowed_llama31_8b", 1),
    ("append_quant_int8_windowed_llama31_8b", 1),
    ("append_quant_int4_windowed_llama31_8b", 1),
    # the packed bindings (rotary_table, kv_scale), bound whole
    ("append_quant_int8_rotary_windowed_llama31_8b", 1),
    ("build_quant_int8_knorm_rotary_windowed_qwen3_06b", 1),
    ("append_quant_int8_knorm_rotary_windowed_qwen3_06b", 1),
]


def test_every_mode_has_a_windowed_run():
    """Every mode but the dense and paged ones, qkv, attend's and KIVI's (which refuse
    ``window=True``; a paged pool is bound whole, attention reads a head's whole cache) has a
    windowed run."""
    own = ("dense_", "paged_", "attend", "kivi_")
    dense = {m for m in catalog.MODES if m.startswith(own)} | {"qkv"}
    assert dense and {catalog.config(n).mode for n, _ in MODES} == set(catalog.MODES) - dense


def slices_of(cfg, case: Case) -> int:
    """The case's ``(batch, kv head)`` slices (copy's rows are its slices)."""
    return case.params["count"] if cfg.mode == "copy" else case.shape["batch"] * cfg.kv_heads


def reduced_limits(kernel, case: Case, heads: int, slices: int, cache, sources):
    """The smallest binding limit (a multiple of 256) under which the case plans into more than
    one window, and the smallest buffer limit that holds every buffer the run makes: a cache
    buffer of one window (two where there are four or more), a source's window, a whole
    binding."""
    nbytes = {b.name: len(to_storage(b.elem, case.buffers[b.name])) for b in kernel.bindings}
    per_cache = {n: nbytes[n] // slices for n in nbytes if n in cache}
    per_source = {n: nbytes[n] // (slices // heads) for n in nbytes if n in sources}
    whole = {n: v for n, v in nbytes.items() if n not in cache and n not in sources}
    for binding in range(256, max(nbytes.values()) + 256, 256):
        try:
            plan = plan_windows(
                slices, heads, per_cache, per_source, whole, Limits(binding, binding)
            )
        except WindowError:
            continue
        per_buffer = 2 if len(plan.windows) >= 4 else 1
        window = plan.window_slices * max(per_cache.values()) * per_buffer
        pieces = [plan.source_range(n, w).size for n in per_source for w in plan.windows]
        limits = Limits(binding, max([window, *pieces, *whole.values()]))
        return limits, plan_windows(slices, heads, per_cache, per_source, whole, limits)
    raise AssertionError("no binding limit plans the case")


@pytest.mark.parametrize("name,i", MODES, ids=[n for n, _ in MODES])
def test_every_mode_by_windows_matches_the_reference_of_the_whole_cache(name, i):
    cfg, kernel = catalog.config(name), catalog.build(name)
    case = CASES[cfg.mode](cfg, np.random.default_rng(11), i)
    heads = 1 if cfg.mode == "copy" else cfg.kv_heads
    slices = slices_of(cfg, case)
    cache, sources = window_bindings(cfg.mode)
    limits, plan = reduced_limits(kernel, case, heads, slices, cache, sources)
    assert len(plan.windows) >= (2 if plan.by_batch else 3)
    # A packed int4 cache is half its f32 source: a buffer that holds one batch's source holds
    # both windows of the case's two batches (append_quant_int4 spans buffers).
    assert len(plan.buffers) >= (1 if name == "build_quant_int4_windowed_llama31_8b" else 2)
    params = dict(case.params)
    if cfg.mode == "transpose":
        params["count"] = slices * params["kvSeq"]
    got = run_windows(
        kernel,
        dict(case.buffers),
        params,
        heads=heads,
        slices=slices,
        cache=cache,
        sources=sources,
        limits=limits,
    )
    assert case.against_reference(got) == []


def test_buffers_that_do_not_split_into_slices_are_an_error():
    name = "merge_share_retain_windowed_llama31_8b"
    cfg, kernel = catalog.config(name), catalog.build(name)
    case = CASES[cfg.mode](cfg, np.random.default_rng(11), 1)
    slices = slices_of(cfg, case)
    cache, _ = window_bindings(cfg.mode)
    bufs = dict(case.buffers)
    bufs["past_k"] = np.concatenate([bufs["past_k"], bufs["past_k"][:4]])  # one vector more
    with pytest.raises(
        WindowError, match="binding 'past_k': .* bytes do not split into .* equal slices"
    ):
        run_windows(kernel, bufs, case.params, heads=cfg.kv_heads, slices=slices, cache=cache)


def test_a_kernel_without_a_base_runs_by_windows_only_without_sources():
    name = "merge_flat_llama31_8b"
    cfg, kernel = catalog.config(name), catalog.build(name)
    case = CASES[cfg.mode](cfg, np.random.default_rng(11), 1)
    cache, sources = window_bindings(cfg.mode)
    with pytest.raises(WindowError, match="kernel merge_flat_llama31_8b has no headBase param"):
        run_windows(
            kernel,
            dict(case.buffers),
            case.params,
            heads=8,
            slices=16,
            cache=cache,
            sources=sources,
        )


def test_limits_past_the_devices_are_refused(gpu):
    name = "merge_share_retain_windowed_llama31_8b"
    cfg, kernel = catalog.config(name), catalog.build(name)
    case = CASES[cfg.mode](cfg, np.random.default_rng(11), 1)
    cache, sources = window_bindings(cfg.mode)
    run = dict(heads=8, slices=case.shape["batch"] * 8, cache=cache, sources=sources)
    for limits, message in (
        (Limits(binding=2**40), "limits binding=1099511627776: expected at most the device's"),
        (Limits(alignment=1), "limits alignment=1: expected a multiple of the device's"),
    ):
        with pytest.raises(WindowError, match=message):
            run_windows(kernel, dict(case.buffers), case.params, limits=limits, **run)
