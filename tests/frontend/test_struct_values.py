"""Struct values at function scope: ``S(a, b)`` and ``S()``, ``let`` and ``var`` of a struct
type, member assignment (under a non-uniform condition too), structs passed to and returned
from helpers, and whole struct values stored to a storage array of structs. The kernel parses,
prints back to the same IR and runs in the interpreter and on the GPU as numpy says; the
invalid texts are conformance cases (``cases/struct_values/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from tests.helpers.wgsl import assert_tint_takes

N = 128

KERNEL = """struct Acc {
  sum: f32,
  n: u32,
  lo: vec2<f32>,
  tags: array<u32, 3>,
}

struct Out {
  total: f32,
  count: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> outs: array<Out>;

fn add(a: Acc, v: f32) -> Acc {
  var b = a;
  b.sum += v;
  b.n += 1u;
  b.lo = min(b.lo, vec2<f32>(v, -v));
  return b;
}

fn finish(a: Acc) -> Out {
  if (a.n == 0u) {
    return Out();
  }
  return Out(a.sum + a.lo.x - a.lo.y, a.n * 10u + a.tags[1]);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  var acc: Acc;
  acc.lo = vec2<f32>(100.0, 100.0);
  acc.tags[1] = i % 7u;
  for (var k = 0u; k < 4u; k++) {
    let v = x[(i * 4u + k) % 128u];
    if (v > 0.0) {
      acc = add(acc, v);
    }
  }
  let zero = Acc();
  if (i % 16u == 3u) {
    acc = zero;
  }
  outs[i] = finish(acc);
}
"""


def numpy_kernel(x: np.ndarray) -> np.ndarray:
    """What KERNEL leaves in ``outs``: (total as f32 bits, count) per invocation."""
    out = np.full((N, 2), 0, np.uint32)
    for i in range(N):
        s, n = np.float32(0), 0
        lo = np.array([100, 100], np.float32)
        for k in range(4):
            v = x[(i * 4 + k) % 128]
            if v > 0:
                s, n = np.float32(s + v), n + 1
                lo = np.minimum(lo, np.array([v, -v], np.float32))
        tag = i % 7
        if i % 16 == 3:
            s, n, lo, tag = np.float32(0), 0, np.zeros(2, np.float32), 0
        if n == 0:
            continue
        total = np.float32(np.float32(s + lo[0]) - lo[1])
        out[i] = (total.view(np.uint32), n * 10 + tag)
    return out.reshape(-1)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(36)
    x = rng.standard_normal(N).astype(np.float32)
    x[:4] = -1.0  # invocation 0 adds nothing: Out()
    return {"x": x, "outs": np.full(2 * N, 0xDEADBEEF, np.uint32)}


def test_struct_values_print_back_to_the_same_ir():
    k = parse(KERNEL)
    text = emit(k)
    assert "struct Acc {" in text and "var acc: Acc;" in text and "Out()" in text
    assert parse(text) == k


def test_struct_values_in_the_interpreter_are_what_numpy_says():
    bufs = _inputs()
    want = numpy_kernel(bufs["x"])
    assert (want.reshape(N, 2)[:, 1] == 0).sum() >= 2  # zero values among real ones
    got = interp.run(parse(KERNEL), bufs, {}, (N // 64, 1, 1))
    np.testing.assert_array_equal(got["outs"], want)


def test_struct_values_on_the_gpu_are_what_numpy_says(gpu):
    bufs = _inputs()
    got = runtime.run(parse(KERNEL), bufs, {}, (N // 64, 1, 1))
    np.testing.assert_array_equal(got["outs"], numpy_kernel(bufs["x"]))


def test_tint_takes_the_kernel():
    assert_tint_takes({"kernel": KERNEL})
