"""WGSL's subgroup builtins (the ``subgroups`` extension): reductions, scans, broadcasts, shuffles,
ballot, all/any, elect and the ``subgroup_invocation_id`` / ``subgroup_size`` inputs. A kernel
using them parses, prints back to the same IR, runs in the interpreter at the adapter's subgroup
size as on the GPU, and at every size as a numpy statement of it says. Smaller valid texts and
the invalid ones are conformance cases (``cases/subgroup_builtins/``, run by
``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.frontend import FrontendError, parse
from tests.helpers.wgsl import printed_back

N = 256  # invocations: four workgroups of 64

KERNEL = """enable subgroups;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> u: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> outu: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) sg: u32) {
  let i = gid.x;
  let v = x[i];
  let w = u[i];
  out[i * 8u] = subgroupAdd(v);
  out[i * 8u + 1u] = subgroupMax(v);
  out[i * 8u + 2u] = subgroupInclusiveAdd(v);
  out[i * 8u + 3u] = subgroupExclusiveAdd(v);
  out[i * 8u + 4u] = subgroupBroadcast(v, 3u);
  out[i * 8u + 5u] = subgroupShuffle(v, (sid + 5u) % sg);
  out[i * 8u + 6u] = subgroupShuffleDown(v, 1u);
  out[i * 8u + 7u] = subgroupMin(v);
  let b = subgroupBallot(w > 100u);
  outu[i * 8u] = subgroupOr(w) ^ subgroupAnd(w);
  outu[i * 8u + 1u] = subgroupXor(w) + subgroupAdd(w) * subgroupMul(w | 1u);
  outu[i * 8u + 2u] = b.x ^ b.y ^ b.z ^ b.w;
  outu[i * 8u + 3u] = select(0u, 1u, subgroupAll(w > 5u)) + select(0u, 2u, subgroupAny(w > 295u));
  outu[i * 8u + 4u] = subgroupBroadcastFirst(w) + sid * 1000u;
  outu[i * 8u + 5u] = subgroupShuffleUp(w, 2u);
  outu[i * 8u + 6u] = subgroupShuffleXor(w, 3u) + sg;
  outu[i * 8u + 7u] = subgroupInclusiveMul(w % 3u + 1u) - subgroupExclusiveMul(w % 5u + 1u);
}
"""


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {
        "x": rng.standard_normal(N).astype(np.float32),
        "u": rng.integers(1, 300, N).astype(np.uint32),
        "out": np.full(N * 8, np.nan, np.float32),
        "outu": np.full(N * 8, 0xDEADBEEF, np.uint32),
    }


def _seq(f, rows: np.ndarray, identity, inclusive: bool) -> np.ndarray:
    """A scan of ``f`` along each row in lane order, one lane at a time."""
    out = np.empty_like(rows)
    acc = np.full(rows.shape[0], identity, rows.dtype)
    for p in range(rows.shape[1]):
        if not inclusive:
            out[:, p] = acc
        acc = f(acc, rows[:, p]).astype(rows.dtype)
        if inclusive:
            out[:, p] = acc
    return out


def numpy_subgroups(bufs: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """What the kernel computes with subgroups of ``size`` consecutive invocations, every
    reduction folded in lane order."""
    x = bufs["x"].reshape(-1, size)
    u = bufs["u"].reshape(-1, size).astype(np.uint32)
    sid = np.arange(size, dtype=np.uint32)[None, :].repeat(x.shape[0], 0)
    lanes = np.arange(size)
    with np.errstate(all="ignore"):
        f = np.empty((x.shape[0], size, 8), np.float32)
        f[..., 0] = _seq(np.add, x, 0, True)[:, -1:]
        f[..., 1] = x.max(axis=1, keepdims=True)
        f[..., 2] = _seq(np.add, x, 0, True)
        f[..., 3] = _seq(np.add, x, 0, False)
        f[..., 4] = x[:, 3:4]
        f[..., 5] = x[:, (lanes + 5) % size]
        f[..., 6] = x[:, (lanes + 1) % size]  # past the edge: llvmpipe's wrap (see kvdsl.interp)
        f[..., 7] = x.min(axis=1, keepdims=True)
        g = np.empty((x.shape[0], size, 8), np.uint32)
        g[..., 0] = (np.bitwise_or.reduce(u, axis=1) ^ np.bitwise_and.reduce(u, axis=1))[:, None]
        mul = _seq(np.multiply, u | np.uint32(1), 1, True)[:, -1:]
        add = u.sum(axis=1, dtype=np.uint32, keepdims=True)
        g[..., 1] = np.bitwise_xor.reduce(u, axis=1)[:, None] + add * mul
        bits = np.zeros(x.shape[0], np.uint32)
        for p in range(size):
            bits ^= (u[:, p] > 100).astype(np.uint32) << np.uint32(p % 32)
        g[..., 2] = bits[:, None]
        g[..., 3] = ((u > 5).all(axis=1) * 1 + (u > 295).any(axis=1) * 2)[:, None]
        g[..., 4] = u[:, :1] + sid * 1000
        g[..., 5] = np.where(lanes >= 2, u[:, (lanes - 2) % size], u)
        g[..., 6] = u[:, lanes ^ 3] + size
        inc = _seq(np.multiply, u % 3 + 1, 1, True)
        g[..., 7] = inc - _seq(np.multiply, u % 5 + 1, 1, False)
    return {"out": f.reshape(-1), "outu": g.reshape(-1)}


def test_subgroup_kernel_prints_back_to_the_same_ir():
    printed_back(KERNEL)


@pytest.mark.parametrize("size", [4, 8, 16, 32, 64])
def test_subgroup_builtins_in_the_interpreter_are_what_numpy_says(size):
    bufs = _inputs()
    got = interp.run(parse(KERNEL), bufs, {}, (N // 64, 1, 1), subgroup_size=size)
    want = numpy_subgroups(bufs, size)
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_array_equal(got["outu"], want["outu"])


def test_subgroup_builtins_in_the_interpreter_are_the_gpus(gpu):
    size = runtime.subgroup_size()
    assert size is not None, "the suite's adapters have subgroups (tests/helpers/features.py)"
    k = parse(KERNEL)
    bufs = _inputs()
    got = interp.run(k, bufs, {}, (N // 64, 1, 1), subgroup_size=size)
    ran = runtime.run(k, bufs, {}, (N // 64, 1, 1))
    f, u = ran["out"].reshape(N, 8), ran["outu"].reshape(N, 8)
    gf, gu = got["out"].reshape(N, 8), got["outu"].reshape(N, 8)
    # Shuffles past the subgroup's edge are indeterminate: the interpreter gives llvmpipe's.
    lane = np.arange(N) % 64 % size
    edge_down, edge_up = lane == size - 1, lane < 2
    if (gpu["implementation"], gpu["vendor"]) == ("wgpu-native", "llvmpipe"):
        edge_down[:], edge_up[:] = False, False  # docs/deviations.md: compared too
    keep_u = np.ones((N, 8), bool)
    keep_u[edge_up, 5] = False
    np.testing.assert_array_equal(u[keep_u], gu[keep_u])
    keep_f = np.ones((N, 8), bool)
    keep_f[edge_down, 6] = False
    # Float sums: the interpreter adds in lane order; an adapter may add in another order.
    np.testing.assert_allclose(f[keep_f], gf[keep_f], rtol=1e-5, atol=1e-5)
    want = numpy_subgroups(bufs, size)
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_array_equal(got["outu"], want["outu"])


SHORT = """enable subgroups;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(12)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x * 2u] = subgroupAdd(x[gid.x]);
  out[gid.x * 2u + 1u] = subgroupBroadcast(x[gid.x], 3u);
}
"""


def test_a_workgroup_that_is_not_whole_subgroups_reduces_over_its_short_last_one():
    x = np.random.default_rng(2).standard_normal(24).astype(np.float32)
    bufs = {"x": x, "out": np.full(48, np.nan, np.float32)}
    got = interp.run(parse(SHORT), bufs, {}, (2, 1, 1), subgroup_size=8)["out"].reshape(-1, 2)
    # Each workgroup is a subgroup of 8 and one of 4 (local invocations 8..11).
    for lo, hi in ((0, 8), (8, 12), (12, 20), (20, 24)):
        total = np.float32(0)
        for v in x[lo:hi]:
            total = np.float32(total + v)
        np.testing.assert_array_equal(got[lo:hi, 0], total)
        np.testing.assert_array_equal(got[lo:hi, 1], x[lo + 3])


def test_reading_an_inactive_lane_is_an_interpreter_error():
    bufs = {"x": np.ones(24, np.float32), "out": np.zeros(48, np.float32)}
    with pytest.raises(interp.InterpError, match="subgroupBroadcast.*not an active invocation"):
        interp.run(parse(SHORT.replace("3u);", "5u);")), bufs, {}, (2, 1, 1), subgroup_size=8)


_HEAD = (
    "enable subgroups;\n@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> fo: array<f32>;\n"
)


def _k(body: str) -> str:
    return (
        _HEAD
        + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, "
        + "@builtin(num_workgroups) nwg: vec3<u32>) {\n"
        + body
        + "\n  out[0u] = 1u;\n}\n"
    )


def test_the_builtins_are_taken_without_enable_subgroups_and_printed_with_it():
    text = _k("  out[gid.x] = subgroupAdd(gid.x);").replace("enable subgroups;\n", "")
    assert printed_back(text).startswith("enable subgroups;")


def test_elect_is_the_first_active_lane_of_each_subgroup():
    text = _k("  if gid.x % 64u >= 2u {\n    return;\n  }").replace(
        "  out[0u] = 1u;", "  out[gid.x] = select(5u, 7u, subgroupElect());"
    )
    # The early return is not uniform: WGSL refuses the call after it.
    with pytest.raises(FrontendError, match="uniform control flow"):
        parse(text)
    text = _k("").replace("  out[0u] = 1u;", "  out[gid.x] = select(5u, 7u, subgroupElect());")
    got = interp.run(parse(text), {"out": np.zeros(128, np.uint32), "fo": np.zeros(1, np.float32)},
                     {}, (2, 1, 1), subgroup_size=16)["out"]  # fmt: skip
    np.testing.assert_array_equal(got, np.where(np.arange(128) % 16 == 0, 7, 5))


def test_vector_operands_reduce_and_read_across_lane_by_lane():
    text = """enable subgroups;
@group(0) @binding(0) var<storage, read> x: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> o: array<vec2<f32>>;
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  o[gid.x * 3u] = subgroupAdd(x[gid.x]);
  o[gid.x * 3u + 1u] = subgroupExclusiveAdd(x[gid.x]);
  o[gid.x * 3u + 2u] = subgroupShuffle(x[gid.x], 3u) + subgroupBroadcast(x[gid.x], 1u);
}
"""
    x = np.random.default_rng(4).integers(-50, 50, 64).astype(np.float32)
    bufs = {"x": x, "o": np.full(192, np.nan, np.float32)}
    got = interp.run(parse(text), bufs, {}, (2, 1, 1), subgroup_size=8)["o"].reshape(4, 8, 3, 2)
    xv = x.reshape(4, 8, 2)  # small integers: every sum exact in any order
    np.testing.assert_array_equal(got[:, :, 0], np.broadcast_to(xv.sum(1, keepdims=True), xv.shape))
    np.testing.assert_array_equal(got[:, :, 1], np.cumsum(xv, axis=1) - xv)
    np.testing.assert_array_equal(got[:, :, 2], np.broadcast_to(xv[:, 3:4] + xv[:, 1:2], xv.shape))
