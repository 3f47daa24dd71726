"""kvdsl.reference.ort_tq: ONNX Runtime WebGPU's 4-bit TurboQuant rows, against two re-statements
written differently (a float64 Hadamard matrix with a count of boundaries; a scalar walk of ORT's
shader, thread by thread), on hand-checked rows, and its read-back."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvdsl.reference import ort_tq
from tests.helpers.ort import seeded_rows

F32 = np.float32


def sylvester(d: int) -> np.ndarray:
    """The orthonormal Walsh-Hadamard matrix, ``(-1)^popcount(i & j) / sqrt(d)``, float64."""
    i = np.arange(d)
    parity = np.array([[bin(a & b).count("1") & 1 for b in i] for a in i])
    return np.where(parity, -1.0, 1.0) / math.sqrt(d)


def matrix_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Second opinion: ``H x`` in float64, its norm, each unit value's index as the number of
    boundaries at or below it (a linear count), and each value's distance to its nearest
    boundary."""
    r = x.astype(np.float64) @ sylvester(x.shape[-1])
    norm = np.sqrt(np.sum(r * r, axis=-1))
    u = r / norm[:, None]
    b = ort_tq.BOUNDARIES.astype(np.float64)
    idx = np.zeros(u.shape, dtype=np.int64)
    for bound in b:
        idx += u >= bound
    gap = np.min(np.abs(u[..., None] - b), axis=-1)
    return norm, idx, gap


def shader_walk(row: np.ndarray) -> tuple[np.float32, list[int]]:
    """Third opinion: ORT's shader for one row, step by step in f32 scalars: the butterfly loop
    over pair indices per stage, the norm factor, each thread's partial sum of squares and the
    tree, ``searchsorted_tq``'s 4-step binary search."""
    d = len(row)
    buf = [F32(v) for v in row]
    dist = 1
    while dist < d:
        for idx in range(d // 2):
            i = (idx // dist) * 2 * dist + idx % dist
            a, b = buf[i], buf[i + dist]
            buf[i], buf[i + dist] = F32(a + b), F32(a - b)
        dist *= 2
    wht = F32(1.0) / np.sqrt(F32(d))
    buf = [F32(v * wht) for v in buf]
    threads = min(d // 2, 64)
    part = []
    for t in range(threads):
        s = F32(0.0)
        for i in range(t, d, threads):
            s = F32(s + F32(buf[i] * buf[i]))
        part.append(s)
    stride = threads // 2
    while stride:
        for t in range(stride):
            part[t] = F32(part[t] + part[t + stride])
        stride //= 2
    norm = np.sqrt(part[0])
    inv = F32(1.0) / norm if norm > 0 else F32(0.0)
    out = []
    for v in buf:
        u = F32(v * inv)
        lo, hi = 0, 15
        for _ in range(4):
            mid = (lo + hi) >> 1
            if u >= ort_tq.BOUNDARIES[mid]:
                lo = mid + 1
            else:
                hi = mid
        out.append(lo)
    return F32(norm), out


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance between positive f32 values in units in the last place."""
    ia = np.asarray(a, dtype=F32).view(np.int32).astype(np.int64)
    return np.abs(ia - np.asarray(b, dtype=F32).view(np.int32).astype(np.int64))


def test_2000_rows_have_the_codes_and_norms_of_a_float64_matrix_restatement():
    x = seeded_rows(2000, 128, seed=47)
    words = ort_tq.quantize(x)
    assert words.shape == (2000, 17) and words.dtype == np.uint32
    norm, idx = ort_tq.codes(words, 128)
    want_norm, want_idx, gap = matrix_codes(x)
    # Codes: exact, but where f32 rounding (the kernel's) and float64 can land on either side of
    # a boundary (within 1e-6 of it). There are none in these rows.
    differ = idx != want_idx
    assert np.all(gap[differ] < 1e-6), np.argwhere(differ)[:5]
    assert differ.sum() == 0
    assert np.all(np.abs(idx.astype(np.int64) - want_idx) <= 1)
    # Norms: the kernel's f32 butterflies and sum round log2(d) times each, so they sit within a
    # few ulps of float64's (bit for bit: the shader walk below).
    assert np.max(ulps(norm, want_norm)) <= 4
    assert np.mean(ulps(norm, want_norm) == 0) > 0.5


@pytest.mark.parametrize("d", [8, 16, 64, 128, 256, 512])
def test_every_head_size_matches_the_matrix_restatement(d):
    x = seeded_rows(300, d, seed=d)
    norm, idx = ort_tq.codes(ort_tq.quantize(x), d)
    want_norm, want_idx, gap = matrix_codes(x)
    differ = idx != want_idx
    assert np.all(gap[differ] < 1e-6) and differ.sum() <= 1
    assert np.max(ulps(norm, want_norm)) <= 4


@pytest.mark.parametrize("d", [8, 32, 128, 256])
def test_rows_equal_a_scalar_walk_of_orts_shader_bit_for_bit(d):
    x = seeded_rows(40, d, seed=100 + d)
    words = ort_tq.quantize(x)
    norm, idx = ort_tq.codes(words, d)
    for r in range(len(x)):
        want_norm, want_idx = shader_walk(x[r])
        assert norm[r].view(np.uint32) == np.asarray(want_norm).view(np.uint32), r
        assert idx[r].tolist() == want_idx, r


def test_hand_checked_rows_fix_the_norm_word_and_the_nibble_order():
    d = 128
    e = np.zeros((4, d), dtype=F32)
    e[0, 0] = 1.0  # H e0: every value +1/sqrt(128) = 0.0884: index 11 (0.0704 <= u < 0.0966)
    e[1, 1] = 1.0  # H e1: +, -, +, - ...: 11, 4 (-0.0966 <= u < -0.0704), 11, 4 ...
    e[2, 8] = 1.0  # H e8: 8 values +, 8 values -, ...: whole words of 11s, then of 4s
    e[3, 0] = -3.0  # every value -3/sqrt(128): unit -0.0884, index 4; norm 3
    words = ort_tq.quantize(e)
    assert words.shape == (4, 17)
    assert words[0, 1:].tolist() == [0xBBBBBBBB] * 16
    assert words[1, 1:].tolist() == [0x4B4B4B4B] * 16  # value 0 in the lowest nibble
    assert words[2, 1:].tolist() == [0xBBBBBBBB, 0x44444444] * 8  # value 8 starts word 2
    assert words[3, 1:].tolist() == [0x44444444] * 16
    # Word 0 is the f32 norm's bits: 1.0 (0x3F800000) and 3.0 (0x40400000), within an ulp.
    assert abs(int(words[0, 0]) - 0x3F800000) <= 1
    assert abs(int(words[3, 0]) - 0x40400000) <= 1
    assert abs(int(words[1, 0]) - 0x3F800000) <= 1
    # As little-endian bytes: byte 4 (the first code byte) holds value 0 low, value 1 high.
    raw = words[1].astype("<u4").tobytes()
    assert len(raw) == ort_tq.row_bytes(d) == 68
    assert raw[4] == 0x4B and raw[4] & 0xF == 11 and raw[4] >> 4 == 4


def test_the_tables_are_orts_symmetric_lloyd_max_codebook_for_unit_vectors_of_128():
    c, b = ort_tq.CENTROIDS.astype(np.float64), ort_tq.BOUNDARIES.astype(np.float64)
    assert np.all(np.diff(c) > 0) and np.all(np.diff(b) > 0)
    np.testing.assert_array_equal(c, -c[::-1])
    # The boundaries are the centroids' midpoints, rounded to 4 decimals.
    assert np.max(np.abs(b - (c[:-1] + c[1:]) / 2)) <= 5e-5 + 1e-7
    # Lloyd-Max for N(0, 1/128): each centroid is the mean of its cell (to the table's digits).
    s = 1 / math.sqrt(128)
    cells = [-math.inf, *b.tolist(), math.inf]
    pdf = lambda t: math.exp(-t * t / (2 * s * s)) if math.isfinite(t) else 0.0  # noqa: E731
    cdf = lambda t: 0.5 * (1 + math.erf(t / (s * math.sqrt(2))))  # noqa: E731
    for k in range(16):
        lo, hi = cells[k], cells[k + 1]
        mean = s / math.sqrt(2 * math.pi) * (pdf(lo) - pdf(hi)) / (cdf(hi) - cdf(lo))
        assert abs(mean - c[k]) < 1.5e-3, (k, mean, c[k])


def test_the_decoder_reads_back_within_the_codebooks_error():
    x = seeded_rows(2000, 128, seed=3)
    words = ort_tq.quantize(x)
    rotated = ort_tq.dequantize_rotated(words, 128)
    norm, idx = ort_tq.codes(words, 128)
    # In the rotated basis a value is its centroid times the row's norm, exactly.
    np.testing.assert_array_equal(rotated, ort_tq.CENTROIDS[idx] * norm[:, None])
    back = ort_tq.dequantize(words, 128)
    assert back.dtype == F32 and back.shape == x.shape
    # And rotated back: H is its own inverse.
    np.testing.assert_allclose(
        back, rotated.astype(np.float64) @ sylvester(128), rtol=0, atol=1e-5 * norm.max()
    )
    # A 4-bit Lloyd-Max code keeps about 0.0095 of a Gaussian's energy as error: sqrt ~ 0.1,
    # large channels or not (the rotation spreads them).
    rel = np.linalg.norm(back - x, axis=1) / np.linalg.norm(x, axis=1)
    offset = np.zeros(len(x), dtype=bool)
    offset[2::5] = True
    assert 0.07 < float(np.sqrt(np.mean(rel[~offset] ** 2))) < 0.11
    assert rel[~offset].max() < 0.2
    # A row with a common offset is not spread: unsigned, H sends it all to value 0 (0.7 x
    # sqrt(128) against the rest's ~1), past the largest centroid, which clips it.
    assert float(np.sqrt(np.mean(rel[offset] ** 2))) > 0.2
    assert np.mean(idx[offset, 0] == 15) > 0.5


def test_f16_rows_are_widened_exactly_and_f64_rounded_to_f32():
    x = seeded_rows(50, 64, seed=9)
    h = x.astype(np.float16)
    np.testing.assert_array_equal(ort_tq.quantize(h), ort_tq.quantize(h.astype(F32)))
    np.testing.assert_array_equal(ort_tq.quantize(x.astype(np.float64)), ort_tq.quantize(x))


def test_leading_axes_are_kept_and_a_zero_row_is_norm_0_codes_8():
    x = seeded_rows(24, 64, seed=5).reshape(2, 3, 4, 64)
    words = ort_tq.quantize(x)
    assert words.shape == (2, 3, 4, 9)
    np.testing.assert_array_equal(words.reshape(24, 9), ort_tq.quantize(x.reshape(24, 64)))
    assert ort_tq.dequantize(words, 64).shape == x.shape
    # ORT's inverse norm is 0 for a zero row: every unit value 0, on boundary 7: index 8.
    zero = ort_tq.quantize(np.zeros((1, 64), dtype=F32))
    assert zero[0].tolist() == [0] + [0x88888888] * 8


def test_row_bytes():
    assert [ort_tq.row_bytes(d) for d in (8, 64, 128, 256)] == [8, 36, 68, 132]


@pytest.mark.parametrize("d", [0, 4, 12, 96, 130, 128.0, True, "128"])
def test_unsupported_head_sizes_are_one_clear_error(d):
    with pytest.raises(
        ValueError, match=r"ort_tq: head size .*: expected a power of two, at least 8"
    ):
        ort_tq.row_bytes(d)


def test_bad_rows_and_words_are_one_clear_error():
    with pytest.raises(ValueError, match="head size 96"):
        ort_tq.quantize(np.ones((2, 96), dtype=F32))
    with pytest.raises(ValueError, match="expected a float array"):
        ort_tq.quantize(np.ones((2, 64), dtype=np.int32))
    bad = np.ones((2, 64), dtype=F32)
    bad[1, 3] = np.inf
    with pytest.raises(ValueError, match="expected finite values"):
        ort_tq.quantize(bad)
    words = ort_tq.quantize(np.ones((2, 64), dtype=F32))
    with pytest.raises(ValueError, match=r"expected u32 \[\.\.\., 17\] for head size 128"):
        ort_tq.dequantize(words, 128)
    with pytest.raises(ValueError, match="dtype int64"):
        ort_tq.dequantize(words.astype(np.int64), 64)


def test_the_index_is_orts_boundary_table_not_the_nearest_centroid():
    # ORT's TQ_BOUNDARIES are the midpoints rounded to 4 decimals: a nearest-centroid search
    # (argmin |u - C|) differs from them only within 5e-5 of a midpoint, and there it does.
    x = seeded_rows(2000, 128, seed=47)
    rotated = ort_tq.hadamard(x)
    unit = rotated * (F32(1) / ort_tq.norms(rotated))[:, None]
    table = ort_tq.codes(ort_tq.quantize(x), 128)[1]
    nearest = np.argmin(np.abs(unit[..., None] - ort_tq.CENTROIDS), axis=-1)
    np.testing.assert_array_equal(table, ort_tq.indices(unit))
    differ = table != nearest
    mids = (ort_tq.CENTROIDS[:-1].astype(np.float64) + ort_tq.CENTROIDS[1:]) / 2
    gap = np.min(np.abs(unit[differ][:, None].astype(np.float64) - mids), axis=-1)
    assert 0 < differ.sum() < 0.01 * differ.size and np.all(gap <= 5e-5 + 1e-7)
