"""Pointers and zero-value constructors as WGSL has them: ``ptr<function|private|workgroup|storage,
T[, access]>`` parameters and ``let``s, ``&x``, ``*p``, ``(*p)[i]``, ``(*p).x`` and ``p[i]``
through a pointer, assignments through one; ``array<T, N>()``, ``vecN<T>()``, ``T()``. Each
text parses, prints back to the same IR and runs on the interpreter as a numpy statement of
it says (and on the GPU where naga compiles it); smaller valid texts and the invalid ones are
conformance cases (``cases/pointers/``, run by ``test_wgsl_cases.py``).

naga (this wgpu) has no ``unrestricted_pointer_parameters``: it refuses workgroup and storage
pointer parameters, and aborts the process on a function pointer to an array's element passed
to a helper (``f(&a[1])``). Those texts are checked by Tint and the interpreter only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir import Dispatch, u32
from kvdsl.ir import tree as ir
from tests.helpers.wgsl import kernel, printed_back

HEAD = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
struct P { n: u32 }
@group(0) @binding(2) var<uniform> params: P;
var<workgroup> tile: array<u32, 64>;
"""

MAIN = """@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid.x;
  let live = i < params.n;
  let x = a[min(i, params.n - 1u)];
"""

#: Function-space pointer parameters (a scalar, a whole array, a vector), pointer lets into
#: a var's element, workgroup memory and a storage binding, composite access through a pointer,
#: a compound assignment through one, and the zero-value constructors. naga compiles it.
LOCAL = (
    HEAD
    + """
fn bump(p: ptr<function, u32>, by: u32) {
  *p += by;
}

fn fill(row: ptr<function, array<u32, 4>>, seed: u32) {
  for (var k = 0u; k < 4u; k++) {
    row[k] = seed * (k + 1u);
  }
}

fn swap_ends(row: ptr<function, array<u32, 4>>) {
  let first = &(*row)[0];
  let last = &row[3];
  let t = *first;
  *first = *last;
  *last = t;
}

fn total(v: ptr<function, vec4<u32>>) -> u32 {
  (*v).y = (*v).y ^ 0xffu;
  return (*v).x + (*v).y + v.z + v.w;
}

"""
    + MAIN
    + """  var acc = x;
  bump(&acc, 7u);
  var row = array<u32, 4>();
  fill(&row, x);
  swap_ends(&row);
  var v = vec4<u32>(x, x >> 8u, x >> 16u, x >> 24u);
  let t = total(&v);
  let zero = vec2<u32>();
  let slot = &tile[lid.x];
  *slot = acc + row[0] + row[1] + t + zero.y + u32();
  workgroupBarrier();
  let other = &tile[63u - lid.x];
  if (live) {
    let out = &o[i];
    *out = *other + v.y;
  }
}
"""
)


def local_numpy(a: np.ndarray, lanes: int) -> np.ndarray:
    n = len(a)
    x = a[np.minimum(np.arange(lanes), n - 1)].astype(np.uint64)
    m = 2**32
    acc = (x + 7) % m
    row0, row1 = (4 * x) % m, (2 * x) % m  # filled x, 2x, 3x, 4x; the ends swapped
    vy = (x >> 8) ^ 0xFF
    t = (x + vy + (x >> 16) + (x >> 24)) % m
    tile = ((acc + row0 + row1 + t) % m).reshape(-1, 64)
    out = (tile[:, ::-1].reshape(-1) + vy) % m
    return out[:n].astype(np.uint32)


#: Workgroup and storage pointer parameters, a function pointer to an array's element passed
#: to a helper, a whole workgroup array loaded through a pointer (Tint takes them all; naga
#: refuses or aborts on them).
UNRESTRICTED = (
    HEAD
    + """
fn load_one(p: ptr<storage, u32, read>) -> u32 {
  return *p;
}

fn put(dst: ptr<storage, array<u32>, read_write>, i: u32, v: u32) {
  (*dst)[i] = v;
}

fn share(w: ptr<workgroup, array<u32, 64>>, i: u32, v: u32) {
  w[i] = v;
}

fn twice(p: ptr<function, u32>) {
  *p = *p * 2u;
}

fn sum_of(w: ptr<workgroup, array<u32, 64>>) -> u32 {
  let copy = *w;
  var s = 0u;
  for (var k = 0u; k < 64u; k++) {
    s += copy[k];
  }
  return s;
}

"""
    + MAIN.replace(
        "let x = a[min(i, params.n - 1u)];", "let x = load_one(&a[min(i, params.n - 1u)]);"
    )
    + """  var arr = array<u32, 4>(x, x + 1u, x + 2u, x + 3u);
  twice(&arr[2]);
  share(&tile, lid.x, arr[2] + arr[3]);
  workgroupBarrier();
  let s = sum_of(&tile);
  if (live) {
    put(&o, i, tile[63u - lid.x] + s);
  }
}
"""
)


def unrestricted_numpy(a: np.ndarray, lanes: int) -> np.ndarray:
    n = len(a)
    x = a[np.minimum(np.arange(lanes), n - 1)].astype(np.uint64)
    tile = ((2 * (x + 2) + x + 3) % 2**32).reshape(-1, 64)
    s = tile.sum(axis=1, keepdims=True) % 2**32
    out = ((tile[:, ::-1] + s) % 2**32).reshape(-1)
    return out[:n].astype(np.uint32)


def _kernel(text: str, n: int) -> ir.Kernel:
    return dataclasses.replace(parse(text), dispatch=Dispatch(ir.Lit(n, u32), 64, 65535))


def _inputs(n: int = 300) -> np.ndarray:
    return np.random.default_rng(11).integers(1, 2**32, n, dtype=np.uint64).astype(np.uint32)


def test_function_pointers_and_zero_values_run_as_numpy_says(gpu):
    a = _inputs()
    k = _kernel(LOCAL, len(a))
    bufs = {"a": a, "o": np.full(len(a), 0xDEADBEEF, np.uint32)}
    want = local_numpy(a, 320)
    np.testing.assert_array_equal(interp.run(k, bufs, {"n": len(a)})["o"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {"n": len(a)})["o"], want)


def test_workgroup_and_storage_pointer_parameters_run_as_numpy_says():
    a = _inputs()
    k = _kernel(UNRESTRICTED, len(a))
    bufs = {"a": a, "o": np.full(len(a), 0xDEADBEEF, np.uint32)}
    got = interp.run(k, bufs, {"n": len(a)}, strict_init=True)["o"]
    np.testing.assert_array_equal(got, unrestricted_numpy(a, 320))


def test_pointer_kernels_print_back_to_the_same_ir():
    printed, _ = printed_back(LOCAL), printed_back(UNRESTRICTED)
    assert "fn fill(row: ptr<function, array<u32, 4>>, seed: u32) {" in printed
    assert "(*row)[k] = seed * (k + 1u);" in printed  # row[k] through the pointer
    assert "let last = &(*row)[3i];" in printed and "*p += by;" in printed
    assert "(*v).y = (*v).y ^ 255u;" in printed and "array<u32, 4>()" in printed
    assert "let zero = vec2<u32>();" in printed
    printed = emit(parse(UNRESTRICTED))
    assert "fn put(dst: ptr<storage, array<u32>, read_write>, i: u32, v: u32) {" in printed
    assert "fn load_one(p: ptr<storage, u32, read>) -> u32 {" in printed


def test_writes_through_pointers_are_race_and_bounds_checked():
    one = kernel("  let p = &out[0u];\n  *p = gid.x;")
    with pytest.raises(RaceError, match=r"out\[0\]"):
        interp.run(parse(one), {"out": np.zeros(64, np.uint32)}, {}, (1, 1, 1))
    past = kernel("  let p = &out[gid.x + 60u];\n  *p = 1u;")
    with pytest.raises(OutOfBounds, match=r"out\[64\] is out of bounds"):
        interp.run(parse(past), {"out": np.zeros(64, np.uint32)}, {}, (1, 1, 1))


def test_a_pointer_keeps_the_element_it_was_taken_of():
    text = (
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  var arr = array<u32, 4>(1u, 2u, 3u, 4u);\n  var j = gid.x % 2u + 1u;\n"
        "  let p = &arr[j];\n  j = 3u;\n  *p = 9u;\n"
        "  out[gid.x] = arr[1] * 100u + arr[2] * 10u + arr[3];\n}\n"
    )
    got = interp.run(parse(text), {"out": np.zeros(64, np.uint32)}, {}, (1, 1, 1))["out"]
    want = np.where(np.arange(64) % 2 == 0, 934, 294).astype(np.uint32)
    np.testing.assert_array_equal(got, want)


def test_check_notes_what_naga_does_with_pointer_arguments():
    from kvdsl.ir.portability import ELEMENT_POINTER_ARGUMENT, POINTER_PARAMETER, hazards

    assert hazards(parse(LOCAL)) == []
    notes = [(type(s).__name__, why) for s, why in hazards(parse(UNRESTRICTED))]
    assert ("CallStmt", ELEMENT_POINTER_ARGUMENT) in notes  # twice(&arr[2]);
    assert ("Let", POINTER_PARAMETER) in notes  # let x = load_one(&a[...]);
    assert notes.count(("CallStmt", POINTER_PARAMETER)) == 2  # share(...); put(...);


def test_the_cli_keeps_naga_away_from_what_aborts_it(tmp_path):
    import subprocess
    import sys

    from tests.helpers.paths import ROOT

    path = tmp_path / "unrestricted.wgsl"
    path.write_text(UNRESTRICTED)
    a = _inputs(100)
    np.savez(tmp_path / "in.npz", a=a, o=np.full(100, 0xDEADBEEF, np.uint32))

    def kvdsl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kvdsl", *args], cwd=ROOT, capture_output=True, text=True
        )

    run = ["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--params", '{"n": 100}']
    run += ["--workgroups", "2,1,1", "--out", str(tmp_path / "out.npz")]
    refused = kvdsl(*run, "--backend", "both")
    assert refused.returncode == 2 and "not run on the GPU" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    ran = kvdsl(*run, "--backend", "interp")
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["o"], unrestricted_numpy(a, 128))
    check = kvdsl("check", str(path))
    assert check.returncode == 0, check.stdout
    assert "note: not compiled by naga" in check.stdout and "1 passed" in check.stdout
