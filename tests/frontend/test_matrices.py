"""Matrices as values: ``matCxR<f32>`` and ``matCxR<f16>`` built from columns, from scalars, as
zero values and by the inferred ``matCxR(...)`` form, read by column and element (a non-uniform
index too), assigned through a ``var``, passed to and returned from helpers, and combined by
``+``, ``-``, the products (by a scalar, by a vector on either side, by a matrix), ``transpose``
and ``determinant``. Each kernel parses, prints back to the same IR, and runs in the interpreter
and on the GPU as numpy says (numpy's matrix is the WGSL matrix's columns side by side); the
conformance cases of ``cases/matrices/`` hold the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from tests.helpers.wgsl import assert_tint_takes
from tests.helpers.backends import assert_as_numpy

N = 128
OUT = 17  # vec4 results per invocation

KERNEL = """{enable}
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<{T}>>;

fn rotation(a: {T}) -> mat2x2<{T}> {{
  return mat2x2<{T}>(cos(a), sin(a), -sin(a), cos(a));
}}

fn twice(m: mat4x3<{T}>) -> mat4x3<{T}> {{
  var r = m;
  r *= 2.0;
  return r;
}}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let i = gid.x;
  let c0 = vec4<{T}>(x[4u * i]);
  let c1 = vec4<{T}>(x[4u * i + 1u]);
  let c2 = vec4<{T}>(x[4u * i + 2u]);
  let c3 = vec4<{T}>(x[4u * i + 3u]);
  let a = mat4x4<{T}>(c0, c1, c2, c3);
  let b = mat4x3<{T}>(c0.xyz, c1.yzw, c2.zwx, c3.wxy);
  let c = mat2x4<{T}>(c3, c1);
  var d: mat3x2<{T}>;
  d[0] = c0.xy;
  d[1][1] = c2.w;
  d[2] = vec2<{T}>(c1.z, 3.0);
  let e = mat3x3(c0.x, c0.y, c0.z, c1.x, c1.y, c1.z, c2.x, c2.y, c2.w);
  let ba = b * a;
  let cd = c * d;
  let tt = transpose(c) * mat3x4<{T}>(c0, c2, c3);
  let sums = b + twice(b) - ba;
  let scaled = 2.0 * e - e * c3.x;
  let o = 17u * i;
  out[o] = a * c1;
  out[o + 1u] = vec4<{T}>(b * c2, determinant(a));
  out[o + 2u] = vec4<{T}>(c2.xyz * b);
  out[o + 3u] = vec4<{T}>(ba[0], ba[3][i % 3u]);
  out[o + 4u] = vec4<{T}>(ba[1], ba[i % 4u][2]);
  out[o + 5u] = vec4<{T}>(cd[0]);
  out[o + 6u] = vec4<{T}>(cd[1] + cd[2]);
  out[o + 7u] = vec4<{T}>(tt[0], tt[1]);
  out[o + 8u] = vec4<{T}>(tt[2], determinant(e), determinant(mat2x2<{T}>(c0.xy, c1.zw)));
  out[o + 9u] = vec4<{T}>(sums[0], sums[1].x);
  out[o + 10u] = vec4<{T}>(sums[2], sums[3].z);
  out[o + 11u] = vec4<{T}>(scaled[0], scaled[1].y);
  out[o + 12u] = vec4<{T}>(scaled[2], d[1][0]);
  out[o + 13u] = vec4<{T}>(rotation(c0.w) * c1.xy, (mat2x2<{T}>() + mat2x2f(1.0, 2.0, 3.0, 4.0))[1]);
  out[o + 14u] = vec4<{T}>(d[0], d[2]);
  out[o + 15u] = vec4<{T}>((b * a * a)[2], 0.5);
  out[o + 16u] = transpose(b) * c1.xyz;
}}
"""


def kernel(t: str) -> str:
    text = KERNEL.format(T=t, enable="enable f16;" if t == "f16" else "")
    if t == "f32":
        text = text.replace("vec4<f32>(x[", "(x[")
    else:  # the one f32 matrix constructed beside the f16 ones
        text = text.replace("mat2x2f(1.0, 2.0, 3.0, 4.0)", "mat2x2h(1.0, 2.0, 3.0, 4.0)")
    return text


def numpy_kernel(x: np.ndarray) -> np.ndarray:
    """What KERNEL leaves in ``out``, in float64: each WGSL matrix is numpy's ``R x C`` matrix
    whose columns are the WGSL matrix's."""
    out = np.zeros((N, OUT, 4))
    cols = x.astype(np.float64).reshape(N, 4, 4)
    for i in range(N):
        c0, c1, c2, c3 = cols[i]
        a = np.stack([c0, c1, c2, c3], axis=1)
        b = np.stack([c0[:3], c1[1:], c2[[2, 3, 0]], c3[[3, 0, 1]]], axis=1)
        c = np.stack([c3, c1], axis=1)
        d = np.stack([c0[:2], [0.0, c2[3]], [c1[2], 3.0]], axis=1)
        e = np.stack([c0[:3], c1[:3], c2[[0, 1, 3]]], axis=1)
        ba, cd, tt = b @ a, c @ d, c.T @ np.stack([c0, c2, c3], axis=1)
        sums = b + 2 * b - ba
        scaled = 2 * e - e * c3[0]
        rot = np.array([[np.cos(c0[3]), -np.sin(c0[3])], [np.sin(c0[3]), np.cos(c0[3])]])
        bmat = np.stack([c0[:2], c1[2:]], axis=1)
        out[i] = [
            a @ c1,
            [*(b @ c2), np.linalg.det(a)],
            c2[:3] @ b,
            [*ba[:, 0], ba[i % 3, 3]],
            [*ba[:, 1], ba[2, i % 4]],
            cd[:, 0],
            cd[:, 1] + cd[:, 2],
            [*tt[:, 0], *tt[:, 1]],
            [*tt[:, 2], np.linalg.det(e), np.linalg.det(bmat)],
            [*sums[:, 0], sums[0, 1]],
            [*sums[:, 2], sums[2, 3]],
            [*scaled[:, 0], scaled[1, 1]],
            [*scaled[:, 2], d[0, 1]],
            [*(rot @ c1[:2]), 3.0, 4.0],
            [*d[:, 0], *d[:, 2]],
            [*(b @ a @ a)[:, 2], 0.5],
            b.T @ c1[:3],
        ]
    return out.reshape(N * OUT, 4)


def _inputs(t: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(44)
    x = rng.uniform(0.5, 1.5, (4 * N, 4)) * rng.choice([-1.0, 1.0], (4 * N, 4))
    dtype = np.float16 if t == "f16" else np.float32
    return {"x": x.astype(np.float32), "out": np.full((N * OUT, 4), np.nan, dtype)}


# Relative to 1 + |value| (products of up to 12 terms near 1): f32 agrees to a few ULP's worth,
# f16 rounds every step to 11 bits.
TOL = {"f32": 4e-6, "f16": 1.5e-2}


def _close(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    err = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
    assert np.all(
        err <= tol
    ), f"worst {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_matrices_print_back_to_the_same_ir(t):
    k = parse(kernel(t))
    text = emit(k)
    assert f"mat4x3<{t}>" in text and "transpose(" in text and "determinant(" in text
    assert parse(text) == k


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_matrices_in_the_interpreter_are_what_numpy_says(t):
    bufs = _inputs(t)
    got = interp.run(parse(kernel(t)), bufs, {}, (N // 64, 1, 1))
    _close(got["out"], numpy_kernel(bufs["x"]), TOL[t])


def test_f16_matrices_round_each_step_to_f16():
    """The f16 kernel's interpreter results are f16 arithmetic, not f32 rounded at the end."""
    h = interp.run(parse(kernel("f16")), _inputs("f16"), {}, (N // 64, 1, 1))["out"]
    f = interp.run(parse(kernel("f32")), _inputs("f32"), {}, (N // 64, 1, 1))["out"]
    assert h.dtype == np.float16
    assert not np.array_equal(h, f.astype(np.float16))


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_matrices_on_the_gpu_are_what_numpy_says(t, gpu):
    bufs = _inputs(t)
    k = parse(kernel(t))
    got = runtime.run(k, bufs, {}, (N // 64, 1, 1))
    _close(got["out"], numpy_kernel(bufs["x"]), TOL[t])
    mine = interp.run(k, _inputs(t), {}, (N // 64, 1, 1))["out"]
    _close(got["out"], mine.astype(np.float64), TOL[t])


def test_tint_takes_the_kernels():
    assert_tint_takes({"f32": kernel("f32"), "f16": kernel("f16")})


POINTERS = """@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;

fn scale(p: ptr<function, mat2x2<f32>>, k: f32) {
  *p = *p * k;
  (*p)[1][0] += 1.0;
  p[0].y -= 0.5;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let v = x[i];
  var m = mat2x2<f32>(v.xy, v.zw);
  scale(&m, v.x);
  let q = &m;
  (*q)[i % 2u][(i / 2u) % 2u] = 7.0;
  m[(i / 4u) % 2u] *= 2.0;
  out[i] = vec4<f32>(m[0], (*q)[1]);
}
"""


def test_a_matrix_through_pointers_and_non_uniform_indices_is_what_numpy_says(gpu):
    """``ptr<function, mat2x2<f32>>`` parameters and ``let`` pointers, and a column and an
    element assigned at indices that differ per invocation: bit for bit (no sums)."""
    x = _inputs("f32")["x"][:N]
    want = np.empty((N, 4), np.float32)
    for i in range(N):
        m = np.array([x[i, :2], x[i, 2:]], np.float32) * x[i, 0]  # [column, row]
        m[1, 0] += np.float32(1.0)
        m[0, 1] -= np.float32(0.5)
        m[i % 2, (i // 2) % 2] = 7.0
        m[(i // 4) % 2] *= np.float32(2.0)
        want[i] = m.ravel()
    k = parse(POINTERS)
    assert parse(emit(k)) == k
    for run in (interp.run, runtime.run):
        bufs = {"x": x, "out": np.full((N, 4), np.nan, np.float32)}
        assert_as_numpy(run(k, bufs, {}, (N // 64, 1, 1))["out"], want, run)
    assert_tint_takes({"pointers": POINTERS})
