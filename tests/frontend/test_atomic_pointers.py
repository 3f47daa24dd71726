"""Atomics through pointers: ``let p = &counts[i]; atomicAdd(p, 1u);``, helpers taking
``ptr<storage, atomic<u32>, read_write>`` and ``ptr<workgroup, atomic<u32>>``. The kernel parses,
prints back to the same IR (the pointer value printed as given, ``atomicAdd(p, v)``) and runs in
the interpreter as numpy says; on the GPU (naga takes no storage or workgroup pointer parameter)
the same atomics through ``let`` pointers do; invalid texts are refused as Tint refuses them."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from tests.helpers.wgsl import assert_refused

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
        k = parse(text)
        assert "atomicAdd(p, 1u)" in emit(k)
        assert parse(emit(k)) == k


@pytest.mark.parametrize("text", [KERNEL, INLINE], ids=["helpers", "inline"])
def test_atomics_through_pointers_in_the_interpreter_are_what_numpy_says(text):
    bufs = _inputs()
    got = interp.run(parse(text), bufs, {}, (N // 64, 1, 1))
    want = numpy_kernel(bufs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_atomics_through_pointers_on_the_gpu_are_what_numpy_says(gpu):
    bufs = _inputs()
    got = runtime.run(parse(INLINE), bufs, {}, (N // 64, 1, 1))
    want = numpy_kernel(bufs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def _k(helper: str, body: str) -> str:
    return (
        HEAD
        + helper
        + (
            "\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
            + body
            + "\n  o[gid.x] = atomicLoad(&counts[0]) + atomicLoad(&local[0]) + atomicLoad(&total);\n}\n"
        )
    )


#: Invalid WGSL: kvdsl's refusal (a part of its message); Tint refuses each too.
REFUSED = {
    "not_an_atomic": (
        _k("", "  let p = &o[0];\n  atomicAdd(p, 1u);"),
        "atomicAdd(p): the pointer is not to an atomic<u32> or atomic<i32>",
    ),
    "read_only_atomic_pointer": (
        _k("fn f(p: ptr<storage, atomic<u32>, read>) -> u32 {\n  return atomicLoad(p);\n}\n", ""),
        "an atomic lives in read_write storage or workgroup memory",
    ),
    "function_atomic_pointer": (
        _k("fn f(p: ptr<function, atomic<u32>>) -> u32 {\n  return atomicLoad(p);\n}\n", ""),
        "an atomic lives in read_write storage or workgroup memory",
    ),
    "atomic_read_plainly": (
        _k("", "  let p = &counts[1];\n  let x = *p;"),
        "cannot bind a value of type atomic<u32>",
    ),
    "wrong_value_type": (
        _k("", "  let p = &counts[1];\n  atomicAdd(p, 1i);"),
        "atomicAdd of an atomic<u32> takes u32 values, got i32",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_kvdsl_refuses_what_tint_refuses(name):
    text, message = REFUSED[name]
    assert_refused(text, f"{name}.wgsl", message)


def test_tint_refuses_each_refused_text_and_takes_the_kernels():
    from kvdsl.runtime import tint_check

    checked = tint_check({n: t for n, (t, _) in REFUSED.items()} | {"k": KERNEL, "i": INLINE})
    assert checked.pop("k") is None and checked.pop("i") is None
    assert {n for n, e in checked.items() if e is None} == set()
