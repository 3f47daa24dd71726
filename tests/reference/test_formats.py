"""kvdsl.reference.formats: the dense formats and ggml's q8_0/q4_0 blocks, on ggml's edge cases,
random rows, round trips, and against llama.cpp's own numpy quantisers (the ``gguf`` package)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.reference import formats as fm

F32 = np.float32


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(29)


def rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random float32 rows of mixed magnitudes (rows scaled from 1e-3 to 1e3), both signs."""
    x = rng.standard_normal(shape).astype(F32)
    return (x * (10.0 ** rng.uniform(-3, 3, (*shape[:-1], 1)))).astype(F32)


def block(*values: float) -> np.ndarray:
    """One 32-element block: ``values`` first, then zeros."""
    x = np.zeros(32, F32)
    x[: len(values)] = values
    return x


def half_bytes(d: float) -> list[int]:
    return list(np.array([d], "<f2").view(np.uint8))


# ---- ggml's q8_0 --------------------------------------------------------------------------


def test_q8_0_zero_block_is_all_zero_bytes():
    assert fm.quantize_q8_0(np.zeros(64, F32)).tolist() == [0] * 68


def test_q8_0_block_layout_and_ties_away_from_zero():
    # amax 127 makes d = 1 and id = 1: codes are roundf(x), halves away from zero.
    x = block(127.0, 2.5, -2.5, 0.5, -0.5, 1.49, -126.5, 3.0)
    out = fm.quantize_q8_0(x)
    assert out.shape == (34,)
    assert out[:2].tolist() == half_bytes(1.0)
    codes = out[2:].view(np.int8).tolist()
    assert codes[:8] == [127, 3, -3, 1, -1, 1, -127, 3]
    assert codes[8:] == [0] * 24


def test_q8_0_codes_use_the_f32_scale_and_store_its_f16_rounding():
    x = block(1.0, 0.3, -0.7)
    out = fm.quantize_q8_0(x)
    d = F32(1.0) / F32(127)
    assert out[:2].tolist() == half_bytes(float(np.float16(d)))
    inv = F32(1) / d
    expect = [int(np.sign(v) * np.floor(abs(v) + 0.5)) for v in (x[:3] * inv).astype(F32)]
    assert out[2:5].view(np.int8).tolist() == expect == [127, 38, -89]


def test_q8_0_random_rows_round_trip(rng):
    x = rows(rng, 5, 3, 128)
    out = fm.quantize_q8_0(x)
    assert out.shape == (5, 3, 4 * 34) and out.dtype == np.uint8
    back = fm.dequantize_q8_0(out)
    blocks = x.reshape(5, 3, 4, 32)
    d = np.max(np.abs(blocks), axis=-1, keepdims=True) / F32(127)
    d16 = d.astype(np.float16).astype(F32)
    # Half a step of the f32 scale, plus what the f16 scale moves the largest code.
    bound = d / 2 + 127 * np.abs(d16 - d) + 1e-6 * np.abs(blocks)
    assert np.all(np.abs(back.reshape(blocks.shape) - blocks) <= bound)


# ---- ggml's q4_0 --------------------------------------------------------------------------


def test_q4_0_zero_block_is_the_zero_code_with_a_negative_zero_scale():
    # ggml's d = 0.0f / -8 is -0.0: its f16 is 0x8000.
    out = fm.quantize_q4_0(np.zeros(32, F32))
    assert out.tolist() == [0x00, 0x80] + [0x88] * 16


def test_q4_0_signed_max_maps_to_minus_eight():
    # The largest magnitude is negative: d = -8 / -8 = 1, and -8 is nibble 0; +7 is nibble 15.
    x = block(-8.0, 7.0, 1.0, -1.0)
    out = fm.quantize_q4_0(x)
    assert out[:2].tolist() == half_bytes(1.0)
    lo = [b & 0xF for b in out[2:]]
    assert lo[:4] == [0, 15, 9, 7]
    # A positive signed max: d = -1; the max maps to nibble 0, its opposite clamps at 15.
    out = fm.quantize_q4_0(block(8.0, -8.0, -3.0))
    assert out[:2].tolist() == half_bytes(-1.0)
    assert [b & 0xF for b in out[2:5]] == [0, 15, 11]


def test_q4_0_magnitude_tie_takes_the_first():
    assert fm.quantize_q4_0(block(-4.0, 4.0))[:2].tolist() == half_bytes(0.5)
    assert fm.quantize_q4_0(block(4.0, -4.0))[:2].tolist() == half_bytes(-0.5)


def test_q4_0_halves_round_up_and_nibble_order():
    # d = 1 (max -8): x * id + 8.5 truncated, so -0.5 -> 8 and 0.5 -> 9, -1.5 -> 7, 2.5 -> 11.
    x = np.zeros(32, F32)
    x[0], x[1], x[2], x[3], x[4] = -8.0, -0.5, 0.5, -1.5, 2.5
    x[16], x[17] = 3.0, -5.0  # high nibbles of bytes 0 and 1
    out = fm.quantize_q4_0(x)
    qs = out[2:]
    assert [b & 0xF for b in qs[:5]] == [0, 8, 9, 7, 11]
    assert [b >> 4 for b in qs[:3]] == [11, 3, 8]


def test_q4_0_random_rows_round_trip(rng):
    x = rows(rng, 4, 2, 64)
    out = fm.quantize_q4_0(x)
    assert out.shape == (4, 2, 2 * 18)
    back = fm.dequantize_q4_0(out).reshape(4, 2, 2, 32)
    blocks = x.reshape(4, 2, 2, 32)
    amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
    d = amax / F32(8)
    d16 = np.abs(d.astype(np.float16).astype(F32))
    # Half a step, except the other sign's +8 that clamps to 7 (a whole step), plus the f16 scale.
    err = np.abs(back - blocks)
    bound = d + 8 * np.abs(d16 - d) + 1e-6 * amax
    assert np.all(err <= bound)
    inside = np.abs(blocks) <= F32(7) * d
    assert np.all(err[inside] <= (d / 2 + 8 * np.abs(d16 - d) + 1e-6 * amax).repeat(32, -1)[inside])


# ---- llama.cpp's numpy quantisers (gguf) as a third opinion -------------------------------


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0"])
def test_ggml_blocks_match_gguf_byte_for_byte(rng, name):
    gguf = pytest.importorskip("gguf")
    qtype = getattr(gguf.GGMLQuantizationType, name)
    ours = {"Q8_0": fm.quantize_q8_0, "Q4_0": fm.quantize_q4_0}[name]
    x = rows(rng, 64, 128)
    # The edge cases too: a zero block, ties, and signed maxima of both signs.
    x[0, :32] = 0
    x[1, :32] = block(127.0, 2.5, -2.5, 0.5, -0.5)
    x[2, :32] = block(-8.0, 7.0, -0.5, 0.5, 2.5)
    x[3, :32] = block(4.0, -4.0, 2.0)
    theirs = gguf.quants.quantize(x, qtype)
    assert theirs.dtype == np.uint8
    np.testing.assert_array_equal(ours(x), theirs)
    back = {"Q8_0": fm.dequantize_q8_0, "Q4_0": fm.dequantize_q4_0}[name](theirs)
    np.testing.assert_array_equal(back, gguf.quants.dequantize(theirs, qtype))


# ---- dense formats ------------------------------------------------------------------------


def test_int8_layout_four_codes_per_word():
    x = np.array([127.0, -1.0, 2.5, -127.0, 0.5, 1.5, 0.0, 3.0], F32)  # scale 1
    out = fm.quantize_int8(x)
    assert out.scale == F32(1) and out.zero is None
    assert out.words.dtype == np.uint32 and out.words.shape == (2,)
    # Ties to even: 2.5 -> 2, 0.5 -> 0, 1.5 -> 2.
    assert out.words.tolist() == [0x81_02_FF_7F, 0x03_00_02_00]


def test_int4_layout_eight_nibbles_offset_by_eight():
    x = np.array([7.0, -7.0, 0.5, 1.5, -2.5, 3.0, 0.0, -1.0], F32)  # scale 1
    out = fm.quantize_int4(x)
    assert out.scale == F32(1)
    nibbles = [8 + 7, 8 - 7, 8, 8 + 2, 8 - 2, 8 + 3, 8, 8 - 1]
    assert out.words.tolist() == [sum(n << (4 * i) for i, n in enumerate(nibbles))]


def test_int4_asym_layout_scale_and_zero_point():
    x = np.array([-1.0, 14.0, 0.0, 6.5, 7.5, 2.0, -1.0, 13.9], F32)  # lo -1, step 1
    out = fm.quantize_int4_asym(x)
    assert out.scale == F32(1) and out.zero == F32(-1)
    nibbles = [0, 15, 1, 8, 8, 3, 0, 15]  # 7.5 and 8.5 tie to even: 8
    assert out.words.tolist() == [sum(n << (4 * i) for i, n in enumerate(nibbles))]


@pytest.mark.parametrize("fmt", ["int8", "int4", "int4_asym"])
def test_dense_zero_rows_dequantize_to_zero(fmt):
    x = np.zeros((2, 16), F32)
    q = getattr(fm, f"quantize_{fmt}")(x)
    assert np.all(q.scale == 0)
    back = dequantize(fmt, q)
    assert np.all(back == 0)


def dequantize(fmt: str, q: fm.Dense) -> np.ndarray:
    if fmt == "int4_asym":
        return fm.dequantize_int4_asym(q.words, q.scale, q.zero)
    return getattr(fm, f"dequantize_{fmt}")(q.words, q.scale)


@pytest.mark.parametrize("fmt, qmax", [("int8", 127), ("int4", 7), ("int4_asym", None)])
def test_dense_random_rows_round_trip_within_half_a_step(rng, fmt, qmax):
    x = rows(rng, 3, 4, 5, 128)
    q = getattr(fm, f"quantize_{fmt}")(x)
    bits = 8 if fmt == "int8" else 4
    assert q.words.shape == (3, 4, 5, 128 * bits // 32) and q.scale.shape == (3, 4, 5)
    back = dequantize(fmt, q)
    if qmax is None:
        lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
        step = (hi - lo) / 15
        assert np.allclose(q.zero, lo[..., 0]) and np.allclose(q.scale, step[..., 0])
    else:
        step = np.abs(x).max(-1, keepdims=True) / qmax
    slack = 1e-6 * np.abs(x).max(-1, keepdims=True)
    assert np.all(np.abs(back - x) <= step / 2 + slack)
    # The extremes are exact codes: amax (or min and max) come back within rounding.
    assert np.all(np.abs(np.abs(back).max(-1) - np.abs(x).max(-1)) <= slack[..., 0] + 1e-30)


def test_words_pad_an_odd_block_count_and_invert():
    data = fm.quantize_q8_0(np.arange(32, dtype=F32) - 16)  # 34 bytes: 9 words, 2 padding
    w = fm.words(data)
    assert w.shape == (9,) and w[-1] >> 16 == 0
    np.testing.assert_array_equal(fm.word_bytes(w, 34), data)
    assert w[0] & 0xFFFF == int(np.array([16 / 127], "<f2").view("<u2")[0])


@pytest.mark.parametrize(
    "fn, n", [("quantize_int8", 6), ("quantize_int4", 12), ("quantize_q8_0", 48)]
)
def test_rows_of_the_wrong_length_are_refused(fn, n):
    with pytest.raises(ValueError, match="multiple of"):
        getattr(fm, fn)(np.ones(n, F32))


@pytest.mark.parametrize(
    "fmt, inline", [(f, True) for f in fm.FORMATS] + [(f, False) for f in fm.DENSE]
)
def test_cache_rows_hold_the_format_and_read_back(rng, fmt, inline):
    x = rows(rng, 2, 3, 128)
    w, side = fm.quantize_rows(fmt, x, inline)
    assert w.dtype == np.uint32 and w.shape == (2, 3, fm.row_words(fmt, 128, inline))
    assert side.shape == (2, 3, 0 if inline else fm.stat_words(fmt))
    bytes_per_row = 4 * (w.shape[-1] + side.shape[-1])
    assert bytes_per_row == {"int8": 132, "int4": 68, "int4_asym": 72, "q8_0": 136, "q4_0": 72}[fmt]
    back = fm.dequantize_rows(fmt, w, side, 128, inline)
    if fmt == "q8_0":
        np.testing.assert_array_equal(back, fm.dequantize_q8_0(fm.quantize_q8_0(x)))
    elif fmt == "q4_0":
        np.testing.assert_array_equal(back, fm.dequantize_q4_0(fm.quantize_q4_0(x)))
    else:
        q = getattr(fm, f"quantize_{fmt}")(x)
        np.testing.assert_array_equal(back, dequantize(fmt, q))
        if inline:
            np.testing.assert_array_equal(w[..., 0].view(F32), q.scale)
