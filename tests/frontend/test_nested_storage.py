"""Nested arrays in storage memory: ``array<array<f32, 4>>`` (runtime-sized outer, fixed
inner), ``array<array<vec4<f32>, 2>>``, ``array<array<u32, 8>, 16>`` (a fixed-size binding),
fixed-size arrays of structs and struct members that are nested arrays, in WGSL's layout (the
inner array's stride roundUp(AlignOf(elem), SizeOf(elem)): ``array<vec3<f32>, 2>`` takes 32
bytes). Each element is held as words, as structs are (:mod:`kvdsl.interp.structs`): bounds
checked per level, races found per word, ``arrayLength`` counting outer elements. Each valid
text prints back to the same IR and runs on the interpreter and the GPU as numpy says; the
invalid texts and those outside the subset are conformance cases (``cases/nested_storage/``,
run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, UnsupportedError, parse
from tests.helpers.wgsl import assert_tint_takes
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.interp.buffers import word_path
from kvdsl.ir.types import Array, Struct, Vec, f32, size_of, stride, u32

NEST = """struct S {
  k: u32,
  m: array<array<vec3<f32>, 2>, 3>,
}

@group(0) @binding(0) var<storage, read> a: array<array<f32, 4>>;
@group(0) @binding(1) var<storage, read_write> v: array<array<vec4<f32>, 2>>;
@group(0) @binding(2) var<storage, read_write> g: array<array<u32, 8>, 16>;
@group(0) @binding(3) var<storage, read_write> s: array<S>;
@group(0) @binding(4) var<storage, read_write> r: array<array<vec3<f32>, 2>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let row = a[i];
  v[i][1] = vec4<f32>(row[0], row[1], row[2], row[3]);
  v[i][0].y = a[i][i % 4u] - f32(arrayLength(&a));
  if (i < 16u) {
    g[i][(i * 3u) % 8u] = arrayLength(&v) + i;
  }
  s[i].m[i % 3u][1].z = a[i][2];
  s[i].m[(i + 1u) % 3u][0] = vec3<f32>(a[i][0], a[i][1], a[i][3]);
  s[i].k = arrayLength(&s);
  r[i] = array<vec3<f32>, 2>(vec3<f32>(row[3], row[2], row[1]), vec3<f32>(row[0]));
}
"""

N = 128
S_WORDS = 28  # S: k at byte 0, m at 16 (vec3 alignment), 3 rows of 2 vec3 of stride 16: 112
POISON = 0xDEADBEEF


def _inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    a = rng.standard_normal((N, 4)).astype(np.float32)
    return {
        "a": a.reshape(-1),
        "v": np.full(N * 8, POISON, np.uint32).view(np.float32),
        "g": np.full(16 * 8, POISON, np.uint32),
        "s": np.full(N * S_WORDS, POISON, np.uint32),
        "r": np.full(N * 8, POISON, np.uint32).view(np.float32),
    }


def _nest_numpy(a: np.ndarray) -> dict[str, np.ndarray]:
    a = a.reshape(N, 4)
    lane = np.arange(N)
    v = np.full((N, 2, 4), POISON, np.uint32).view(np.float32)
    v[:, 1] = a
    v[:, 0, 1] = a[lane, lane % 4] - np.float32(N)
    g = np.full((16, 8), POISON, np.uint32)
    g[lane[:16], (lane[:16] * 3) % 8] = N + lane[:16]
    s = np.full((N, S_WORDS), POISON, np.uint32)
    s[:, 0] = N
    m = s[:, 4:].reshape(N, 3, 2, 4)  # word 4 on: m[row][col] a vec3 and a padding word
    m[lane, lane % 3, 1, 2] = a[:, 2].view(np.uint32)
    m[lane, (lane + 1) % 3, 0, :3] = a[:, [0, 1, 3]].view(np.uint32)
    r = np.full((N, 2, 4), POISON, np.uint32).view(np.float32)  # the padding words stay
    r[:, 0, :3] = a[:, [3, 2, 1]]
    r[:, 1, :3] = a[:, [0]]
    return {
        "v": v.reshape(-1),
        "g": g.reshape(-1),
        "s": s.reshape(-1),
        "r": r.reshape(-1),
    }


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for name, w in want.items():
        np.testing.assert_array_equal(got[name].view(np.uint32), w.view(np.uint32), name)


def test_nested_arrays_take_wgsl_layout():
    assert stride(Array(Vec(3, f32), 2)) == 32 and size_of(Array(Vec(3, f32), 2)) == 32
    assert stride(Array(Array(Vec(3, f32), 2), 3)) == 96
    assert stride(Array(f32, 4)) == 16 and stride(Array(Array(u32, 8), 16)) == 512
    k = parse(NEST, "nest.wgsl")
    assert {b.name: b.host_values for b in k.bindings} == {"a": 4, "v": 8, "g": 1, "s": 28, "r": 8}
    # A race names the word by WGSL's indices (a struct leaf: its word).
    assert word_path(Array(Array(Vec(3, f32), 2), 3), 22) == "[2][1].z"
    b = Struct("B", (("d", f32), ("qs", Array(u32, 3))))
    assert word_path(Array(Array(b, 2), 3), 13) == "[1][1] (word 1 of the struct)"


def test_nested_storage_arrays_run_as_numpy_says(gpu):
    bufs = _inputs(np.random.default_rng(11))
    want = _nest_numpy(bufs["a"])
    kern = parse(NEST, "nest.wgsl")
    _same(interp.run(kern, {n: x.copy() for n, x in bufs.items()}, {}, (2, 1, 1)), want)
    _same(runtime.run(kern, bufs, {}, (2, 1, 1)), want)


def test_nested_storage_kernels_print_back_to_the_same_ir():
    k = parse(NEST, "nest.wgsl")
    printed = emit(k)
    assert parse(printed, "nest.wgsl") == k and emit(parse(printed, "nest.wgsl")) == printed
    assert "var<storage, read> a: array<array<f32, 4>>;" in printed
    assert "var<storage, read_write> g: array<array<u32, 8>, 16>;" in printed
    assert "struct S {\n  k: u32,\n  m: array<array<vec3<f32>, 2>, 3>,\n}" in printed
    assert "s[i].m[i % 3u][1i].z = a[i][2i];" in printed


HEAD = """@group(0) @binding(0) var<storage, read_write> v: array<array<vec4<f32>, 2>>;
@group(0) @binding(1) var<storage, read_write> g: array<array<u32, 8>, 16>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
"""


def _run(body: str, rows: int = 64) -> dict[str, np.ndarray]:
    k = parse(HEAD + body + "\n}\n")
    bufs = {"v": np.zeros(rows * 8, np.float32), "g": np.zeros(16 * 8, np.uint32)}
    return interp.run(k, bufs, {}, (1, 1, 1))


def test_each_level_of_a_nested_access_is_reached():
    got = _run("  v[gid.x][gid.x % 2u].w = f32(gid.x);\n  g[gid.x % 16u][gid.x / 16u] = gid.x;")
    want = np.zeros((64, 2, 4), np.float32)
    want[np.arange(64), np.arange(64) % 2, 3] = np.arange(64)
    np.testing.assert_array_equal(got["v"], want.reshape(-1))
    np.testing.assert_array_equal(
        got["g"].reshape(16, 8)[:, :4], np.arange(64).reshape(4, 16).T.astype(np.uint32)
    )
    # Different words of one element: no race.
    _run(
        "  if (gid.x < 8u) {\n    g[3][gid.x] = gid.x;\n    v[1][gid.x / 4u][gid.x % 4u] = 1.0;\n  }"
    )


#: (body, rows of v, finding, its message): each level of a nested access is bounds checked,
#: and races are found per word.
FINDINGS = [
    ("  v[gid.x][gid.x % 3u].x = 1.0;", 64, OutOfBounds, r"v\[gid.x\]\[2\] is out of bounds \(length 2\)"),
    ("  g[gid.x % 16u][gid.x / 7u] = 1u;", 64, OutOfBounds, r"g\[\(gid.x % 16u\)\]\[8\] is out of bounds \(length 8\)"),
    ("  v[gid.x][0].x = 1.0;", 63, OutOfBounds, r"v\[63\] is out of bounds \(length 63\)"),
    ("  g[gid.x / 2u][gid.x % 2u] = 1u;", 64, OutOfBounds, r"g\[16\] is out of bounds \(length 16\)"),
    ("  g[3][3] = gid.x;", 64, RaceError, r"g\[3\]\[3\]: invocation"),
    ("  v[1][1].y = f32(gid.x);", 64, RaceError, r"v\[1\]\[1\].y: invocation"),
]  # fmt: skip


@pytest.mark.parametrize("body, rows, finding, message", FINDINGS)
def test_the_interpreter_finds_it(body, rows, finding, message):
    with pytest.raises(finding, match=message):
        _run(body, rows)


def test_kvdsl_run_both_backends_agree_on_a_nested_kernel(gpu, tmp_path):
    from tests.helpers.paths import ROOT

    path = tmp_path / "nest.wgsl"
    path.write_text(NEST)
    bufs = _inputs(np.random.default_rng(3))
    np.savez(tmp_path / "in.npz", **bufs)
    args = ["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--workgroups", "2,1,1"]
    args += ["--backend", "both", "--out", str(tmp_path / "out.npz")]
    out = subprocess.run(
        [sys.executable, "-m", "kvdsl", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for name, n in (("v", "float32[1024]"), ("g", "uint32[128]"), ("s", "uint32[3584]")):
        assert f"{name}: {n}, GPU == interpreter" in out.stdout, out.stdout
    want = _nest_numpy(bufs["a"])
    with np.load(tmp_path / "out.npz") as res:
        _same({n: res[n] for n in want}, want)
        _same({n: res["interp." + n] for n in want}, want)


STRUCTS = """struct B {
  d: f32,
  qs: array<u32, 3>,
  p: array<array<i32, 2>, 2>,
}

@group(0) @binding(0) var<storage, read> src: array<array<B, 2>>;
@group(0) @binding(1) var<storage, read_write> dst: array<B, 4>;
@group(0) @binding(2) var<storage, read_write> tbl: array<array<B, 2>, 3>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i < 4u) {
    dst[i] = src[i][1];
    dst[i].d = src[i][0].d + f32(arrayLength(&src));
  }
  if (i < 6u) {
    tbl[i / 2u][i % 2u].qs[i % 3u] = src[i][0].qs[2] ^ u32(src[i][1].p[1][0]);
    tbl[i / 2u][i % 2u].p[i % 2u][1] = src[i][0].p[0][1] * 3i;
  }
}
"""


def test_fixed_size_and_nested_arrays_of_structs_run_as_numpy_says(gpu):
    # B: d at word 0, qs at 1 to 3, p at 4 to 7 (p[r][c] at 4 + 2r + c): 8 words, no padding.
    rng = np.random.default_rng(6)
    src = rng.integers(1, 2**32, (8, 2, 8), dtype=np.uint64).astype(np.uint32)
    src[:, :, 0] = rng.standard_normal((8, 2)).astype(np.float32).view(np.uint32)
    src[:, :, 4:] = rng.integers(-1000, 1000, (8, 2, 4)).astype(np.int32).view(np.uint32)
    k = parse(STRUCTS, "structs.wgsl")
    assert parse(emit(k), "structs.wgsl") == k
    assert "var<storage, read_write> tbl: array<array<B, 2>, 3>;" in emit(k)
    bufs = {
        "src": src.reshape(-1),
        "dst": np.full(4 * 8, POISON, np.uint32),
        "tbl": np.full(3 * 2 * 8, POISON, np.uint32),
    }
    dst = src[:4, 1].copy()
    dst[:, 0] = (src[:4, 0, 0].view(np.float32) + np.float32(8)).view(np.uint32)
    tbl = np.full((3, 2, 8), POISON, np.uint32)
    for i in range(6):
        tbl[i // 2, i % 2, 1 + i % 3] = src[i, 0, 3] ^ src[i, 1, 6]
        tbl[i // 2, i % 2, 4 + 2 * (i % 2) + 1] = (src[i, 0, 5].view(np.int32) * 3).view(np.uint32)
    want = {"dst": dst.reshape(-1), "tbl": tbl.reshape(-1)}
    _same(interp.run(k, {n: x.copy() for n, x in bufs.items()}, {}, (1, 1, 1)), want)
    _same(runtime.run(k, bufs, {}, (1, 1, 1)), want)


def test_tint_takes_the_kernels():
    assert_tint_takes({"nest": NEST, "structs": STRUCTS})


MAIN = "@compute @workgroup_size(1)\nfn main() {{\n  {body}\n}}\n"


@pytest.mark.parametrize(
    "decl, column",
    [
        ("@group(0) @binding(1) var<storage, read> a: array<array<f32>>;", 45),
        ("var<workgroup> w: array<array<f32>, 4>;", 19),
    ],
)
def test_a_runtime_sized_inner_array_is_refused_where_it_stands(decl, column):
    text = f"@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n{decl}\n"
    text += MAIN.format(body="o[0] = 1.0;")
    with pytest.raises(FrontendError) as info:
        parse(text, "k.wgsl")
    assert not isinstance(info.value, UnsupportedError), str(info.value)
    assert str(info.value) == (
        f"k.wgsl:2:{column}: array of array<f32>: an array element type cannot contain a "
        "runtime-sized array"
    )


FLAT = """@group(0) @binding(0) var<storage, read> a: array<vec3<f32>, 4>;
@group(0) @binding(1) var<storage, read_write> o: array<f32, 12>;
@compute @workgroup_size(12)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  o[lid.x] = a[lid.x / 3u][lid.x % 3u] * 2.0;
}
"""


def test_a_fixed_size_binding_of_scalars_or_vec3_takes_wgsl_layout(gpu):
    a = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)  # vec3 stride 16
    k = parse(FLAT, "flat.wgsl")
    assert [b.host_values for b in k.bindings] == [1, 1] and parse(emit(k), "flat.wgsl") == k
    bufs = {"a": a.reshape(-1), "o": np.full(12, np.nan, np.float32)}
    want = (a[:, :3] * 2).reshape(-1)
    np.testing.assert_array_equal(interp.run(k, dict(bufs), {}, (1, 1, 1))["o"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (1, 1, 1))["o"], want)
