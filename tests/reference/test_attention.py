"""The attention reference against a scalar loop written from the definition, and its options."""

import math

import numpy as np
import pytest

from kvdsl.reference.attention import attention, visible


def scalar_attention(q, k, v, lengths, scale, window, softcap, sinks):
    """One query, one head at a time, with Python floats."""
    b, hq, s, d = q.shape
    hkv = k.shape[1]
    out = np.zeros(q.shape)
    for bi in range(b):
        for h in range(hq):
            kv = h // (hq // hkv)
            for i in range(s):
                pos = lengths[bi] - s + i
                keys = [j for j in range(pos + 1) if window is None or pos - j < window]
                logits = []
                for j in keys:
                    x = scale * sum(
                        float(q[bi, h, i, c]) * float(k[bi, kv, j, c]) for c in range(d)
                    )
                    logits.append(softcap * math.tanh(x / softcap) if softcap else x)
                top = max(logits + ([float(sinks[h])] if sinks is not None else []))
                e = [math.exp(x - top) for x in logits]
                total = sum(e) + (math.exp(float(sinks[h]) - top) if sinks is not None else 0.0)
                for c in range(d):
                    out[bi, h, i, c] = (
                        sum(w * float(v[bi, kv, j, c]) for w, j in zip(e, keys)) / total
                    )
    return out


CASES = [
    # hq, hkv, s, window, softcap, sinks
    (4, 4, 1, None, None, False),
    (8, 2, 3, None, None, False),
    (4, 1, 8, None, None, True),
    (8, 2, 2, 5, None, False),
    (4, 2, 4, 3, 30.0, True),
    (16, 1, 1, None, 5.0, False),
]


@pytest.mark.parametrize("hq,hkv,s,window,softcap,sinks", CASES)
def test_attention_matches_the_definition(hq, hkv, s, window, softcap, sinks):
    rng = np.random.default_rng(hq * 100 + s)
    b, t, d = 3, 11, 8
    q = rng.normal(size=(b, hq, s, d)) * 2
    k = rng.normal(size=(b, hkv, t, d)) * 2
    v = rng.normal(size=(b, hkv, t, d))
    lengths = rng.integers(s, t + 1, size=b)
    scale = 0.3
    sink = rng.normal(size=hq) * 3 if sinks else None
    got = attention(q, k, v, lengths, scale=scale, window=window, softcap=softcap, sinks=sink)
    want = scalar_attention(q, k, v, lengths, scale, window, softcap, sink)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_rows_past_a_sequence_are_never_read():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 4, 2, 8))
    k = rng.normal(size=(2, 2, 9, 8))
    v = rng.normal(size=(2, 2, 9, 8))
    lengths = np.array([4, 9])
    base = attention(q, k, v, lengths)
    k[0, :, 4:] = np.nan
    v[0, :, 4:] = np.nan
    np.testing.assert_array_equal(attention(q, k, v, lengths), base)


def test_default_scale_is_one_over_sqrt_d():
    rng = np.random.default_rng(2)
    q, k, v = (
        rng.normal(size=(1, 2, 1, 16)),
        rng.normal(size=(1, 2, 5, 16)),
        rng.normal(size=(1, 2, 5, 16)),
    )
    np.testing.assert_allclose(attention(q, k, v, [5]), attention(q, k, v, [5], scale=0.25))


def test_a_sink_only_shrinks_the_weights():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 2, 1, 8)), rng.normal(size=(1, 2, 6, 8))
    v = np.ones((1, 2, 6, 8))  # the output is then the total weight of the keys
    plain = attention(q, k, v, [6])
    sunk = attention(q, k, v, [6], sinks=np.array([0.0, 50.0]))
    np.testing.assert_allclose(plain, 1.0)
    assert np.all(sunk[0, 0] < 1.0) and np.all(sunk[0, 0] > 0.0)
    assert np.all(sunk[0, 1] < 1e-15)


def test_the_mask():
    seen = visible(np.array([5, 3]), queries=2, keys=6, window=2)
    want = np.zeros((2, 2, 6), dtype=bool)
    want[0, 0, 2:4] = want[0, 1, 3:5] = True  # positions 3 and 4
    want[1, 0, 0:2] = want[1, 1, 1:3] = True  # positions 1 and 2
    np.testing.assert_array_equal(seen, want)


@pytest.mark.parametrize(
    "lengths,match",
    [([0, 4], "lengths"), ([4, 12], "lengths"), ([4], "lengths")],
)
def test_bad_lengths_are_refused(lengths, match):
    q, k = np.ones((2, 2, 1, 4)), np.ones((2, 1, 11, 4))
    with pytest.raises(ValueError, match=match):
        attention(q, k, k, np.array(lengths))


def test_heads_must_group():
    with pytest.raises(ValueError, match="multiple"):
        attention(np.ones((1, 3, 1, 4)), np.ones((1, 2, 4, 4)), np.ones((1, 2, 4, 4)), [4])
