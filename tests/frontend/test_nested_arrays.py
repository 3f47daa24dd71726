"""Nested fixed-size arrays in function memory (``array<array<u32, 4>, 3>``): indexed per
invocation at both levels, assigned element by element and whole rows through a pointer, passed
to a helper by pointer, built by a nested constructor; and in workgroup memory (elements, lanes,
rows, pointers to rows, races and bounds found per element); on the interpreter and the GPU
against a numpy statement of each kernel."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir.portability import BOOL_WORKGROUP, hazards
from tests.helpers.wgsl import assert_tint_takes

TEXT = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;

fn transpose_into(src: ptr<function, array<array<u32, 4>, 3>>, dst: ptr<function, array<array<u32, 3>, 4>>) {
  for (var r = 0u; r < 3u; r++) {
    for (var c = 0u; c < 4u; c++) {
      dst[c][r] = src[r][c];
    }
  }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let x = a[i];
  var m: array<array<u32, 4>, 3>;
  for (var r = 0u; r < 3u; r++) {
    for (var c = 0u; c < 4u; c++) {
      m[r][c] = x * (r + 1u) + c;
    }
  }
  let k = x % 3u;
  let j = (x >> 4u) % 4u;
  m[k][j] = 7u;
  let row = &m[(k + 1u) % 3u];
  (*row)[j] += 100u;
  var t = array<array<u32, 3>, 4>();
  transpose_into(&m, &t);
  let whole = m[k];
  o[2u * i] = t[j][k] + whole[3];
  o[2u * i + 1u] = t[(j + 1u) % 4u][(k + 1u) % 3u] + array<array<u32, 2>, 2>(array<u32, 2>(1u, 2u), array<u32, 2>(3u, x))[1][1];
}
"""


def nested_numpy(a: np.ndarray) -> np.ndarray:
    out = np.zeros(2 * len(a), np.uint64)
    w = 2**32
    for lane, xv in enumerate(a.tolist()):
        m = [[(xv * (r + 1) + c) % w for c in range(4)] for r in range(3)]
        k, j = xv % 3, (xv >> 4) % 4
        m[k][j] = 7
        m[(k + 1) % 3][j] = (m[(k + 1) % 3][j] + 100) % w
        t = [[m[r][c] for r in range(3)] for c in range(4)]
        out[2 * lane] = (t[j][k] + m[k][3]) % w
        out[2 * lane + 1] = (t[(j + 1) % 4][(k + 1) % 3] + xv) % w
    return out.astype(np.uint32)


def test_nested_arrays_run_as_numpy_says(gpu):
    k = parse(TEXT)
    a = np.random.default_rng(2).integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    bufs = {"a": a, "o": np.full(256, 0xDEADBEEF, np.uint32)}
    want = nested_numpy(a)
    np.testing.assert_array_equal(interp.run(k, bufs, {}, (2, 1, 1))["o"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (2, 1, 1))["o"], want)


def test_nested_arrays_print_back_and_tint_takes_them():
    from kvdsl.runtime import tint_check

    k = parse(TEXT)
    assert parse(emit(k)) == k
    assert "var m: array<array<u32, 4>, 3>;" in emit(k)
    assert tint_check({"nested": TEXT}) == {"nested": None}


WORKGROUP = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;

var<workgroup> grid: array<array<u32, 8>, 16>;
var<workgroup> vg: array<array<vec2<u32>, 4>, 2>;

@compute @workgroup_size(8, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let flat = lid.y * 8u + lid.x;
  let x = a[wid.x * 128u + flat];
  grid[lid.y][lid.x] = x;
  if (flat < 8u) {
    vg[flat / 4u][flat % 4u][0] = x;
  }
  if (flat >= 8u && flat < 16u) {
    let r = &vg[(flat - 8u) / 4u];
    (*r)[(flat - 8u) % 4u][1] = flat * 3u;
  }
  workgroupBarrier();
  let row = grid[15u - lid.y];
  let p = &grid[lid.x];
  o[wid.x * 128u + flat] = row[7u - lid.x] + (*p)[lid.y % 8u] + vg[lid.y % 2u][lid.x % 4u].x;
}
"""


def workgroup_numpy(a: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a), np.uint64)
    for g in range(len(a) // 128):
        x = a[g * 128 : (g + 1) * 128].astype(np.uint64)
        grid, vgx = x.reshape(16, 8), x[:8].reshape(2, 4)
        for ly in range(16):
            for lx in range(8):
                v = grid[15 - ly][7 - lx] + grid[lx][ly % 8] + vgx[ly % 2][lx % 4]
                out[g * 128 + ly * 8 + lx] = v % 2**32
    return out.astype(np.uint32)


def test_nested_workgroup_arrays_run_as_numpy_says(gpu):
    """Elements, a vector element's lane, a row taken whole, and pointers to rows."""
    k = parse(WORKGROUP)
    assert parse(emit(k)) == k
    a = np.random.default_rng(4).integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    bufs = {"a": a, "o": np.full(256, 0xDEADBEEF, np.uint32)}
    want = workgroup_numpy(a)
    got = interp.run(k, bufs, {}, (2, 1, 1), strict_init=True)["o"]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (2, 1, 1))["o"], want)


def test_races_and_bounds_in_a_nested_workgroup_array_are_found():
    racy = WORKGROUP.replace(
        "vg[flat / 4u][flat % 4u][0] = x;", "vg[flat / 4u][flat % 4u] = vec2<u32>(x, flat);"
    )
    bufs = {"a": np.arange(256, dtype=np.uint32), "o": np.zeros(256, np.uint32)}
    with pytest.raises(RaceError, match=r"vg\[0\]\[0\]\[1\] \(workgroup memory\)"):
        interp.run(parse(racy), bufs, {}, (2, 1, 1))
    past = WORKGROUP.replace("grid[lid.y][lid.x] = x;", "grid[lid.y][lid.x + lid.y] = x;")
    with pytest.raises(OutOfBounds, match=r"grid\[\]\[8\] is out of bounds \(length 8\)"):
        interp.run(parse(past), bufs, {}, (2, 1, 1))


DEEP = """enable f16;
struct P {
  a: f32,
  h: f16,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> t: array<array<array<P, 2>, 3>, 64>;
var<workgroup> s: array<array<array<vec2<u32>, 2>, 3>, 64>;
var<workgroup> q: array<array<array<array<f16, 2>, 2>, 2>, 64>;
var<workgroup> flags: array<array<array<bool, 2>, 2>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let v = x[gid.x];
  t[lid.x][2][1].a = v;
  t[lid.x][1][0] = P(v * 2.0, f16(v));
  s[lid.x][2][1] = vec2<u32>(gid.x, 7u);
  s[lid.x][0][1].y = gid.x * 3u;
  q[lid.x][1][0][1] = f16(-v);
  flags[lid.x][1][1] = v > 0.0;
  flags[lid.x][0][1] = false;
  workgroupBarrier();
  let j = (lid.x + 1u) % 64u;
  let row = t[j][1];
  let sv = s[j][2];
  out[gid.x] = t[j][2][1].a * row[0].a + f32(row[0].h) + f32(sv[1].x + s[j][0][1].y)
    + f32(q[j][1][0][1]) + select(0.0, 0.5, flags[j][1][1] && !flags[j][0][1]);
}
"""


def test_three_levels_of_workgroup_arrays_run_as_numpy_says(gpu, deviations):
    """Arrays three and four levels deep in workgroup memory, of structs, vectors, f16 and bool,
    held as words (halves where they hold an f16). `kvdsl check` notes the read of the bools,
    which NVIDIA's driver under wgpu-native reads as false where another invocation stored
    true (docs/deviations.md): there the GPU's rows differ by that 0.5 alone, and xfail."""
    k = parse(DEEP)
    assert [why for _, why in hazards(k)] == [BOOL_WORKGROUP]
    assert parse(emit(k)) == k
    assert_tint_takes({"deep": DEEP})
    rng = np.random.default_rng(5)
    x = (rng.uniform(0.5, 2.0, 128) * rng.choice([-1, 1], 128)).astype(np.float32)
    g = np.arange(128)
    j = g - g % 64 + (g % 64 + 1) % 64
    h = x[j].astype(np.float16).astype(np.float32)
    ints = (j + j * 3).astype(np.float32)
    want = x[j] * (x[j] * np.float32(2)) + h + ints - h + np.where(x[j] > 0, 0.5, 0.0)
    bufs = {"x": x, "out": np.full(128, np.nan, np.float32)}
    got = interp.run(k, bufs, {}, (2, 1, 1))["out"]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    racy = DEEP.replace("  workgroupBarrier();\n", "")
    with pytest.raises(RaceError, match=r"^t\[\d+\]\[1\]\[0\] \(half 0 of the struct\)"):
        interp.run(parse(racy), bufs, {}, (2, 1, 1))
    racy = DEEP.replace("s[lid.x][2][1] = ", "s[0][2][1] = ")
    with pytest.raises(RaceError, match=r"^s\[0\]\[2\]\[1\]\.x \(workgroup memory\)"):
        interp.run(parse(racy), bufs, {}, (2, 1, 1))
    got = runtime.run(k, bufs, {}, (2, 1, 1))["out"]
    if "bool in workgroup memory" in deviations:
        flagged = np.where(x[j] > 0, 0.5, 0.0)
        off = ~np.isclose(got, want, rtol=1e-6)
        if off.any():  # every row off is a true flag read as false, and no other
            np.testing.assert_allclose(got, want - flagged, rtol=1e-6)
            pytest.xfail(f"{int(off.sum())} of 128 rows: {deviations['bool in workgroup memory']}")
    np.testing.assert_allclose(got, want, rtol=1e-6)
