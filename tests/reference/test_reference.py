"""kvdsl.reference: each mode's meaning, checked by properties on random, never-zero inputs."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref
from kvdsl.reference import KNorm, Quant, Rotary

B, H, D = 2, 3, 8


def rnd(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random float32 values bounded away from zero, both signs."""
    mag = rng.uniform(0.25, 2.0, shape)
    return (mag * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def caches(rng: np.random.Generator, positions: int, half: int = D // 2) -> Rotary:
    theta = rng.uniform(0.1, 3.0, (positions, half))
    return Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def test_transpose_moves_every_element(rng):
    key, value = rnd(rng, B, 5, H * D), rnd(rng, B, 5, H * D)
    k, v = ref.transpose(key, value, H, np.float16)
    assert k.shape == (B, H, 5, D) and k.dtype == np.float16
    for b, s, h, d in np.ndindex(B, 5, H, D):
        assert k[b, h, s, d] == np.float16(key[b, s, h * D + d])
        assert v[b, h, s, d] == np.float16(value[b, s, h * D + d])


def test_copy_is_identity_for_any_word_type(rng):
    words = rng.integers(0, 2**32, (B, H, 4, 3), dtype=np.uint32)
    k, v = ref.copy(words, words + 1)
    np.testing.assert_array_equal(k, words)
    np.testing.assert_array_equal(v, words + 1)
    assert k is not words


def test_merge_is_concatenation_along_tokens(rng):
    past_k, past_v = rnd(rng, B, H, 4, D), rnd(rng, B, H, 4, D)
    new_k, new_v = rnd(rng, B, 3, H * D), rnd(rng, B, 3, H * D)
    k, v = ref.merge(past_k, past_v, new_k, new_v)
    assert k.shape == (B, H, 7, D)
    np.testing.assert_array_equal(k[:, :, :4], past_k)
    np.testing.assert_array_equal(v[:, :, :4], past_v)
    for j in range(3):
        np.testing.assert_array_equal(k[:, :, 4 + j], new_k[:, j].reshape(B, H, D))
        np.testing.assert_array_equal(v[:, :, 4 + j], new_v[:, j].reshape(B, H, D))
    short, _ = ref.merge(past_k, past_v, new_k, new_v, seq=5)
    np.testing.assert_array_equal(short, k[:, :, :5])
    with pytest.raises(ValueError, match="exceeds"):
        ref.merge(past_k, past_v, new_k, new_v, seq=8)


def test_share_window_clamps_instead_of_wrapping():
    start, end = ref.share_window(np.array([9, 1, 40, -1]), key_seq=3, capacity=16)
    np.testing.assert_array_equal(end, [10, 3, 16, 3])
    np.testing.assert_array_equal(start, [7, 0, 13, 0])
    with pytest.raises(ValueError, match="capacity"):
        ref.share_window(np.array([0]), key_seq=5, capacity=4)


@pytest.mark.parametrize("rotary", [False, True])
def test_merge_share_passes_partition_the_cache(rng, rotary):
    cap, s = 12, 3
    past_k, past_v = rnd(rng, B, H, cap, D), rnd(rng, B, H, cap, D)
    new_k, new_v = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    seqlens = np.array([6, 1])  # batch 1: a right-padded first prompt appends at row 0
    rot = caches(rng, cap) if rotary else None
    retain = ref.merge_share_retain(past_k, past_v, seqlens, s)
    append = ref.merge_share_append(new_k, new_v, seqlens, cap, H, rot)
    assert not np.any(retain.mask & append.mask)
    both = ref.merge_share(past_k, past_v, new_k, new_v, seqlens, rot)
    assert both.mask.all()
    for b, start in ((0, 4), (1, 0)):
        rows = slice(start, start + s)
        win = np.zeros(cap, bool)
        win[rows] = True
        assert np.all(append.mask[b, :, rows]) and not np.any(append.mask[b][:, ~win])
        np.testing.assert_array_equal(both.key[b][:, ~win], past_k[b][:, ~win])
        np.testing.assert_array_equal(
            both.value[b, :, rows], new_v[b].reshape(s, H, D).swapaxes(0, 1)
        )
        fresh = new_k[b].reshape(s, H, D).swapaxes(0, 1)
        if rotary:
            # Row t is its own absolute position.
            fresh = ref.rotate_neox(fresh, np.arange(start, start + s)[None, :], rot.cos, rot.sin)
        np.testing.assert_allclose(both.key[b, :, rows], fresh, rtol=1e-6)


def test_written_over_keeps_untouched_elements(rng):
    past = rnd(rng, 1, 1, 6, D)
    w = ref.merge_share_append(rnd(rng, 1, 2, D), rnd(rng, 1, 2, D), np.array([3]), 6, 1)
    poison = np.full_like(past, np.nan)
    k, _ = w.over(poison, poison)
    assert np.isnan(k[0, 0, [0, 1, 4, 5]]).all() and not np.isnan(k[0, 0, 2:4]).any()


def test_rotary_is_complex_multiplication_and_keeps_pair_norms(rng):
    x = rnd(rng, 5, D)
    rot = caches(rng, 9)
    pos = np.array([0, 3, 8, 3, 1])
    y = ref.rotate_neox(x, pos, rot.cos.reshape(-1), rot.sin.reshape(-1))
    half = D // 2
    z = (x[:, :half] + 1j * x[:, half:]) * (rot.cos[pos] + 1j * rot.sin[pos])
    np.testing.assert_allclose(y[:, :half], z.real, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[:, half:], z.imag, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.hypot(y[:, :half], y[:, half:]), np.hypot(x[:, :half], x[:, half:]), rtol=1e-5
    )
    with pytest.raises(ValueError, match="outside"):
        ref.rotate_neox(x, np.array([9]), rot.cos, rot.sin)


def test_rms_norm_unit_rms_and_scale_invariance(rng):
    x = rnd(rng, 4, D)
    ones = np.ones(D, np.float32)
    y = ref.rms_norm(x, ones, 0.0)
    np.testing.assert_allclose(np.sqrt(np.mean(y * y, axis=-1)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(ref.rms_norm(3.5 * x, ones, 0.0), y, rtol=1e-5)
    w = rnd(rng, D)
    np.testing.assert_allclose(ref.rms_norm(x, w, 1e-6), y * w, rtol=1e-5)


def test_quantize_rounds_half_to_even_and_clamps():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 7.4], np.float32)
    np.testing.assert_array_equal(ref.quantize(x, 1.0, -128, 127), [0, 2, 2, 0, -2, 127, -128, 7])
    np.testing.assert_array_equal(ref.quantize(x, 2.0, -8, 7), [0, 1, 1, 0, -1, 7, -8, 4])


def test_int4_pack_unpack_round_trip_and_layout(rng):
    q = rng.integers(-8, 8, (3, 2, D), dtype=np.int32)
    words = ref.pack_int4(q)
    assert words.shape == (3, 2, D // 2) and words.dtype == np.uint32
    assert np.all(words >> 8 == 0)
    np.testing.assert_array_equal(ref.unpack_int4(words), q)
    np.testing.assert_array_equal(ref.pack_int4(np.array([-8, 7, 0, -1])), [0xF0, 0x78])


def test_per_channel_scales_index_head_and_channel(rng):
    x = rnd(rng, B, H, 4, D)
    s = rng.uniform(0.01, 0.2, H * D).astype(np.float32)
    k, v = ref.build_quant(
        x.swapaxes(1, 2).reshape(B, 4, H * D),
        x.swapaxes(1, 2).reshape(B, 4, H * D),
        H,
        Quant(8, s, np.full(H * D, 0.05, np.float32), per_channel=True),
    )
    per = ref.quantize(x, s.reshape(1, H, 1, D), -128, 127)
    np.testing.assert_array_equal(k, per)
    same = Quant(8, np.full(H * D, 0.05, np.float32), np.full(H * D, 0.05, np.float32), True)
    tensor = Quant(8, np.full(1, 0.05, np.float32), np.full(1, 0.05, np.float32), False)
    bsh = x.swapaxes(1, 2).reshape(B, 4, H * D)
    np.testing.assert_array_equal(
        ref.build_quant(bsh, bsh, H, same)[0], ref.build_quant(bsh, bsh, H, tensor)[0]
    )
    np.testing.assert_array_equal(v, ref.quantize(x, np.float32(0.05), -128, 127))


def test_build_norms_then_rotates_at_past_offset(rng):
    new_k, new_v = rnd(rng, B, 4, H * D), rnd(rng, B, 4, H * D)
    rot, norm = caches(rng, 10), KNorm(rnd(rng, D), 1e-6)
    plain_k, plain_v = ref.build(new_k, new_v, H)
    tk, tv = ref.transpose(new_k, new_v, H)
    np.testing.assert_array_equal(plain_k, tk)
    np.testing.assert_array_equal(plain_v, tv)
    k, v = ref.build(new_k, new_v, H, past_seq=5, k_norm=norm, rotary=rot)
    want = ref.rotate_neox(ref.rms_norm(tk, norm.weight, 1e-6), np.arange(5, 9), rot.cos, rot.sin)
    np.testing.assert_allclose(k, want, rtol=1e-6)
    np.testing.assert_array_equal(v, tv)


@pytest.mark.parametrize("bits", [8, 4])
def test_build_quant_dequantizes_close_to_build(rng, bits):
    new_k, new_v = rnd(rng, B, 4, H * D), rnd(rng, B, 4, H * D)
    rot = caches(rng, 8)
    k, v = ref.build(new_k, new_v, H, 2, rotary=rot)
    qmax = 2 ** (bits - 1) - 1
    ks = (np.abs(k).max(axis=(0, 2)).reshape(-1) / qmax).astype(np.float32)
    vs = np.full(H * D, np.abs(v).max() / qmax, np.float32)
    qk, qv = ref.build_quant(new_k, new_v, H, Quant(bits, ks, vs, True), 2, rotary=rot)
    if bits == 4:
        assert qk.shape == (B, H, 4, D // 2)
        qk, qv = ref.unpack_int4(qk), ref.unpack_int4(qv)
    ksb = ks.reshape(1, H, 1, D)
    assert np.all(np.abs(ref.dequantize(qk, ksb) - k) <= ksb / 2 * (1 + 1e-5))
    assert np.all(np.abs(ref.dequantize(qv, vs[0]) - v) <= vs[0] / 2 * (1 + 1e-5))


@pytest.mark.parametrize("bits", [8, 4])
def test_append_quant_writes_the_window_rotated_at_its_rows(rng, bits):
    cap, s = 10, 3
    new_k, new_v = rnd(rng, B, s, H * D), rnd(rng, B, s, H * D)
    rot, norm = caches(rng, cap), KNorm(rnd(rng, D), 1e-5)
    quant = Quant(
        bits,
        rng.uniform(0.05, 0.3, H * D).astype(np.float32),
        np.full(H * D, 0.2, np.float32),
        True,
    )
    seqlens = np.array([7, 0])
    w = ref.append_quant(new_k, new_v, seqlens, cap, H, quant, norm, rot)
    for b, start in ((0, 5), (1, 0)):
        rows = np.zeros(cap, bool)
        rows[start : start + s] = True
        assert w.mask[b][:, rows].all() and not w.mask[b][:, ~rows].any()
        one = lambda x: x[b : b + 1]  # noqa: E731
        qk, qv = ref.build_quant(one(new_k), one(new_v), H, quant, start, norm, rot)
        np.testing.assert_array_equal(w.key[b][:, rows], qk[0])
        np.testing.assert_array_equal(w.value[b][:, rows], qv[0])


def test_window_plan_never_goes_negative():
    plan = ref.window_plan(np.array([0, 5, 9, 30, 2]), key_seq=6, capacity=4)
    np.testing.assert_array_equal(plan.abs_total, [6, 6, 10, 31, 6])
    np.testing.assert_array_equal(plan.kept, [4, 4, 4, 4, 4])
    np.testing.assert_array_equal(plan.append_start, [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(plan.new_dropped, [2, 2, 2, 2, 2])
    plan = ref.window_plan(np.array([2, 6, 20]), key_seq=2, capacity=8)
    np.testing.assert_array_equal(plan.resident_before, [1, 5, 8])
    np.testing.assert_array_equal(plan.evicted, [0, 0, 2])
    np.testing.assert_array_equal(plan.append_start, [1, 5, 6])


@pytest.mark.parametrize("rotary", [False, True])
def test_window_shift_keeps_the_last_tokens_of_a_stream(rng, rotary):
    cap, chunks = 5, (3, 1, 2, 7, 1, 4)
    total = sum(chunks)
    stream_k, stream_v = rnd(rng, 1, total, H * D), rnd(rng, 1, total, H * D)
    rot = caches(rng, total) if rotary else None
    hist_k, hist_v = ref.transpose(stream_k, stream_v, H)
    if rotary:
        hist_k = ref.rotate_neox(hist_k, np.arange(total), rot.cos, rot.sin)
    k = v = np.full((1, H, cap, D), np.nan, np.float32)
    seen = 0
    for n in chunks:
        new = slice(seen, seen + n)
        seen += n
        seqlens = np.array([seen - 1])
        w = ref.window_shift(k, v, stream_k[:, new], stream_v[:, new], seqlens, "all", rot)
        shift = ref.window_shift(k, v, stream_k[:, new], stream_v[:, new], seqlens, "shift", rot)
        app = ref.window_shift(k, v, stream_k[:, new], stream_v[:, new], seqlens, "append", rot)
        assert w.mask.all() and not np.any(shift.mask & app.mask)
        np.testing.assert_array_equal(shift.mask | app.mask, w.mask)
        k, v = w.key, w.value
        kept = min(seen, cap)
        np.testing.assert_allclose(k[:, :, :kept], hist_k[:, :, seen - kept : seen], rtol=1e-6)
        np.testing.assert_array_equal(v[:, :, :kept], hist_v[:, :, seen - kept : seen])
        assert np.all(k[:, :, kept:] == 0) and np.all(v[:, :, kept:] == 0)
