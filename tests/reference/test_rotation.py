"""kvdsl.reference.rotation: the fast Walsh-Hadamard transform against its definition, the
rotation's inverse, and attention over a rotated cache against attention over it unrotated."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.reference.attention import attention
from kvdsl.reference.rotation import fwht, hadamard, rotation, signs


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64, 128, 256])
def test_the_fast_transform_is_the_matrix_of_its_definition(n):
    x = np.random.default_rng(n).standard_normal((5, n)) + 0.5
    np.testing.assert_allclose(fwht(x, n), x @ hadamard(n).T, rtol=1e-12, atol=1e-12)
    # Orthonormal and symmetric: its own inverse.
    np.testing.assert_allclose(hadamard(n) @ hadamard(n), np.eye(n), atol=1e-12)


def test_a_blocked_rotation_is_the_block_diagonal_matrix():
    rot = rotation(256, block=64)
    x = np.random.default_rng(0).standard_normal((7, 256)) + 0.25
    h = np.kron(np.eye(4), hadamard(64))
    np.testing.assert_allclose(rot.rotate(x), (x * rot.signs) @ h.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("block,signed", [(None, True), (64, True), (None, False)])
def test_unrotate_returns_the_row(dtype, tol, block, signed):
    rot = rotation(128, block=block, signed=signed)
    x = (np.random.default_rng(2).standard_normal((9, 128)) * 3 + 1).astype(dtype)
    y = rot.rotate(x)
    assert y.dtype == dtype and not np.allclose(y, x)
    back = rot.unrotate(y)
    assert np.max(np.abs(back - x)) <= tol * np.max(np.abs(x))


def test_the_signs_are_the_hash_of_the_index_and_mix_both_ways():
    s = signs(256)
    # The hash, step by step in Python integers, for a few dimensions.
    for i in (0, 1, 77, 255):
        x = (i + 1) * 0x9E3779B1 % 2**32
        x ^= x >> 15
        x = x * 0x2C1B3C6D % 2**32
        x ^= x >> 12
        assert s[i] == (-1.0 if x >> 31 else 1.0)
    assert np.array_equal(signs(64), s[:64]) and np.array_equal(rotation(128).signs, s[:128])
    assert 0.35 < np.mean(s < 0) < 0.65
    assert np.all(rotation(128, signed=False).signs == 1.0)


def test_an_outlier_channel_is_spread_over_the_row():
    x = np.zeros((1, 128))
    x[0, 17] = 50.0
    y = rotation(128).rotate(x)
    np.testing.assert_allclose(np.abs(y), 50.0 / np.sqrt(128), rtol=1e-12)


def test_attention_over_a_rotated_cache_is_attention_over_it_unrotated():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 8, 2, 64)) + 0.1
    k = rng.standard_normal((2, 2, 40, 64)) + 0.1
    v = rng.standard_normal((2, 2, 40, 64)) + 0.1
    lengths = np.array([40, 23])
    rot = rotation(64)
    want = attention(q, k, v, lengths)
    have = rot.unrotate(attention(rot.rotate(q), rot.rotate(k), rot.rotate(v), lengths))
    np.testing.assert_allclose(have, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"dim": 96}, "rotation: dim=96: expected a power of two, at least 2"),
        ({"dim": 1}, "rotation: dim=1: expected a power of two, at least 2"),
        ({"dim": 128, "block": 48}, "rotation: block=48: expected a power of two, at least 2"),
        ({"dim": 64, "block": 128}, "rotation: block=128: expected a divisor of dim=64"),
    ],
)
def test_a_rotation_that_is_not_one_is_refused(kwargs, message):
    with pytest.raises(ValueError) as err:
        rotation(**kwargs)
    assert str(err.value) == message


def test_rows_of_another_size_are_refused():
    with pytest.raises(ValueError, match=r"^rotation: rows of 64 values: expected 128$"):
        rotation(128).rotate(np.ones((2, 64)))
