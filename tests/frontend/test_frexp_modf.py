"""``frexp`` and ``modf`` of f32 scalars and vectors: their result structs bound by ``let`` and
read by field (``.fract`` ``.exp``, ``.fract`` ``.whole``), on the interpreter and the GPU against
numpy's ``frexp`` and WGSL's definition of ``modf`` (``e - trunc(e)``, ``trunc(e)``), bit for
bit. What WGSL refuses of them is conformance cases (``cases/frexp_modf/``, run by
``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np

from kvdsl import interp, runtime
from kvdsl.frontend import parse
from tests.helpers.wgsl import assert_tint_takes, printed_back

TEXT = """@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> fr: array<f32>;
@group(0) @binding(3) var<storage, read_write> ex: array<i32>;
@group(0) @binding(4) var<storage, read_write> mv: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> ev: array<vec4<i32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= arrayLength(&a)) {
    return;
  }
  let r = frexp(a[i]);
  let m = modf(a[i]);
  fr[3u * i] = r.fract;
  fr[3u * i + 1u] = m.fract;
  fr[3u * i + 2u] = m.whole + modf(1.5).whole + frexp(6.0).fract;
  ex[i] = r.exp;
  let v = b[i];
  let rv = frexp(v);
  mv[3u * i] = rv.fract;
  mv[3u * i + 1u] = modf(v).fract;
  mv[3u * i + 2u] = modf(v).whole;
  ev[i] = rv.exp;
}
"""


def _inputs(n: int = 200) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    # Normal magnitudes from 1e-30 to 1e30, both signs; zeros of both signs, halves, integers.
    a = (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-30, 30, n)).astype(np.float32)
    a[:8] = [0.0, -0.0, 1.0, -1.5, 0.5, 2.0, -7.0, 3.0e38]
    b = (rng.standard_normal((n, 4)) * 10.0 ** rng.integers(-3, 4, (n, 1))).astype(np.float32)
    b[0] = [-0.0, 0.75, -2.5, 1024.0]
    return {
        "a": a,
        "b": b,
        "fr": np.full(3 * n, np.nan, np.float32),
        "ex": np.full(n, -7777, np.int32),
        "mv": np.full((3 * n, 4), np.nan, np.float32),
        "ev": np.full((n, 4), -7777, np.int32),
    }


def _numpy(bufs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, b = bufs["a"], bufs["b"]
    fract, exp = np.frexp(a)
    whole = np.trunc(a)
    part = a - whole  # WGSL's fract: e - trunc(e), +0.0 for a whole e (C's modf keeps the sign)
    fr = np.stack([fract, part, whole + np.float32(1.0) + np.float32(0.75)], axis=1).reshape(-1)
    vfract, vexp = np.frexp(b)
    vwhole = np.trunc(b)
    vpart = b - vwhole
    mv = np.stack([vfract, vpart, vwhole], axis=1).reshape(-1, 4)
    return {"fr": fr, "ex": exp.astype(np.int32), "mv": mv, "ev": vexp.astype(np.int32)}


def _bits(x: np.ndarray) -> np.ndarray:
    """The values' bits, every zero as +0.0: WGSL lets an implementation ignore a zero's sign
    (llvmpipe gives ``modf(-7.0).fract`` as -0.0, where ``e - trunc(e)`` is +0.0)."""
    x = np.ascontiguousarray(x)
    if x.dtype.kind == "f":
        x = np.where(x == 0, np.zeros_like(x), x)
    return x.view(np.uint32)


def test_frexp_and_modf_run_as_numpy_says(gpu):
    k = parse(TEXT)
    bufs = _inputs()
    want = _numpy(bufs)
    wg = (-(-len(bufs["a"]) // 64), 1, 1)
    for got in (interp.run(k, bufs, {}, wg), runtime.run(k, bufs, {}, wg)):
        for name, w in want.items():
            np.testing.assert_array_equal(_bits(got[name]), _bits(w), err_msg=name)


def test_frexp_and_modf_print_back_to_the_same_ir():
    printed = printed_back(TEXT)
    assert "let r = frexp(a[i]);" in printed and "modf(1.5f).whole" in printed


def test_tint_takes_the_kernel():
    assert_tint_takes({"kernel": TEXT})
