"""``reflect``, ``refract`` and ``faceForward`` on f32 vectors of 2, 3 and 4 components: the
kernel parses, prints back to the same IR, and runs in the interpreter and on the GPU to WGSL's
formulas, evaluated here in float64 element by element:

- ``reflect(e1, e2) = e1 - 2 * dot(e2, e1) * e2``;
- ``refract(e1, e2, e3)``: ``k = 1 - e3 * e3 * (1 - dot(e2, e1)^2)``; the zero vector where
  ``k < 0``, else ``e3 * e1 - (e3 * dot(e2, e1) + sqrt(k)) * e2``;
- ``faceForward(e1, e2, e3)``: ``e1`` where ``dot(e2, e3) < 0``, else ``-e1``.

WGSL inherits their accuracy from those formulas in f32, and a GPU may contract a product and
a sum into one fma (NVIDIA's and llvmpipe's compilers do): values are compared within 2e-5
absolute plus 2e-5 relative (inputs of magnitude at most about 2: a few f32 ulps of the
largest term). The inputs keep ``k`` and ``dot(e2, e3)`` at least 1e-2 from zero, where a
rounding would flip the branch. What WGSL refuses of them is conformance cases
(``cases/geometric_builtins/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from tests.helpers.wgsl import assert_tint_takes

N = 128
TOL = dict(rtol=2e-5, atol=2e-5)

KERNEL = """@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> n: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> eta: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let x = a[i];
  let m = n[i];
  out[3u * i] = reflect(x, m);
  out[3u * i + 1u] = vec4<f32>(refract(x.xyz, m.xyz, eta[i]), 1.0);
  out[3u * i + 2u] = vec4<f32>(faceForward(x.xy, m.xy, m.zw), refract(x.zw, m.zw, 0.5));
}
"""


def _dot(u: np.ndarray, v: np.ndarray) -> float:
    return float(sum(float(p) * float(q) for p, q in zip(u, v)))


def _reflect(e1: np.ndarray, e2: np.ndarray) -> list[float]:
    d = _dot(e2, e1)
    return [float(p) - 2.0 * d * float(q) for p, q in zip(e1, e2)]


def _refract_k(e1: np.ndarray, e2: np.ndarray, e3: float) -> float:
    d = _dot(e2, e1)
    return 1.0 - e3 * e3 * (1.0 - d * d)


def _refract(e1: np.ndarray, e2: np.ndarray, e3: float) -> list[float]:
    k = _refract_k(e1, e2, e3)
    if k < 0:
        return [0.0] * len(e1)
    d = _dot(e2, e1)
    return [e3 * float(p) - (e3 * d + k**0.5) * float(q) for p, q in zip(e1, e2)]


def _face_forward(e1: np.ndarray, e2: np.ndarray, e3: np.ndarray) -> list[float]:
    s = 1.0 if _dot(e2, e3) < 0 else -1.0
    return [s * float(p) for p in e1]


def numpy_kernel(a: np.ndarray, n: np.ndarray, eta: np.ndarray) -> np.ndarray:
    out = np.empty((3 * N, 4), np.float64)
    for i in range(N):
        x, m, e = a[i], n[i], float(eta[i])
        out[3 * i] = _reflect(x, m)
        out[3 * i + 1] = _refract(x[:3], m[:3], e) + [1.0]
        out[3 * i + 2] = _face_forward(x[:2], m[:2], m[2:]) + _refract(x[2:], m[2:], 0.5)
    return out


def _unit(rng: np.random.Generator, k: int) -> np.ndarray:
    v = rng.standard_normal(k)
    return v / np.linalg.norm(v)


def _inputs() -> dict[str, np.ndarray]:
    """Unit vectors for refract's first two arguments (k spans both signs), kept 1e-2 away
    from the branches' edges."""
    rng = np.random.default_rng(38)
    a = np.empty((N, 4), np.float32)
    n = np.empty((N, 4), np.float32)
    eta = np.empty(N, np.float32)
    for i in range(N):
        while True:
            x = np.r_[_unit(rng, 3), rng.uniform(-1.5, 1.5)].astype(np.float32)
            m = np.r_[_unit(rng, 3), rng.uniform(-1.5, 1.5)].astype(np.float32)
            e = np.float32(rng.uniform(0.5, 1.8))
            edges = (
                _refract_k(x[:3], m[:3], float(e)),
                _refract_k(x[2:], m[2:], 0.5),
                _dot(m[:2], m[2:]),
            )
            if min(abs(v) for v in edges) > 1e-2:
                break
        a[i], n[i], eta[i] = x, m, e
    return {"a": a, "n": n, "eta": eta, "out": np.full((3 * N, 4), np.nan, np.float32)}


def test_geometric_builtins_print_back_to_the_same_ir():
    k = parse(KERNEL)
    text = emit(k)
    assert "refract(x.xyz, m.xyz, eta[i])" in text and "faceForward(x.xy, m.xy, m.zw)" in text
    assert parse(text) == k


def test_both_branches_are_taken():
    bufs = _inputs()
    want = numpy_kernel(bufs["a"], bufs["n"], bufs["eta"])
    total = (want[1::3, :3] == 0).all(axis=1)  # refract's zero vector
    assert 10 < total.sum() < N - 10
    flips = want[2::3, 0] == bufs["a"][:, 0]  # faceForward keeping e1
    assert 10 < flips.sum() < N - 10


def test_geometric_builtins_in_the_interpreter_are_the_formulas():
    bufs = _inputs()
    got = interp.run(parse(KERNEL), bufs, {}, (N // 64, 1, 1))["out"].reshape(3 * N, 4)
    np.testing.assert_allclose(got, numpy_kernel(bufs["a"], bufs["n"], bufs["eta"]), **TOL)


def test_geometric_builtins_on_the_gpu_are_the_formulas(gpu):
    bufs = _inputs()
    got = runtime.run(parse(KERNEL), bufs, {}, (N // 64, 1, 1))["out"].reshape(3 * N, 4)
    np.testing.assert_allclose(got, numpy_kernel(bufs["a"], bufs["n"], bufs["eta"]), **TOL)


def test_tint_takes_the_kernel():
    assert_tint_takes({"kernel": KERNEL})
