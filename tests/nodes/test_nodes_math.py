"""kvdsl.nodes.rmsnorm and kvdsl.nodes.quant, each alone in a tiny kernel, against numpy.

Every kernel runs on the interpreter and on the GPU. Expected values come from the meaning
(:mod:`kvdsl.reference.elementwise`); quantisation and packing are integer results and must be
exact where the input sits away from a rounding boundary, which the inputs below guarantee.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.ir import Dispatch, KernelBuilder, array, f32, i32, u32
from kvdsl.nodes import quant, walks
from kvdsl.nodes.rmsnorm import rms_norm_row
from kvdsl.reference import elementwise as ew

BACKENDS = [pytest.param(interp.run, id="interp"), pytest.param(runtime.run, id="gpu")]
RNG = np.random.default_rng(7)


def _rms_kernel(n: int, eps: float):
    kb = KernelBuilder(f"rms{n}", 16)
    x = kb.binding("x", f32)
    w = kb.binding("w", f32)
    out = kb.binding("out", f32, "read_write")
    head_dim = kb.const("N", u32, n)
    eps_c = kb.const("EPS", f32, eps)
    rows = kb.param("count")
    i = walks.per_row(kb, 65535, rows)
    row = kb.var("k", array(f32, n))
    with walks.row_elements(kb, head_dim) as d:
        row[d] = x[i * head_dim + d]
    rms_norm_row(kb, row, w, head_dim, eps_c)
    with walks.row_elements(kb, head_dim) as d:
        out[i * head_dim + d] = row[d]
    return kb.build(Dispatch(rows.node, 16, 65535))


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("n,eps", [(8, 1e-6), (37, 1e-5), (128, 1e-6)])
def test_rms_norm_row(run, n, eps):
    rows = 21
    x = (RNG.uniform(0.05, 3.0, (rows, n)) * RNG.choice([-1, 1], (rows, n))).astype(np.float32)
    x[0] *= np.float32(1e-3)  # small rows: eps matters
    w = RNG.uniform(0.5, 1.5, n).astype(np.float32)
    out = run(
        _rms_kernel(n, eps),
        {"x": x, "w": w, "out": np.full((rows, n), np.nan, np.float32)},
        {"count": rows},
    )["out"]
    # The kernel sums squares in order, numpy pairwise; inverseSqrt is approximate on GPUs.
    np.testing.assert_allclose(out, ew.rms_norm(x, w, eps), rtol=4e-6, atol=0)


def _quant_kernel(bits: int, heads: int, head_dim: int, qmin: int, qmax: int):
    """out[i*D + d] (8 bits) or out[i*D/2 + dd] (4 bits) for row i = (t, hk) of x [T, H, D]."""
    kb = KernelBuilder(f"q{bits}", 16)
    x = kb.binding("x", f32)
    scale = kb.binding("scale", f32)
    out = kb.binding("out", i32 if bits == 8 else u32, "read_write")
    hd = kb.const("HEAD_DIM", u32, head_dim)
    heads_c = kb.const("KV_HEADS", u32, heads)
    lo, hi = kb.const("QMIN", f32, float(qmin)), kb.const("QMAX", f32, float(qmax))
    rows = kb.param("count")
    per_channel = kb.param("perChannel").ne(0)
    fn = quant.scale_function(kb, "qscale", scale, hd, per_channel)
    i = walks.per_row(kb, 65535, rows)
    hk = kb.let("hk", i % heads_c)
    if bits == 8:
        with walks.row_elements(kb, hd) as d:
            q = quant.quantize(x[i * hd + d], kb.fn_call(fn, d, hk), lo, hi)
            out[i * hd + d] = q
    else:
        with walks.row_elements(kb, head_dim // 2, "dd") as dd:
            q0 = quant.quantize(x[i * hd + dd * 2], kb.fn_call(fn, dd * 2, hk), lo, hi)
            q1 = quant.quantize(x[i * hd + dd * 2 + 1], kb.fn_call(fn, dd * 2 + 1, hk), lo, hi)
            out[i * (head_dim // 2) + dd] = quant.pack_int4(q0, q1)
    return kb.build(Dispatch(rows.node, 16, 65535))


@pytest.mark.parametrize("run", BACKENDS)
@pytest.mark.parametrize("bits,qmin,qmax", [(8, -128, 127), (8, -127, 127), (4, -8, 7), (4, -7, 7)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_quantize(run, bits, qmin, qmax, per_channel):
    heads, d, tokens = 3, 10, 7
    # Power-of-two scales make x / scale exact on every device, so x = (m + 0.5) * scale are
    # true ties (round half to even) and the rest sit on multiples of scale / 8, away from them.
    scale = (2.0 ** RNG.integers(-4, 3, heads * d)).astype(np.float32)
    if not per_channel:
        scale[0] = 0.25
    s = ew.channel_scales(scale, heads, d, per_channel).reshape(-1 if per_channel else 1)
    s = np.broadcast_to(s.reshape(1, heads, d) if per_channel else s, (tokens, heads, d))
    eighths = RNG.integers(-8 * (qmax + 4), 8 * (qmax + 4), (tokens, heads, d))
    eighths[0, 0, :] = 8 * np.arange(-5, 5) + 4  # ties: -4.5 .. 4.5
    eighths[1, 0, :4] = [8 * (qmax + 3), -8 * (-qmin + 3), 8 * qmax + 4, 8 * qmin - 4]  # clamps
    x = (eighths / 8.0 * s).astype(np.float32)
    q = np.clip(np.rint(eighths / 8.0), qmin, qmax).astype(np.int32)
    expected = q if bits == 8 else ew.pack_int4(q)
    poison = np.full(expected.size, 0x5EADBEEF, expected.dtype)
    got = run(
        _quant_kernel(bits, heads, d, qmin, qmax),
        {"x": x, "scale": scale, "out": poison},
        {"count": tokens * heads, "perChannel": int(per_channel)},
    )["out"]
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)
    if bits == 8:  # the ties, spelt out: half to even
        assert got.reshape(q.shape)[0, 0].tolist() == [-4, -4, -2, -2, 0, 0, 2, 2, 4, 4]


def test_pack_int4_layout():
    """Low nibble first, +8 offset, bits 8..31 zero."""
    assert ew.pack_int4(np.array([-8, 7])) == 0xF0
    assert ew.pack_int4(np.array([3, -1])) == (11 | 7 << 4)
