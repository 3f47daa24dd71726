"""The reference's small print, worked by hand: element types of every result (float32 math
whatever the inputs' type), defaults, flat or shaped tables, error messages, and the exact rows
each window pass owns. Complements tests/test_reference.py (the modes' meaning) where mutation
testing found it silent (docs/testing.md)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref

F32 = np.float32


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def rand(rng, shape, dtype=F32):
    x = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(dtype)


# ---- element transforms ---------------------------------------------------------------------------


def test_split_heads_message():
    with pytest.raises(ValueError) as err:
        ref.split_heads(np.zeros((1, 2, 10)), 3)
    assert str(err.value) == "hidden size 10 is not a multiple of kv_heads=3"


def test_rotate_neox_by_hand_with_flat_float64_tables():
    x = np.array([[1.0, 2.0, 3.0, 4.0]])  # float64 in, float32 out
    theta = np.array([[0.0, 0.0], [np.pi / 2, np.pi]])  # positions 0 and 1, pairs 0 and 1
    cos, sin = np.cos(theta).reshape(-1), np.sin(theta).reshape(-1)  # flat, float64
    out = ref.rotate_neox(x, np.array([1]), cos, sin)
    assert out.dtype == np.float32 and out.shape == (1, 4)
    # pair 0 (1, 3) turns by 90°: (-3, 1); pair 1 (2, 4) by 180°: (-2, -4)
    assert np.allclose(out, [[-3.0, -2.0, 1.0, -4.0]], atol=1e-6)
    assert np.allclose(ref.rotate_neox(x, np.array([0]), cos, sin), x)


def test_partial_rotate_neox_by_hand():
    """half = 1 of a row of 5: the pair (x0, x1) turns, x2..x4 pass through."""
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]])
    cos, sin = np.array([1.0, 0.0]), np.array([0.0, 1.0])  # positions 0 and 1: 0° and 90°
    out = ref.rotate_neox(x, np.array([1]), cos, sin, half=1)
    assert np.allclose(out, [[-2.0, 1.0, 3.0, 4.0, 5.0]], atol=1e-6)
    rot = ref.Rotary(cos.reshape(2, 1), sin.reshape(2, 1), 1)
    k, _ = ref.build(x.reshape(1, 1, 5), x.reshape(1, 1, 5), 1, 1, rotary=rot)
    assert np.allclose(k.reshape(-1), [-2.0, 1.0, 3.0, 4.0, 5.0], atol=1e-6)
    with pytest.raises(ValueError) as err:
        ref.rotate_neox(x, np.array([0]), cos, sin, half=3)
    assert str(err.value) == "rotary half 3 outside 1..2 (head dim 5)"


def test_rotary_tables_are_float32():
    cos, sin = ref.elementwise.rotary_tables(np.ones(6), np.zeros((3, 2)), 2)
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == sin.shape == (3, 2)


def test_rotate_neox_messages():
    with pytest.raises(ValueError) as err:
        ref.rotate_neox(np.ones((2, 5)), np.zeros(2, int), np.ones(10), np.zeros(10))
    assert str(err.value) == "rotary needs an even head dim, got 5"
    with pytest.raises(ValueError) as err:
        ref.rotate_neox(np.ones((2, 4)), np.array([0, 3]), np.ones(6), np.zeros(6))
    assert str(err.value) == "rotary positions 0..3 outside the caches"


def test_rms_norm_by_hand_over_the_last_axis():
    x = np.array([[[3.0, 4.0], [1.0, 1.0]], [[0.0, 2.0], [6.0, 8.0]]])  # [2, 2, 2] float64
    w = np.array([1.0, 2.0])  # float64
    out = ref.rms_norm(x, w, 0.5)
    assert out.dtype == np.float32 and out.shape == x.shape
    # mean(x²) over the last axis: 12.5, 1, 2, 50; + eps 0.5
    inv = 1 / np.sqrt(np.array([13.0, 1.5, 2.5, 50.5])).reshape(2, 2, 1)
    assert np.allclose(out, x * inv * w, rtol=1e-6)


def test_channel_scales_shapes_and_type():
    s = np.arange(1, 13, dtype=np.float64).reshape(2, 6)  # H=2, D=6, given [H, D], float64
    per = ref.channel_scales(s, 2, 6, True)
    assert per.dtype == np.float32 and per.shape == (1, 2, 1, 6)
    assert per[0, 1, 0, 2] == 9.0
    one = ref.channel_scales(np.array([0.5, 7.0, 9.0]), 2, 6, False)
    assert one.dtype == np.float32 and one.shape == (1, 1, 1, 1) and one[0, 0, 0, 0] == 0.5
    one = ref.channel_scales(np.array([[0.25, 7.0], [1.0, 2.0]]), 2, 6, False)
    assert one.shape == (1, 1, 1, 1) and one[0, 0, 0, 0] == 0.25


def test_quantize_divides_in_float32():
    # 2.5000001 is 2.5 in float32: half to even gives 2 (float64 division would give 3).
    assert ref.quantize(np.array([2.5000001]), np.float32(1.0), -8, 7).tolist() == [2]
    # A scale just under 1 is 1.0 in float32.
    assert ref.quantize(F32([2.5]), np.array([0.9999999999]), -8, 7).tolist() == [2]
    q = ref.quantize(F32([100.0, -100.0, 3.4]), F32(1.0), -8, 7)
    assert q.dtype == np.int32 and q.tolist() == [7, -8, 3]


def test_pack_int4_from_narrow_integers():
    q = np.array([[7, 7, -8, 7], [0, -1, 5, -6]], np.int8)
    words = ref.pack_int4(q)
    assert words.dtype == np.uint32 and words.shape == (2, 2)
    # nibble = q + 8: (15, 15) → 0xFF, (0, 15) → 0xF0, (8, 7) → 0x78, (13, 2) → 0x2D
    assert words.tolist() == [[0xFF, 0xF0], [0x78, 0x2D]]


def test_pack_int4_message():
    with pytest.raises(ValueError) as err:
        ref.pack_int4(np.zeros((2, 4, 3), np.int32))
    assert str(err.value) == "int4 packing needs an even head dim, got 3"


def test_unpack_int4_from_narrow_words():
    words = np.array([[0xFF, 0x2D], [0x00, 0x78]], np.uint8)
    q = ref.unpack_int4(words)
    assert q.dtype == np.int32 and q.shape == (2, 4)
    assert q.tolist() == [[7, 7, 5, -6], [-8, -8, 0, -1]]


def test_dequantize_is_float32():
    out = ref.dequantize(np.array([3, -2], np.int32), np.array([0.5, 0.25]))
    assert out.dtype == np.float32 and out.tolist() == [1.5, -0.5]


# ---- modes ----------------------------------------------------------------------------------------


def test_written_over_takes_flat_contents(rng):
    mask = np.zeros((1, 1, 3, 2), bool)
    mask[0, 0, 1] = True
    w = ref.Written(np.full((1, 1, 3, 2), 5.0), np.full((1, 1, 3, 2), 6.0), mask)
    k, v = w.over(np.arange(6.0), np.arange(10.0, 16.0))
    assert k.shape == v.shape == (1, 1, 3, 2)
    assert k.reshape(-1).tolist() == [0, 1, 5, 5, 4, 5]
    assert v.reshape(-1).tolist() == [10, 11, 6, 6, 14, 15]


def test_combine_refuses_overlap_and_joins_disjoint_passes():
    a = np.array([True, False, False])
    first = ref.Written(np.array([1.0, 0, 0]), np.array([2.0, 0, 0]), a)
    second = ref.Written(np.array([0, 3.0, 0]), np.array([0, 4.0, 0]), np.array([0, 1, 0], bool))
    both = ref.combine(first, second)
    assert both.mask.tolist() == [True, True, False]
    assert both.key[:2].tolist() == [1.0, 3.0] and both.value[:2].tolist() == [2.0, 4.0]
    with pytest.raises(ValueError) as err:
        ref.combine(first, first)
    assert str(err.value) == "the passes overlap: their order would matter"


def test_copy_is_a_copy(rng):
    k, v = rand(rng, (2, 3)), rand(rng, (2, 3))
    ck, cv = ref.copy(k, v)
    assert not np.shares_memory(ck, k) and not np.shares_memory(cv, v)
    assert np.array_equal(ck, k) and np.array_equal(cv, v)


def test_merge_converts_new_tokens_to_the_caches_type(rng):
    past = rand(rng, (1, 2, 3, 4), np.float16)
    new = rand(rng, (1, 2, 8))  # float32
    k, v = ref.merge(past, past, new, new)
    assert k.dtype == v.dtype == np.float16 and k.shape == (1, 2, 5, 4)
    assert np.array_equal(k[:, :, 3:], ref.split_heads(new, 2).astype(np.float16))
    with pytest.raises(ValueError) as err:
        ref.merge(past, past, new, new, seq=6)
    assert str(err.value) == "seq=6 exceeds pastSeq + keySeq = 5"


def test_merge_share_retain_rows_by_hand(rng):
    past = rand(rng, (1, 1, 6, 2))  # capacity 6, head dim 2
    w = ref.merge_share_retain(past, past, np.array([3]), 2)  # window [2, 4)
    assert w.mask[0, 0, :, 0].tolist() == [True, True, False, False, True, True]
    w = ref.merge_share_retain(past, past, np.array([-1]), 2)  # window [0, 2)
    assert w.mask[0, 0, :, 1].tolist() == [False, False, True, True, True, True]


def test_merge_share_outputs_have_the_caches_type(rng):
    past = rand(rng, (2, 2, 6, 4), np.float16)
    new = rand(rng, (2, 3, 8))
    w = ref.merge_share(past, past, new, new, np.array([4, 9]))
    assert w.key.dtype == w.value.dtype == np.float16
    a = ref.merge_share_append(new, new, np.array([4, 9]), 6, 2, None, np.float16)
    assert a.key.dtype == a.value.dtype == np.float16
    # The window of batch 0 is rows [2, 5), of batch 1 (past the capacity) [3, 6).
    assert np.array_equal(a.value[0, :, 2:5], ref.split_heads(new, 2)[0].astype(np.float16))
    assert np.array_equal(a.value[1, :, 3:6], ref.split_heads(new, 2)[1].astype(np.float16))
    assert (a.value[0, :, :2] == 0).all() and (a.key[1, :, :3] == 0).all()


def test_build_defaults_to_position_zero_and_float32(rng):
    k, v = rand(rng, (1, 3, 4), np.float64), rand(rng, (1, 3, 4), np.float64)
    theta = rng.uniform(0, 2 * np.pi, (5, 2))
    rot = ref.Rotary(np.cos(theta), np.sin(theta))
    bk, bv = ref.build(k, v, 1, rotary=rot)
    assert bk.dtype == bv.dtype == np.float32
    pos = np.arange(3)[None, None, :]
    want = ref.rotate_neox(ref.split_heads(k, 1), pos, rot.cos, rot.sin)
    assert np.array_equal(bk, want)
    plain, _ = ref.build(k, v, 1)
    assert plain.dtype == np.float32
    q = ref.Quant(8, F32([0.01]), F32([0.01]), False)
    qk, _ = ref.build_quant(k, v, 1, q, rotary=rot)
    assert np.array_equal(qk, ref.quantize(want, F32(0.01), -128, 127))


def test_build_quant_per_channel_value_scales(rng):
    k = rand(rng, (1, 2, 4))
    v = rand(rng, (1, 2, 4))
    ks = F32([0.5, 0.5, 0.5, 0.5])
    vs = F32([0.01, 0.02, 0.04, 0.08])  # H=2, D=2: scale[h*2 + d]
    _, qv = ref.build_quant(k, v, 2, ref.Quant(8, ks, vs, True))
    want = np.clip(np.rint(ref.split_heads(v, 2) / vs.reshape(1, 2, 1, 2)), -128, 127)
    assert np.array_equal(qv, want.astype(np.int32))
    with pytest.raises(ValueError) as err:
        ref.build_quant(k, v, 2, ref.Quant(5, ks, vs, True, -16, 15))
    assert str(err.value) == "bits=5: expected 8 or 4"


def test_append_quant_outputs_are_codes(rng):
    k, v = rand(rng, (2, 3, 4)), rand(rng, (2, 3, 4))
    q = ref.Quant(8, F32([0.02]), F32([0.03]), False)
    w = ref.append_quant(k, v, np.array([0, 6]), 5, 2, q)
    assert w.key.dtype == w.value.dtype == np.int32
    q4 = ref.Quant(4, F32([0.5]), F32([0.5]), False)
    w4 = ref.append_quant(k, v, np.array([0, 6]), 5, 2, q4)
    assert w4.key.dtype == w4.value.dtype == np.uint32 and w4.value.shape == (2, 2, 5, 1)


def test_window_shift_default_region_and_message(rng):
    past = rand(rng, (1, 1, 4, 2))
    new = rand(rng, (1, 1, 2))
    w = ref.window_shift(past, past, new, new, np.array([2]))
    assert w.mask.all()
    with pytest.raises(ValueError) as err:
        ref.window_shift(past, past, new, new, np.array([2]), "tail")
    assert str(err.value) == "region='tail': expected one of ('all', 'shift', 'append')"


def test_window_shift_region_rows_by_hand(rng):
    past = rand(rng, (1, 1, 6, 2))
    new = rand(rng, (1, 2, 2))
    # 4 tokens after the step, 2 resident before: new tokens at rows 2 and 3, rows 4, 5 zero.
    seqlens = np.array([3])
    shift = ref.window_shift(past, past, new, new, seqlens, "shift")
    append = ref.window_shift(past, past, new, new, seqlens, "append")
    assert append.mask[0, 0, :, 0].tolist() == [False, False, True, True, False, False]
    assert shift.mask[0, 0, :, 1].tolist() == [True, True, False, False, True, True]
    assert np.array_equal(append.key[0, 0, 2:4], new[0])
    assert np.array_equal(shift.key[0, 0, :2], past[0, 0, :2]) and (shift.key[0, 0, 4:] == 0).all()
