"""Atomics through pointers: ``let p = &counts[i]; atomicAdd(p, 1u);``, helpers taking
``ptr<storage, atomic<u32>, read_write>`` and ``ptr<workgroup, atomic<u32>>``. The kernel parses,
prints back to the same IR (the pointer value printed as given, ``atomicAdd(p, v)``) and runs in
the interpreter as numpy says; on the GPU (naga takes no storage or workgroup pointer parameter)
the same atomics through ``let`` pointers do. Its other texts, valid and invalid, are
conformance cases (``cases/atomic_pointers/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.frontend import parse
from tests.helpers.backends import backend_run
from tests.helpers.wgsl import assert_buffers, assert_tint_takes, printed_back

N = 128

HEAD = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> o: array<u32>;
var<workgroup> local: array<atomic<u32>, 8>;
var<workgroup> total: atomic<u32>;
"""

HELPERS = """
fn bump(p: ptr<storage, atomic<u32>, read_write>, v: u32) -> u32 {
  return atomicAdd(p, v);
}

fn bump_local(p: ptr<workgroup, atomic<u32>>) {
  atomicAdd(p, 1u);
}
"""

MAIN = """
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  // Zeroed here: wgpu-native may leave a workgroup's atomics as an earlier workgroup left
  // them (docs/deviations.md).
  if lid.x < 8u {
    atomicStore(&local[lid.x], 0u);
  }
  if lid.x == 0u {
    atomicStore(&total, 0u);
  }
  workgroupBarrier();
  let v = a[gid.x];
  let p = &counts[v % 8u];
  atomicAdd(p, 1u);
  bump(&counts[8u + v % 4u], v);
  bump_local(&local[v % 8u]);
  bump_local(&total);
  workgroupBarrier();
  let q = &local[lid.x % 8u];
  o[gid.x] = atomicLoad(q) + atomicLoad(&total) * 1000u + atomicMax(&counts[12], v) * 0u;
}
"""

KERNEL = HEAD + HELPERS + MAIN
# naga (wgpu 0.32) takes no storage or workgroup pointer parameter: the calls inlined.
INLINE = HEAD + MAIN.replace(
    "bump(&counts[8u + v % 4u], v);", "atomicAdd(&counts[8u + v % 4u], v);"
)
INLINE = INLINE.replace(
    "bump_local(&local[v % 8u]);", "let r = &local[v % 8u];\n  atomicAdd(r, 1u);"
)
INLINE = INLINE.replace("bump_local(&total);", "atomicAdd(&total, 1u);")


def numpy_kernel(bufs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a = bufs["a"].astype(np.int64)
    c = bufs["counts"].astype(np.int64).copy()
    np.add.at(c, a % 8, 1)
    np.add.at(c, 8 + a % 4, a)
    c[12] = max(c[12], a.max())
    o = np.empty(N, np.int64)
    for g in range(N // 64):
        local = np.bincount(a[g * 64 : g * 64 + 64] % 8, minlength=8)
        o[g * 64 : g * 64 + 64] = local[np.arange(64) % 8] + 64 * 1000
    return {"counts": (c % 2**32).astype(np.uint32), "o": o.astype(np.uint32)}


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(37)
    return {
        "a": rng.integers(0, 100_000, N).astype(np.uint32),
        "counts": rng.integers(0, 1000, 13).astype(np.uint32),
        "o": np.full(N, 0xDEADBEEF, np.uint32),
    }


def test_atomics_through_pointers_print_back_to_the_same_ir():
    for text in (KERNEL, INLINE):
        assert "atomicAdd(p, 1u)" in printed_back(text)


@pytest.mark.parametrize(
    "backend, text",
    [("interp", KERNEL), ("interp", INLINE), ("gpu", INLINE)],
    ids=["interp-helpers", "interp-inline", "gpu-inline"],
)
def test_atomics_through_pointers_are_what_numpy_says(backend, text, request):
    bufs = _inputs()
    run = backend_run(backend, request)
    assert_buffers(run(parse(text), bufs, {}, (N // 64, 1, 1)), numpy_kernel(bufs))


def test_tint_takes_the_kernels():
    assert_tint_takes({"kernel": KERNEL, "inline": INLINE})
