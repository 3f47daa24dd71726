"""kvdsl.reference.dense_modes: the dense cache passes' meaning, by properties on random rows:
the retain pass keeps every row outside the window; the sliding window keeps the newest rows in
order, the appended ones reading back as the rotated new tokens; zeroed rows read as zero;
copies between formats read back as the source within half a step."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.reference import dense_modes as dm
from kvdsl.reference import formats as fm
from kvdsl.reference.elementwise import rotate_neox, split_heads
from kvdsl.reference.modes import Rotary

F32 = np.float32


def stored(rng, b, h, s, d, fmt, inline=True):
    x = rng.standard_normal((b, h, s, d)).astype(F32)
    w, side = fm.quantize_rows(fmt, x, inline)
    return x, w, side


def test_retain_keeps_every_row_outside_the_append_window():
    rng = np.random.default_rng(0)
    _, w, side = stored(rng, 3, 2, 10, 32, "int8", inline=False)
    seqlens = np.array([0, 6, 40], np.int32)
    out = dm.dense_retain(w, w, np.concatenate([side, side], -1), seqlens, 3)
    assert out.rows.tolist()[0][0] == [False] * 3 + [True] * 7  # padded prompt: rows 0-2
    assert out.rows.tolist()[1][1] == [True] * 4 + [False] * 3 + [True] * 3
    assert out.rows.tolist()[2][0] == [True] * 7 + [False] * 3  # past the end: the last rows
    assert np.array_equal(out.key, w) and out.scales.shape == (3, 2, 10, 2)


@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_window_shift_keeps_the_newest_rows_and_reads_back_the_new_tokens(fmt):
    rng = np.random.default_rng(1)
    b, h, cap, s, d = 2, 2, 6, 3, 64
    _, past, _ = stored(rng, b, h, cap, d, fmt)
    new = rng.standard_normal((b, s, h * d)).astype(F32)
    seqlens = np.array([4, 9], np.int32)  # batch 0: 2 past rows, no eviction; batch 1: 6 kept
    theta = rng.uniform(0, 6.3, (13, d // 2))
    rot = Rotary(np.cos(theta).astype(F32), np.sin(theta).astype(F32))
    out = dm.dense_window_shift(past, past, np.zeros((b, h, cap, 0), F32), new, new, seqlens, fmt,
                                rotary=rot)  # fmt: skip
    assert out.rows.all()
    # batch 0: past rows 0-1, new rows 2-4, row 5 zero; batch 1: past 3-5 slid to 0-2, new 3-5.
    assert np.array_equal(out.key[0, :, :2], past[0, :, :2])
    assert (out.key[0, :, 5] == 0).all()
    assert np.array_equal(out.key[1, :, :3], past[1, :, 3:])
    k = split_heads(new, h)
    pos = np.array([[2, 3, 4], [6, 7, 8]])[:, None, :]
    want = rotate_neox(k, pos, rot.cos, rot.sin)
    back = fm.dequantize_rows(fmt, out.key[0, :, 2:5], None, d)
    assert np.allclose(back, want[0], atol=np.abs(want[0]).max() / 6)
    assert np.array_equal(out.value[1, :, 3:], fm.quantize_rows(fmt, k[1])[0])


@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_zero_words_read_back_as_zero(fmt):
    words = np.zeros((3, fm.row_words(fmt, 64, True)), np.uint32)
    assert (fm.dequantize_rows(fmt, words, None, 64) == 0).all()


@pytest.mark.parametrize("source", ["f16", "int8", "q8_0", "int4_asym"])
@pytest.mark.parametrize("fmt", fm.FORMATS)
def test_convert_is_quantise_of_what_the_source_reads_as(source, fmt):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 64)).astype(F32)
    if source == "f16":
        src, side = x.astype(np.float16), None
        read = x.astype(np.float16).astype(F32)
    else:
        src, s = fm.quantize_rows(source, x, False)
        side = np.concatenate([s, s], -1) if s.shape[-1] else None
        read = (
            fm.dequantize_rows(source, src, s, 64, False)
            if s.shape[-1]
            else fm.dequantize_rows(source, src, None, 64)
        )
    wk, wv, out_side = dm.dense_convert(src, src, side, source, side is None, fmt, True, 64)
    assert np.array_equal(wk, fm.quantize_rows(fmt, read)[0]) and np.array_equal(wk, wv)
    assert out_side.shape == (5, 0)


def test_bad_names_are_refused():
    with pytest.raises(ValueError, match="region='sideways'"):
        dm.dense_window_shift(*([np.zeros((1, 1, 2, 9), np.uint32)] * 2), np.zeros((1, 1, 2, 0)),
                              *([np.zeros((1, 1, 64), F32)] * 2), np.array([0]), "int8",
                              region="sideways")  # fmt: skip
    with pytest.raises(ValueError, match="source 'bf16'"):
        dm.decode_source("bf16", np.zeros((1, 64)), None, 64, True)
