"""The interpreter and the numpy reference on cases worked out by hand: quantisation codes where
``x / scale`` lands exactly on a half (WGSL's ``round`` goes to the even neighbour), clamps at
both ends of the int8 and int4 ranges, and a negative zero; scales are powers of two, so every
quotient is exact and the codes below are the only right answers."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl import reference as ref
from kvdsl.kernels.quant import BuildQuantConfig, build_quant

F32 = np.float32
K_SCALE, V_SCALE = 0.5, 0.25
# Token 0 of the one head; token 1 is its negation.
K0 = [1.25, 1.75, -1.25, -0.75, 0.2, 100.0, -100.0, 3.0]
# x / 0.5:  2.5   3.5   -2.5   -1.5  0.4  200     -200     6
K0_CODES = {8: [2, 4, -2, -2, 0, 127, -128, 6], 4: [2, 4, -2, -2, 0, 7, -8, 6]}
K1_CODES = {8: [-2, -4, 2, 2, 0, -128, 127, -6], 4: [-2, -4, 2, 2, 0, -8, 7, -6]}
V0 = [0.375, 0.625, -0.125, 0.875, -1.125, 2.0, -0.5, 0.1]
# x / 0.25: 1.5    2.5    -0.5    3.5    -4.5    8    -2     0.4
V0_CODES = {8: [2, 2, 0, 4, -4, 8, -2, 0], 4: [2, 2, 0, 4, -4, 7, -2, 0]}
V1_CODES = {8: [-2, -2, 0, -4, 4, -8, 2, 0], 4: [-2, -2, 0, -4, 4, -8, 2, 0]}


@pytest.mark.parametrize("bits", [8, 4])
def test_build_quant_codes_by_hand(bits):
    d, seq = len(K0), 2
    cfg = BuildQuantConfig(1, d, bits)
    kernel = build_quant(cfg)
    src_k = np.array([K0, [-x for x in K0]], F32).reshape(1, seq, d)
    src_v = np.array([V0, [-x for x in V0]], F32).reshape(1, seq, d)
    words = d if bits == 8 else d // 2
    dt = np.int32 if bits == 8 else np.uint32
    bufs = {
        "src_k": src_k,
        "src_v": src_v,
        "k_scale": np.array([K_SCALE], F32),
        "v_scale": np.array([V_SCALE], F32),
        "present_key": np.full(seq * words, 0xDEADBEEF, np.uint32).view(dt),
        "present_value": np.full(seq * words, 0xDEADBEEF, np.uint32).view(dt),
    }
    params = {"count": seq, "seq": seq, "pastSeq": 0, "perChannel": 0}
    out = interp.run(kernel, bufs, params)

    def codes(x):
        x = np.asarray(x).reshape(1, 1, seq, words)
        return x if bits == 8 else ref.unpack_int4(x.astype(np.uint32))

    want_k = np.array([K0_CODES[bits], K1_CODES[bits]]).reshape(1, 1, seq, d)
    want_v = np.array([V0_CODES[bits], V1_CODES[bits]]).reshape(1, 1, seq, d)
    np.testing.assert_array_equal(codes(out["present_key"]), want_k)
    np.testing.assert_array_equal(codes(out["present_value"]), want_v)
    quant = ref.Quant(bits, bufs["k_scale"], bufs["v_scale"], False)
    ref_k, ref_v = ref.build_quant(src_k, src_v, 1, quant)
    np.testing.assert_array_equal(codes(ref_k), want_k)
    np.testing.assert_array_equal(codes(ref_v), want_v)
