"""kvdsl.kernels.dense: dense_append and dense_read on the interpreter against
kvdsl.reference.formats, bit for bit, on random rows of mixed magnitudes and on the formats'
edge rows (all zero, a magnitude tie of both signs); the bytes each row takes; the configs'
refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.dense import (
    DenseAppendConfig,
    DenseBuildConfig,
    DenseReadConfig,
    bytes_per_token_head,
    contract_fields,
    dense_append,
    dense_build,
    dense_read,
)
from kvdsl.reference import formats as fm
from kvdsl.reference.judge import POISON_BITS
from kvdsl.reference.modes import Rotary

POISON = POISON_BITS[4]
F32 = np.float32
# (format, scales) of every variant kind
KINDS = [(f, "inline") for f in fm.FORMATS] + [(f, "side") for f in fm.DENSE]


def rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.standard_normal(shape).astype(F32)
    return (x * 10.0 ** rng.integers(-2, 3, (*shape[:-1], 1))).astype(F32)


def with_edges(x: np.ndarray) -> np.ndarray:
    """``x`` ``[B, S, H, D]`` with token 0 of batch 0 all zero in head 0 and a magnitude tie of
    both signs (q4_0's first-of-equal-magnitudes) opening head 1."""
    x = x.copy()
    x[0, 0, 0] = 0
    x[0, 0, -1, :2] = [-5.0, 5.0]
    x[0, 0, -1, 2:] = np.clip(x[0, 0, -1, 2:], -4, 4)
    return x


def append_case(cfg: DenseAppendConfig, seed: int = 3):
    rng = np.random.default_rng(seed)
    b, s, cap, h, d = 3, 5, 12, cfg.kv_heads, cfg.head_dim
    new_k = with_edges(rows(rng, b, s, h, d)).reshape(b, s, h * d)
    new_v = with_edges(rows(rng, b, s, h, d)).reshape(b, s, h * d)
    seqlens = np.array([1, 7, 40], np.int32)  # a right-padded prompt, the middle, past the end
    bufs = {"src_k": new_k.reshape(-1), "src_v": new_v.reshape(-1), "seqlens_k": seqlens}
    rot = None
    if cfg.rotary:
        theta = rng.uniform(0, 6.3, (cap, d // 2))
        rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
        bufs |= {"cos_cache": rot.cos.reshape(-1), "sin_cache": rot.sin.reshape(-1)}
    want = fm.dense_append(new_k, new_v, seqlens, cap, h, cfg.format.value, cfg.inline, rot)
    for name in ("present_key", "present_value"):
        bufs[name] = np.full(want.key.size, POISON, np.uint32)
    if not cfg.inline:
        bufs["present_scales"] = np.full(want.scales.size, POISON, np.uint32).view(F32)
    params = {"count": b * h * s, "keySeq": s, "seq": cap}
    return bufs, params, want


@pytest.mark.parametrize("fmt, scales", KINDS)
@pytest.mark.parametrize("head_dim", [32, 96, 128])
def test_append_matches_the_reference_bit_for_bit(fmt, scales, head_dim):
    # 32 and 96 hold an odd number of ggml blocks: the row ends in two bytes of padding.
    cfg = DenseAppendConfig(2, head_dim, format=fmt, scales=scales)
    bufs, params, want = append_case(cfg)
    out = interp.run(dense_append(cfg), bufs, params)
    for name, expected in (("present_key", want.key), ("present_value", want.value)):
        got = out[name].reshape(expected.shape)
        assert np.all(got[~want.rows] == POISON), f"{name}: a row outside the window written"
        np.testing.assert_array_equal(got[want.rows], expected[want.rows], err_msg=name)
    if scales == "side":
        got = out["present_scales"].reshape(want.scales.shape)
        assert np.all(got[~want.rows].view(np.uint32) == POISON)
        np.testing.assert_array_equal(got[want.rows], want.scales[want.rows])


@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_rotary_append_from_f16_matches_the_reference(fmt):
    cfg = DenseAppendConfig(2, 64, format=fmt, rotary=True, input_type="f16")
    bufs, params, want = append_case(cfg, seed=5)
    bufs["src_k"] = bufs["src_k"].astype(np.float16)
    bufs["src_v"] = bufs["src_v"].astype(np.float16)
    h, d = 2, 64
    new_k = bufs["src_k"].astype(F32).reshape(3, 5, h * d)
    new_v = bufs["src_v"].astype(F32).reshape(3, 5, h * d)
    rot = Rotary(bufs["cos_cache"].reshape(12, d // 2), bufs["sin_cache"].reshape(12, d // 2))
    want = fm.dense_append(new_k, new_v, bufs["seqlens_k"], 12, h, fmt, True, rot)
    out = interp.run(dense_append(cfg), bufs, params)
    got = out["present_key"].reshape(want.key.shape)
    np.testing.assert_array_equal(got[want.rows], want.key[want.rows])
    got = out["present_value"].reshape(want.value.shape)
    np.testing.assert_array_equal(got[want.rows], want.value[want.rows])


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_build_rotates_at_past_seq_and_matches_the_reference(fmt, scales):
    cfg = DenseBuildConfig(2, 64, format=fmt, scales=scales, rotary=True)
    rng = np.random.default_rng(13)
    b, s, past, h, d = 2, 7, 3, 2, 64
    new_k = rows(rng, b, s, h * d)
    new_v = rows(rng, b, s, h * d)
    theta = rng.uniform(0, 6.3, (past + s, d // 2))
    rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
    wk, wv, side = fm.dense_build(new_k, new_v, h, fmt, scales == "inline", past, rot)
    bufs = {
        "src_k": new_k.reshape(-1),
        "src_v": new_v.reshape(-1),
        "cos_cache": rot.cos.reshape(-1),
        "sin_cache": rot.sin.reshape(-1),
        "present_key": np.full(wk.size, POISON, np.uint32),
        "present_value": np.full(wk.size, POISON, np.uint32),
    }
    if scales == "side":
        bufs["present_scales"] = np.full(side.size, POISON, np.uint32).view(F32)
    out = interp.run(dense_build(cfg), bufs, {"count": b * h * s, "seq": s, "pastSeq": past})
    np.testing.assert_array_equal(out["present_key"], wk.reshape(-1))
    np.testing.assert_array_equal(out["present_value"], wv.reshape(-1))
    if scales == "side":
        np.testing.assert_array_equal(out["present_scales"], side.reshape(-1))


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_read_dequantises_as_the_reference(fmt, scales):
    cfg = DenseReadConfig(2, 64, format=fmt, scales=scales)
    rng = np.random.default_rng(11)
    n = 37
    k, v = rows(rng, n, 64), rows(rng, n, 64)
    k[3] = 0
    inline = scales == "inline"
    (wk, sk), (wv, sv) = fm.quantize_rows(fmt, k, inline), fm.quantize_rows(fmt, v, inline)
    bufs = {
        "cache_key": wk.reshape(-1),
        "cache_value": wv.reshape(-1),
        "key": np.full(n * 64, np.nan, F32),
        "value": np.full(n * 64, np.nan, F32),
    }
    if not inline:
        bufs["cache_scales"] = np.concatenate([sk, sv], axis=-1).reshape(-1)
    out = interp.run(dense_read(cfg), bufs, {"count": n})
    want_k = fm.dequantize_rows(fmt, wk, sk, 64, inline)
    np.testing.assert_array_equal(out["key"].reshape(n, 64), want_k)
    np.testing.assert_array_equal(
        out["value"].reshape(n, 64), fm.dequantize_rows(fmt, wv, sv, 64, inline)
    )


@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_read_to_f16_rows_rounds_the_reference_to_nearest(fmt):
    cfg = DenseReadConfig(2, 64, format=fmt, output_type="f16")
    rng = np.random.default_rng(17)
    n = 9
    k, v = rows(rng, n, 64), rows(rng, n, 64)
    (wk, _), (wv, _) = fm.quantize_rows(fmt, k), fm.quantize_rows(fmt, v)
    bufs = {
        "cache_key": wk.reshape(-1),
        "cache_value": wv.reshape(-1),
        "key": np.full(n * 64, np.nan, np.float16),
        "value": np.full(n * 64, np.nan, np.float16),
    }
    kernel = dense_read(cfg)
    assert "enable f16" not in emit(kernel)
    out = interp.run(kernel, bufs, {"count": n})
    want = fm.dequantize_rows(fmt, wk, None, 64).astype(np.float16)
    np.testing.assert_array_equal(out["key"].reshape(n, 64), want)
    want = fm.dequantize_rows(fmt, wv, None, 64).astype(np.float16)
    np.testing.assert_array_equal(out["value"].reshape(n, 64), want)


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_append_then_read_is_within_half_a_step(fmt, scales):
    """The acceptance's round trip, kernels only: quantise, read back, compare with the input."""
    cfg = DenseAppendConfig(2, 64, format=fmt, scales=scales)
    bufs, params, want = append_case(cfg, seed=8)
    out = interp.run(dense_append(cfg), bufs, params)
    reader = DenseReadConfig(2, 64, format=fmt, scales=scales)
    n = want.rows.size
    read_bufs = {
        "cache_key": out["present_key"],
        "cache_value": out["present_value"],
        "key": np.full(n * 64, np.nan, F32),
        "value": np.full(n * 64, np.nan, F32),
    }
    if scales == "side":
        read_bufs["cache_scales"] = out["present_scales"]
    back = interp.run(dense_read(reader), read_bufs, {"count": n})["key"].reshape(3, 2, 12, 64)
    # The input rows where the append put them: new token j of batch b at row start[b] + j.
    new_k = bufs["src_k"].reshape(3, 5, 2, 64).transpose(0, 2, 1, 3)
    start, _ = fm.share_window(bufs["seqlens_k"], 5, 12)
    for b in range(3):
        x = new_k[b]
        got = back[b, :, start[b] : start[b] + 5]
        if fmt in fm.GGML:
            blocks = x.reshape(2, 5, -1, 32)
            amax = np.abs(blocks).max(-1, keepdims=True)
            d = amax / (127 if fmt == "q8_0" else 8)
            d16 = d.astype(np.float16).astype(F32)
            qmax = 127 if fmt == "q8_0" else 8
            # Half a step; q4_0's opposite sign clamps +8 to 7 (a whole step); the f16 scale.
            step = d if fmt == "q4_0" else d / 2
            bound = step + qmax * np.abs(d16 - d) + 1e-6 * amax
            assert np.all(np.abs(got.reshape(blocks.shape) - blocks) <= bound)
        else:
            if fmt == "int4_asym":
                step = (x.max(-1, keepdims=True) - x.min(-1, keepdims=True)) / 15
            else:
                step = np.abs(x).max(-1, keepdims=True) / (127 if fmt == "int8" else 7)
            slack = 1e-6 * np.abs(x).max(-1, keepdims=True)
            assert np.all(np.abs(got - x) <= step / 2 + slack)


@pytest.mark.parametrize("fmt, scales", KINDS)
def test_bytes_per_token_head_are_the_bytes_the_kernel_writes(fmt, scales):
    """One batch, every row of a 3-row cache appended: each word of the cache (and of the side
    buffer) is written, and their bytes per (token, head) are the contract's figure."""
    cfg = DenseAppendConfig(8, 128, format=fmt, scales=scales)
    rng = np.random.default_rng(2)
    h, s = 8, 3
    per_row = bytes_per_token_head(cfg)
    words = fm.row_words(fmt, 128, scales == "inline")
    side = 0 if scales == "inline" else 2 * fm.stat_words(fmt)
    bufs = {
        "src_k": rows(rng, 1, s, h * 128).reshape(-1),
        "src_v": rows(rng, 1, s, h * 128).reshape(-1),
        "seqlens_k": np.array([s - 1], np.int32),
        "present_key": np.full(h * s * words, POISON, np.uint32),
        "present_value": np.full(h * s * words, POISON, np.uint32),
    }
    if side:
        bufs["present_scales"] = np.full(h * s * side, POISON, np.uint32).view(F32)
    out = interp.run(dense_append(cfg), bufs, {"count": h * s, "keySeq": s, "seq": s})
    written = sum(
        int(np.sum(out[n].view(np.uint32) != POISON)) * 4
        for n in ("present_key", "present_value", "present_scales")
        if n in out
    )
    assert written == 2 * h * s * per_row  # K and V
    assert contract_fields(cfg) == {"bytes_per_token_head": per_row}
    assert contract_fields(DenseReadConfig(8, 128, format=fmt, scales=scales)) == {
        "bytes_per_token_head": per_row
    }
    limit = {"int8": 132, "int4": 72, "int4_asym": 72, "q8_0": 136, "q4_0": 72}[fmt]
    assert per_row <= limit
    if fmt in fm.GGML:
        assert per_row == limit


def test_emitted_kernels_parse_back_and_need_no_f16():
    for cfg in (
        DenseAppendConfig(8, 128, format="int8"),
        DenseAppendConfig(8, 128, format="q4_0", rotary=True),
        DenseReadConfig(8, 128, format="int4_asym", scales="side"),
    ):
        k = dense_append(cfg) if isinstance(cfg, DenseAppendConfig) else dense_read(cfg)
        text = emit(k)
        assert emit(parse(text)) == text
        assert "enable f16" not in text


@pytest.mark.parametrize(
    "kwargs, field, allowed",
    [
        ({"format": "q8_0", "scales": "side"}, "scales", "'inline' for q8_0"),
        ({"format": "q4_0", "head_dim": 48}, "head_dim", "a multiple of 32 for format 'q4_0'"),
        ({"format": "int4", "head_dim": 12}, "head_dim", "a multiple of 8 for format 'int4'"),
        ({"format": "int3"}, "format", "one of 'int8', 'int4', 'int4_asym', 'q8_0', 'q4_0'"),
        ({"scales": "beside"}, "scales", "one of 'inline', 'side'"),
        ({"workgroup_size": 12}, "workgroup_size", "a multiple of the 8 invocations of a row"),
        ({"rotary": True, "head_dim": 36}, "head_dim", "a multiple of 8 with rotary"),
        (
            {"k_norm": True, "rotary": True, "scales": "side"},
            "scales",
            "'inline' with k_norm and rotary",
        ),
        ({"k_norm": True, "eps": 0.0}, "eps", "a number > 0 that is a normal f32"),
        ({"k_norm": 1}, "k_norm", "true or false"),
        ({"window": True}, "window", "false for dense_append (the dense modes have no windowed"),
        ({"walk": "rows"}, "walk", "one of 'runs', 'staged', 'strided'"),
        ({"run": 3}, "run", "None (the longest run) or 1, 2, 4 or 8 vectors a lane"),
        ({"split": "yes"}, "split", "true or false"),
        ({"format": "q8_0", "walk": "strided"}, "walk", "'runs' or 'staged' for q8_0"),
        (
            {"format": "q8_0", "walk": "staged", "split": False, "workgroup_size": 256},
            "workgroup_size",
            "fit WebGPU's 16384 bytes of workgroup memory (walk 'staged' needs 18688 bytes",
        ),
    ],
)
def test_configs_refuse_with_the_field_and_what_is_allowed(kwargs, field, allowed):
    shape = {"kv_heads": 2, "head_dim": 128} | {
        k: kwargs.pop(k) for k in ["head_dim"] if k in kwargs
    }
    with pytest.raises(ConfigError) as err:
        DenseAppendConfig(**shape, **kwargs)
    assert err.value.field == field and allowed in str(err.value)
