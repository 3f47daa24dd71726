"""kvdsl.reference.kivi: KIVI's layout (K per channel over token groups, V per token over channel
groups, packed first-lowest), its rounding, its residual and its bytes."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.reference import kivi


def rows(t: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((t, d)).astype(np.float32) + 0.3
    k[:, 5] *= 40.0  # one large channel, as K has
    return k, rng.standard_normal((t, d)).astype(np.float32) - 0.2


@pytest.mark.parametrize("bits,group", [(2, 32), (2, 64), (4, 32), (2, 16)])
def test_the_cache_reads_back_within_half_a_step(bits, group):
    k, v = rows(3 * group + 5, 64)
    cache = kivi.quantize(k, v, bits, group)
    assert cache.quantised == 3 * group
    back_k, back_v = kivi.dequantize(cache)
    assert back_k.shape == k.shape and back_v.shape == v.shape
    # K: each channel of each token group has its own step.
    steps_k = np.repeat(cache.k_scale.astype(np.float32), group, axis=1).T  # [n, D]
    assert np.all(np.abs(back_k[: cache.quantised] - k[: cache.quantised]) <= steps_k * 0.51 + 2e-3)
    steps_v = np.repeat(cache.v_scale.astype(np.float32), group, axis=1)  # [n, D]
    assert np.all(np.abs(back_v[: cache.quantised] - v[: cache.quantised]) <= steps_v * 0.51 + 2e-3)
    # The residual (tokens that fill no group) is f16.
    np.testing.assert_array_equal(
        back_k[cache.quantised :], k[cache.quantised :].astype(np.float16)
    )
    np.testing.assert_array_equal(
        back_v[cache.quantised :], v[cache.quantised :].astype(np.float16)
    )


def test_k_is_scaled_per_channel_so_a_large_channel_costs_the_others_nothing():
    k, v = rows(64, 64)
    back_k, _ = kivi.dequantize(kivi.quantize(k, v, 2, 32))
    others = np.delete(np.arange(64), 5)
    err_other = np.abs(back_k[:, others] - k[:, others]).max()
    assert err_other < 0.5 * np.abs(k[:, others]).max()
    # A per-token scale would spend the codes on channel 5: its step would be ~40x larger.
    assert err_other < 0.05 * np.abs(k[:, 5]).max()


def test_the_layout_is_kivis():
    k, v = rows(32, 32, seed=3)
    c = kivi.quantize(k, v, 2, 16)
    # K: [D, T / 16] words, channel-major, 16 tokens per word; stats [D, T / group].
    assert c.k_codes.shape == (32, 2) and c.k_codes.dtype == np.uint32
    assert c.k_scale.shape == c.k_min.shape == (32, 2) and c.k_scale.dtype == np.float16
    # V: [T, D / 16] words; stats [T, D / group].
    assert c.v_codes.shape == (32, 2) and c.v_scale.shape == (32, 2)
    # Token 0 of channel 3 is the lowest 2 bits of K's word (3, 0); token 1 the next two.
    s, m = float(c.k_scale[3, 0]), float(c.k_min[3, 0])
    for tok in (0, 1, 15):
        code = (int(c.k_codes[3, 0]) >> (2 * tok)) & 3
        assert code == min(3, max(0, round((float(k[tok, 3]) - m) * np.float32(1 / np.float32(s)))))
    # Channel 0 of token 7 is the lowest 2 bits of V's word (7, 0).
    s, m = float(c.v_scale[7, 0]), float(c.v_min[7, 0])
    code = int(c.v_codes[7, 0]) & 3
    assert code == min(3, max(0, round((float(v[7, 0]) - m) * np.float32(1 / np.float32(s)))))


def test_a_constant_group_reads_back_as_its_value():
    k = np.full((32, 32), 1.25, np.float32)
    v = np.full((32, 32), -0.5, np.float32)
    back_k, back_v = kivi.dequantize(kivi.quantize(k, v, 2, 32))
    np.testing.assert_array_equal(back_k, k)
    np.testing.assert_array_equal(back_v, v)


def test_the_bytes_per_row():
    assert kivi.row_bytes(128, 2, 32) == 32 + 16
    assert kivi.row_bytes(128, 2, 64) == 32 + 8 <= 40
    assert kivi.row_bytes(128, 4, 32) == 64 + 16
    c = kivi.quantize(*rows(128, 128), 2, 64)
    stored = c.k_codes.nbytes + c.k_scale.nbytes + c.k_min.nbytes
    assert stored == 128 * kivi.row_bytes(128, 2, 64)


@pytest.mark.parametrize(
    "bits,group,d,message",
    [
        (3, 32, 64, "kivi: bits=3: expected 2 or 4"),
        (2, 24, 48, "kivi: group=24: expected a multiple of 16"),
        (4, 4, 64, "kivi: group=4: expected a multiple of 8"),
        (2, 32, 48, "kivi: head size 48: expected a multiple of group=32"),
    ],
)
def test_a_kivi_cache_it_cannot_lay_out_is_refused(bits, group, d, message):
    with pytest.raises(ValueError) as err:
        kivi.quantize(np.ones((64, d)), np.ones((64, d)), bits, group)
    assert str(err.value) == message


@pytest.mark.parametrize("bits,group,page_size", [(2, 32, 64), (2, 64, 64), (4, 32, 128)])
def test_pages_hold_the_groups_through_the_table(bits, group, page_size):
    """A sequence's groups laid into pages of a shuffled table read back as the cache, and a
    word sits where the layout says: K's code of channel c and token t at ``c * page_size /
    per + t % page_size / per`` of its page, V's stats after K's codes and stats and V's codes."""
    k, v = rows(5 * group + 7, 64, 3)
    caches = [kivi.quantize(k, v, bits, group), kivi.quantize(v, k, bits, group)]
    words = kivi.page_words(64, bits, group, page_size)
    pages = -(-caches[0].quantised // page_size)
    table = np.array([3, 0, 5, 1, 4][:pages] + [-1], np.int64)
    pool = np.full((6, 2, words), 0xDEADBEEF, np.uint32)
    kivi.write_pages(pool, table, caches, page_size)
    for h, c in enumerate(caches):
        back = kivi.read_pages(
            pool, table, h, c.quantised, bits, group, page_size, c.k_residual, c.v_residual
        )
        for field in ("k_codes", "k_scale", "k_min", "v_codes", "v_scale", "v_min"):
            got, want = (np.ascontiguousarray(getattr(x, field)) for x in (back, c))
            assert got.dtype == want.dtype and np.array_equal(
                got.view(np.uint8), want.view(np.uint8)
            )
        np.testing.assert_array_equal(kivi.dequantize(back)[0], kivi.dequantize(c)[0])
    per, d = 32 // bits, 64
    t, ch = page_size + 2 * per + 1, 9  # in the table's second page
    word = pool[table[1], 1, ch * page_size // per + (t % page_size) // per]
    assert (word >> (t % per * bits)) & ((1 << bits) - 1) == (
        caches[1].k_codes[ch, t // per] >> (t % per * bits)
    ) & ((1 << bits) - 1)
    at = 2 * d * page_size // per + d * page_size // group + (t % page_size) * d // group
    assert pool[table[1], 0, at] == kivi.stat_words(caches[0].v_scale, caches[0].v_min)[t, 0]
    # A page past the groups (the table's spare) is not written.
    assert np.all(pool[2] == 0xDEADBEEF)


def test_a_page_size_that_splits_a_group_is_refused():
    with pytest.raises(ValueError, match="kivi: page_size=48: expected a multiple of group=32"):
        kivi.page_words(64, 2, 32, 48)
