"""kvdsl.kernels.dense_modes and dense_convert: the cache modes over a dense cache on the
interpreter (and the GPU) against kvdsl.reference.dense_modes, bit for bit; passes that compose
(shift + append = all, retain + dense_append = the whole step); zeroed rows read back as zero;
format-to-format copies read back within half a step; the configs' refusals; every kernel
within WebGPU's default 8 storage buffers."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import catalog, interp
from kvdsl.ir.features import limits
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import DenseAppendConfig, DenseReadConfig, dense_append, dense_read
from kvdsl.kernels.dense_convert import DenseConvertConfig, dense_convert
from kvdsl.kernels.dense_modes import (
    DenseRetainConfig,
    DenseWindowShiftConfig,
    dense_retain,
    dense_window_shift,
    word_width,
)
from kvdsl.reference import dense_modes as dm
from kvdsl.reference import formats as fm
from kvdsl.reference.judge import POISON_BITS
from kvdsl.reference.modes import Rotary

F32 = np.float32
POISON = POISON_BITS[4]
KINDS = [(f, "inline") for f in fm.FORMATS] + [(f, "side") for f in fm.DENSE]
NEW_MODES = ("dense_retain", "dense_window_shift", "dense_convert")


def rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.standard_normal(shape).astype(F32)
    return (x * 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))).astype(F32)


def past_cache(cfg, rng, b: int, cap: int):
    """Random stored rows (words of any bits) and non-zero side scales."""
    shape = (b, cfg.kv_heads, cap)
    k = rng.integers(0, 2**32, (*shape, cfg.row_words), dtype=np.uint64).astype(np.uint32)
    v = rng.integers(0, 2**32, (*shape, cfg.row_words), dtype=np.uint64).astype(np.uint32)
    side = rng.uniform(0.5, 2.0, (*shape, cfg.side_words)).astype(F32)
    return k, v, side


def poisoned(n: int, dtype=np.uint32) -> np.ndarray:
    return np.full(n, POISON, np.uint32).view(dtype)


def run_pass(kernel, cfg, bufs, params, present=None):
    """Run ``kernel``; the present (and side scales) start poisoned, or as ``present``."""
    b, cap = params["batch"], params["seq"]
    n = b * cfg.kv_heads * cap
    out = present or {
        "present_key": poisoned(n * cfg.row_words),
        "present_value": poisoned(n * cfg.row_words),
    }
    if not cfg.inline and "present_scales" not in out:
        out["present_scales"] = poisoned(n * cfg.side_words, F32)
    got = interp.run(kernel, bufs | out, {k: v for k, v in params.items() if k != "batch"})
    return {k: got[k] for k in out}


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_retain_copies_every_row_outside_the_window_untouched(fmt, scales):
    cfg = DenseRetainConfig(2, 64, format=fmt, scales=scales)
    rng = np.random.default_rng(1)
    b, cap, key_seq = 3, 10, 3
    k, v, side = past_cache(cfg, rng, b, cap)
    seqlens = np.array([0, 5, 30], np.int32)  # a right-padded prompt, the middle, past the end
    bufs = {"past_k": k.reshape(-1), "past_v": v.reshape(-1), "seqlens_k": seqlens}
    if scales == "side":
        bufs["past_scales"] = side.reshape(-1)
    got = run_pass(dense_retain(cfg), cfg, bufs, {"batch": b, "count": b * 2 * cap, "seq": cap,
                                                   "keySeq": key_seq})  # fmt: skip
    want = dm.dense_retain(k, v, side, seqlens, key_seq)
    window = ~want.rows  # the append window's rows keep the poison
    assert window.sum() == 2 * 3 * key_seq
    for name, w in (("present_key", want.key), ("present_value", want.value)):
        g = got[name].reshape(w.shape)
        assert np.array_equal(g[want.rows], w[want.rows])
        assert (g[window] == POISON).all()
    if scales == "side":
        g = got["present_scales"].reshape(want.scales.shape)
        assert np.array_equal(g[want.rows].view(np.uint32), want.scales[want.rows].view(np.uint32))
        assert (g[window].view(np.uint32) == POISON).all()


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_retain_then_dense_append_is_the_whole_step(fmt, scales):
    """The two passes of a buffer-sharing step over one present: rows outside the window are
    the past's, the window's are the new tokens quantised (rotated at their row), nothing is
    left poisoned."""
    rng = np.random.default_rng(2)
    h, d, b, cap, s = 2, 64, 2, 9, 4
    retain = DenseRetainConfig(h, d, format=fmt, scales=scales)
    append = DenseAppendConfig(h, d, format=fmt, scales=scales, rotary=True)
    k, v, side = past_cache(retain, rng, b, cap)
    new_k, new_v = rows(rng, b, s, h * d), rows(rng, b, s, h * d)
    theta = rng.uniform(0, 6.3, (cap, d // 2))
    rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
    seqlens = np.array([6, 2], np.int32)
    bufs = {"past_k": k.reshape(-1), "past_v": v.reshape(-1), "seqlens_k": seqlens}
    if scales == "side":
        bufs["past_scales"] = side.reshape(-1)
    params = {"batch": b, "count": b * h * cap, "seq": cap, "keySeq": s}
    present = run_pass(dense_retain(retain), retain, bufs, params)
    bufs = {"src_k": new_k.reshape(-1), "src_v": new_v.reshape(-1), "seqlens_k": seqlens}
    bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
    present = run_pass(dense_append(append), retain, bufs, params | {"count": b * h * s}, present)
    kept = dm.dense_retain(k, v, side, seqlens, s)
    new = fm.dense_append(new_k, new_v, seqlens, cap, h, fmt, scales == "inline", rot)
    assert np.array_equal(kept.rows, ~new.rows)
    want_k = np.where(new.rows[..., None], new.key, kept.key)
    assert np.array_equal(present["present_key"].reshape(want_k.shape), want_k)
    if scales == "side":
        want_s = np.where(new.rows[..., None], new.scales, kept.scales)
        got_s = present["present_scales"].reshape(want_s.shape)
        assert np.array_equal(got_s.view(np.uint32), want_s.view(np.uint32))


def shift_inputs(cfg, rng, b, cap, key_seq, seqlens):
    h, d = cfg.kv_heads, cfg.head_dim
    k, v, side = past_cache(cfg, rng, b, cap)
    new_k, new_v = rows(rng, b, key_seq, h * d), rows(rng, b, key_seq, h * d)
    positions = int(seqlens.max()) + key_seq + 1
    theta = rng.uniform(0, 6.3, (positions, d // 2))
    rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
    past = {"past_k": k.reshape(-1), "past_v": v.reshape(-1)}
    if not cfg.inline:
        past["past_scales"] = side.reshape(-1)
    new = {"src_k": new_k.reshape(-1), "src_v": new_v.reshape(-1)}
    return (k, v, side, new_k, new_v, rot), past, new


@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_window_shift_regions_match_the_reference_and_compose(fmt):
    """'shift' and 'append' (rotary) write disjoint rows whose union is 'all''s present, bit for
    bit, each pass as the reference says; every row of the present is written."""
    rng = np.random.default_rng(3)
    h, d, b, cap, s = 2, 64, 4, 8, 3
    seqlens = np.array([1, 4, 8, 40], np.int32)  # padded prompt, middle, just full, evicting
    cfgs = {
        r: DenseWindowShiftConfig(h, d, format=fmt, region=r, rotary=r != "shift")
        for r in ("shift", "append", "all")
    }
    (k, v, side, new_k, new_v, rot), past, new = shift_inputs(cfgs["all"], rng, b, cap, s, seqlens)
    sl = {"seqlens_k": seqlens}
    params = {"batch": b, "count": b * h * cap, "seq": cap, "keySeq": s}
    out = {}
    for r, cfg in cfgs.items():
        bufs = sl | (past if r != "append" else {}) | (new if r != "shift" else {})
        if r == "all":
            bufs["rotary_table"] = rot.table(d // 2)
        elif r == "append":
            bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
        p = params | ({"count": b * h * s} if r == "append" else {})
        out[r] = run_pass(dense_window_shift(cfg), cfg, bufs, p)
        want = dm.dense_window_shift(k, v, side, new_k, new_v, seqlens, fmt, True, r, rot)
        for name, w in (("present_key", want.key), ("present_value", want.value)):
            g = out[r][name].reshape(w.shape)
            assert np.array_equal(g[want.rows], w[want.rows]), (r, name)
            assert (g[~want.rows] == POISON).all(), (r, name)
    for name in ("present_key", "present_value"):
        shift, append = out["shift"][name], out["append"][name]
        both = np.where(shift != POISON, shift, append)
        assert np.array_equal(both, out["all"][name])
        assert not (out["all"][name] == POISON).any()


@pytest.mark.parametrize("fmt", fm.DENSE)
def test_side_scales_slide_with_their_rows(fmt):
    rng = np.random.default_rng(4)
    h, d, b, cap, s = 2, 32, 3, 6, 2
    seqlens = np.array([3, 6, 20], np.int32)
    cfgs = {r: DenseWindowShiftConfig(h, d, format=fmt, scales="side", region=r)
            for r in ("shift", "append")}  # fmt: skip
    (k, v, side, new_k, new_v, _), past, new = shift_inputs(cfgs["shift"], rng, b, cap, s, seqlens)
    params = {"batch": b, "count": b * h * cap, "seq": cap, "keySeq": s}
    shift = run_pass(dense_window_shift(cfgs["shift"]), cfgs["shift"], {"seqlens_k": seqlens}
                     | past, params)  # fmt: skip
    both = run_pass(dense_window_shift(cfgs["append"]), cfgs["append"], {"seqlens_k": seqlens}
                    | new, params | {"count": b * h * s}, shift)  # fmt: skip
    want = dm.dense_window_shift(k, v, side, new_k, new_v, seqlens, fmt, False, "all")
    assert np.array_equal(both["present_key"].reshape(want.key.shape), want.key)
    got = both["present_scales"].reshape(want.scales.shape)
    assert np.array_equal(got.view(np.uint32), want.scales.view(np.uint32))
    plan = dm.window_plan(seqlens, s, cap)
    assert plan.evicted[2] > 0 and plan.kept[0] < cap  # rows slid, rows zeroed


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_zeroed_rows_read_back_as_zero(fmt, scales):
    """A row past ``resident`` is zero words and zero scales; dense_read (and the reference's
    reader) gives zero for each of its elements: +0.0, or -0.0 where a nibble 0 is code -8
    (int4, q4_0)."""
    rng = np.random.default_rng(5)
    cfg = DenseWindowShiftConfig(1, 64, format=fmt, scales=scales, region="shift")
    (k, v, side, *_), past, _ = shift_inputs(cfg, rng, 1, 6, 1, np.array([1], np.int32))
    params = {"batch": 1, "count": 6, "seq": 6, "keySeq": 1}
    got = run_pass(dense_window_shift(cfg), cfg, {"seqlens_k": np.array([1], np.int32)} | past,
                   params)  # fmt: skip
    words = got["present_key"].reshape(6, cfg.row_words)[2:]  # 2 rows resident, 4 zeroed
    assert (words == 0).all()
    read = DenseReadConfig(1, 64, format=fmt, scales=scales)
    bufs = {"cache_key": words.reshape(-1), "cache_value": words.reshape(-1)}
    if scales == "side":
        zero = got["present_scales"].reshape(6, -1)[2:]
        assert (zero.view(np.uint32) == 0).all()
        bufs["cache_scales"] = zero.reshape(-1)
    bufs |= {"key": poisoned(4 * 64, F32), "value": poisoned(4 * 64, F32)}
    out = interp.run(dense_read(read), bufs, {"count": 4})["key"]
    assert (out == 0).all()
    negative = fmt in ("int4", "q4_0")
    assert (np.signbit(out) == negative).all()
    zeros = None if scales == "inline" else np.zeros((4, fm.stat_words(fmt)), F32)
    assert (fm.dequantize_rows(fmt, words, zeros, 64, scales == "inline") == 0).all()


CONVERSIONS = [
    ("f16", "inline", "int8", "inline"),
    ("f32", "inline", "q4_0", "inline"),
    ("int8", "inline", "q4_0", "inline"),
    ("q8_0", "inline", "int4_asym", "side"),
    ("int4_asym", "side", "q8_0", "inline"),
    ("int4", "side", "int4", "inline"),
]


@pytest.mark.parametrize("source, source_scales, fmt, scales", CONVERSIONS)
def test_convert_matches_the_reference_and_reads_back_within_half_a_step(
    source, source_scales, fmt, scales
):
    rng = np.random.default_rng(6)
    n, d = 37, 64
    cfg = DenseConvertConfig(
        1, d, source=source, source_scales=source_scales, format=fmt, scales=scales
    )
    x = [rows(rng, n, d) for _ in range(2)]
    x[0][0] = 0
    src_side = None
    if source in ("f32", "f16"):
        src = [a.astype(np.float16 if source == "f16" else F32) for a in x]
    else:
        stored = [fm.quantize_rows(source, a, source_scales == "inline") for a in x]
        src = [w for w, _ in stored]
        src_side = np.concatenate([sd for _, sd in stored], axis=-1)
    bufs = {"src_k": src[0].reshape(-1), "src_v": src[1].reshape(-1)}
    if src_side is not None and source_scales == "side":
        bufs["src_scales"] = src_side.reshape(-1)
    words = fm.row_words(fmt, d, scales == "inline")
    out = {"present_key": poisoned(n * words), "present_value": poisoned(n * words)}
    if scales == "side":
        out["present_scales"] = poisoned(n * 2 * fm.stat_words(fmt), F32)
    got = interp.run(dense_convert(cfg), bufs | out, {"count": n})
    wk, wv, side = dm.dense_convert(
        *src, src_side, source, source_scales == "inline", fmt, scales == "inline", d
    )
    assert np.array_equal(got["present_key"], wk.reshape(-1))
    assert np.array_equal(got["present_value"], wv.reshape(-1))
    if scales == "side":
        assert np.array_equal(
            got["present_scales"].view(np.uint32), side.reshape(-1).view(np.uint32)
        )
    # What the copy stored reads back within half a step of what it read.
    k_side = None if src_side is None else src_side[:, : src_side.shape[1] // 2]
    k_in = dm.decode_source(source, src[0], k_side, d, source_scales == "inline")
    out_side = None if scales == "inline" else side[:, : fm.stat_words(fmt)]
    err = np.abs(fm.dequantize_rows(fmt, wk, out_side, d, scales == "inline") - k_in)
    assert (err <= half_step(fmt, k_in) * (1 + 1e-5)).all()


def half_step(fmt: str, x: np.ndarray) -> np.ndarray:
    """How far a quantised element may read back from ``x`` (docs/formats.md): half a step;
    for ggml's, plus what the f16 scale moves the largest code, and a whole step for q4_0's
    clamped +8."""
    if fmt == "int4_asym":
        return np.broadcast_to(((x.max(-1) - x.min(-1)) / 15 / 2)[:, None], x.shape)
    if fmt in fm.DENSE:
        return np.broadcast_to(
            (np.abs(x).max(-1) / (127 if fmt == "int8" else 7) / 2)[:, None], x.shape
        )
    blocks = x.reshape(len(x), -1, 32)
    d32 = np.abs(blocks).max(-1) / (127 if fmt == "q8_0" else 8)
    moved = np.abs(d32.astype(np.float16).astype(F32) - d32) * (127 if fmt == "q8_0" else 8)
    tol = d32 * (0.5 if fmt == "q8_0" else 1.0) + moved
    return np.repeat(tol, 32, axis=-1).reshape(x.shape) + 1e-30


@pytest.mark.parametrize("name", [n for n, c in catalog.VARIANTS.items() if c.mode in NEW_MODES])
def test_catalog_variants_bind_at_most_8_storage_buffers(name):
    assert limits(catalog.build(name)) == {}


def test_word_walk_takes_vectors_where_rows_are_16_byte_aligned():
    assert DenseRetainConfig(8, 128, format="int8", scales="side").row_words == 32
    assert word_width(32) == 4 and word_width(33) == 1 and word_width(18) == 1
    side = catalog.build("dense_retain_int8_side_llama31_8b")
    inline = catalog.build("dense_retain_int8_llama31_8b")
    assert str(side.binding("past_k").elem) == "vec4<u32>"
    assert str(inline.binding("past_k").elem) == "u32"


@pytest.mark.parametrize(
    "make, field, allowed",
    [
        (lambda: DenseWindowShiftConfig(2, 64, scales="side", region="all"), "scales",
         "'inline' for region 'all'"),
        (lambda: DenseWindowShiftConfig(2, 64, region="shift", rotary=True), "rotary",
         "false for region 'shift'"),
        (lambda: DenseWindowShiftConfig(2, 64, region="append", rotary=True, rotary_half=6),
         "rotary_half", "a multiple of 4 for dense_window_shift"),
        (lambda: DenseWindowShiftConfig(2, 64, region="append", workgroup_size=30),
         "workgroup_size", "lanes of a row for region 'append'"),
        (lambda: DenseWindowShiftConfig(2, 64, region="sideways"), "region", "one of 'all'"),
        (lambda: DenseRetainConfig(2, 64, format="q8_0", scales="side"), "scales",
         "'inline' for q8_0"),
        (lambda: DenseRetainConfig(2, 64, window=True), "window", "false for dense_retain"),
        (lambda: DenseConvertConfig(2, 64, source="f16", source_scales="side"),
         "source_scales", "'inline' for source 'f16'"),
        (lambda: DenseConvertConfig(2, 64, source="q4_0", source_scales="side"),
         "source_scales", "'inline' for source q4_0"),
        (lambda: DenseConvertConfig(2, 48, source="q8_0", format="int8"), "head_dim",
         "a multiple of 32 for source 'q8_0'"),
        (lambda: DenseConvertConfig(2, 64, source="bf16"), "source", "one of 'f32', 'f16'"),
    ],
)  # fmt: skip
def test_configs_refuse_with_the_field_and_what_is_allowed(make, field, allowed):
    with pytest.raises(ConfigError) as err:
        make()
    assert str(err.value).startswith(f"{field}=")
    assert allowed in str(err.value)
    assert "<class" not in str(err.value)


@pytest.mark.parametrize("name", ["dense_retain_int4_side_llama31_8b",
                                  "dense_window_shift_all_rotary_q4_0_llama31_8b",
                                  "dense_convert_int8_to_q4_0_llama31_8b"])  # fmt: skip
def test_catalog_variants_run_on_the_gpu_as_on_the_interpreter(name, gpu):
    from kvdsl.harness.runner import verify_variant

    cfg = catalog.config(name)
    result = verify_variant(name, cfg, catalog.build(name), 2, ("interp", "gpu"), seed=7)
    assert result.ok, "\n".join(result.problems)
