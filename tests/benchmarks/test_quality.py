"""benchmarks/quality.py: the format table's page is what the script writes, and its figures
are the formats' own."""

from __future__ import annotations

import json

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402


def test_the_committed_page_is_what_the_script_writes():
    assert quality.main(["--check"]) == 0, "docs/formats-quality.md is stale: run " + (
        quality.COMMAND
    )


def test_the_bytes_are_the_formats_rows():
    rows = {f.name: f.row_bytes(128) for f in quality.FORMATS}
    # int8: a scale word and 32 code words; q8_0: 4 blocks of 34 B; q4_0: 4 of 18 B;
    # int4_asym: scale, minimum and 16 code words; 2-bit: 2 words and 8.
    assert rows == {
        "f16": 256,
        "int8": 132,
        "q8_0": 136,
        "int4": 68,
        "int4_asym": 72,
        "q4_0": 72,
        "int2_asym": 40,
        "kivi2 g32": 48,
        "kivi2 g64": 40,
        # ORT's TurboQuant: an f32 norm word and 16 words of 8 four-bit indices.
        "ort_q4": 68,
    }


def test_the_round_trips_are_lossy_by_their_bits_and_exact_on_their_grid():
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32) + 0.1
    errors = {}
    for fmt in quality.FORMATS:
        if fmt.kv:
            continue
        back = fmt.round_trip(x)
        assert back.shape == x.shape
        errors[fmt.name] = float(np.sqrt(np.mean((back - x) ** 2)))
        if fmt.rotates:
            # Its values are on its grid in the rotated basis, not after rotating back.
            continue
        # A row written twice reads back the same: the decoded values are on the format's grid.
        np.testing.assert_array_equal(fmt.round_trip(back.astype(np.float32)), back)
    assert errors["f16"] < errors["int8"] < errors["int4"] < errors["int2_asym"]
    assert errors["q8_0"] < errors["q4_0"]
    assert errors["int8"] < errors["ort_q4"] < errors["int2_asym"]


def test_a_format_that_rotates_itself_has_no_rotated_row():
    fmt = next(f for f in quality.FORMATS if f.name == "ort_q4")
    assert fmt.rotates and fmt.built and fmt.kv is None
    rows = [line for line in quality.PAGE.read_text().splitlines() if "| ort_q4" in line]
    assert len(rows) == 1 and rows[0].startswith("| ort_q4 |")
    times, _ = quality.decode_times()
    assert rows[0].rstrip().endswith(f"| {times['ort_q4']:.0f} |")  # attend reads and times it


def test_the_page_takes_each_time_from_its_own_row():
    """A planned bandwidth row's time already holds its merge; a rotated format's comes from
    the rotation rows, KIVI's from the kivi rows (attend over its cache)."""
    att = json.loads(quality.ATTENTION.read_text())
    at = {(r["kind"], r["format"]): r for r in att["rows"] if (r["batch"], r["tokens"]) == (4, 8192)
          and r.get("planned", True)}  # fmt: skip
    times, _ = quality.decode_times()
    assert times["int4"] == at["bandwidth", "int4"]["us"]
    assert times["int8 rotated"] == at["rotation", "int8"]["us"]
    assert times["kivi2 g32"] == at["kivi", "kivi2 g32"]["us"]


def test_the_data_has_outlier_channels_and_rotation_spreads_them():
    q, k, v = quality.data(0, 256)
    assert q.shape == (1, quality.Q_HEADS, 1, quality.DIM)
    assert k.shape == v.shape == (1, quality.KV_HEADS, 256, quality.DIM)
    # Before rotary, a few channels hold most of K's energy; rotary pairs each with its partner.
    energy = np.sort(np.mean(k[0, 0].astype(np.float64) ** 2, axis=0))[::-1]
    assert energy[: 2 * quality.OUTLIERS].sum() > 0.9 * energy.sum()
    assert abs(float(np.std(v)) - 1.0) < 0.05


def test_rotation_lowers_the_error_of_a_per_row_scale_on_outlier_data():
    int8 = next(f for f in quality.FORMATS if f.name == "int8")
    plain, rotated = quality.error(int8, 1024, None), quality.error(int8, 1024, "k")
    assert 0 < rotated < 0.5 * plain


def test_rotating_v_as_well_is_attention_over_the_same_cache_rotated_back():
    f16 = next(f for f in quality.FORMATS if f.name == "f16")
    # f16 rounds V alike rotated or not: rotating it as well (and the output back) moves the
    # error by little; K rotated changes it (the large channels' values are spread).
    k, kv = quality.error(f16, 1024, "k"), quality.error(f16, 1024, "kv")
    assert 0 < k and abs(kv / k - 1) < 0.05
    assert quality.error(f16, 1024, None) != k


def test_kivi_writes_k_and_v_apart_and_beats_a_per_row_2_bit_k():
    kivi = next(f for f in quality.FORMATS if f.name == "kivi2 g32")
    _, k, v = quality.data(1, 256)
    back_k, back_v = kivi.cache(k, v)
    assert back_k.shape == k.shape and not np.array_equal(back_k, k)
    two = next(f for f in quality.FORMATS if f.name == "int2_asym")
    assert np.abs(back_k - k).mean() < 0.5 * np.abs(two.round_trip(k) - k).mean()
