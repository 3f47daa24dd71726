"""Structs in storage and workgroup memory: ``array<BlockQ8>`` bindings, workgroup arrays of
structs, member reads and writes down to array elements and vector components, WGSL's host
layout (member offsets rounded up to each member's alignment, the stride the struct's size
rounded up to its alignment), and ``arrayLength`` of an array of structs. Each valid text
parses, prints back to the same IR and runs on the interpreter (and the GPU) as numpy says;
the invalid texts and those outside the subset are conformance cases (``cases/structs/``, run
by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes
from kvdsl.interp import OutOfBounds, RaceError
from kvdsl.ir.types import (
    Array,
    Struct,
    Vec,
    f16,
    f32,
    field_offsets,
    i32,
    size_of,
    stride,
    u32,
)
from tests.helpers.backends import assert_as_numpy, backend_run

ITEMS = """struct Pair {
  a: f32,
  b: u32,
}

struct Item {
  w: vec3<f32>,
  k: i32,
  tag: array<u32, 3>,
}

@group(0) @binding(0) var<storage, read> items: array<Item>;
@group(0) @binding(1) var<storage, read_write> outs: array<Item>;

var<workgroup> tile: array<Pair, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid.x;
  let it = items[i].w;
  tile[lid.x].a = it.x + it.y - it.z;  // no product: NVIDIA would fuse it into an fma
  tile[lid.x].b = items[i].tag[i % 3u] ^ u32(items[i].k);
  workgroupBarrier();
  let j = 63u - lid.x;
  outs[i].w = vec3<f32>(tile[j].a, items[i].w.zy);
  outs[i].k = items[i].k * 2i;
  outs[i].tag[0] = tile[j].b;
  outs[i].tag[1u] = items[i].tag[2];
  outs[i].tag[2] = arrayLength(&items);
}
"""

N = 128
WORDS = 8  # Item: w at byte 0 (12 bytes), k at 12, tag at 16 (12 bytes), stride 32


def _items(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    w = rng.standard_normal((N, 3)).astype(np.float32)
    k = rng.integers(-1000, 1000, N).astype(np.int32)
    tag = rng.integers(1, 2**32, (N, 3), dtype=np.uint64).astype(np.uint32)
    words = np.full((N, WORDS), 0x5A5A5A5A, np.uint32)  # the padding word holds garbage
    words[:, 0:3], words[:, 3], words[:, 4:7] = w.view(np.uint32), k.view(np.uint32), tag
    return words.reshape(-1), w, k, tag


def _items_numpy(w: np.ndarray, k: np.ndarray, tag: np.ndarray) -> np.ndarray:
    lane = np.arange(N)
    a = w[:, 0] + w[:, 1] - w[:, 2]
    b = tag[lane, lane % 3] ^ k.view(np.uint32)
    j = lane // 64 * 64 + 63 - lane % 64  # the mirrored invocation of the same workgroup
    out = np.full((N, WORDS), 0xDEADBEEF, np.uint32)  # the padding word is never written
    out[:, 0], out[:, 1], out[:, 2] = (
        a[j].view(np.uint32),
        w[:, 2].view(np.uint32),
        w[:, 1].view(np.uint32),
    )
    out[:, 3] = (k * 2).view(np.uint32)
    out[:, 4], out[:, 5], out[:, 6] = b[j], tag[:, 2], N
    return out.reshape(-1)


def test_wgsl_layout_rounds_offsets_and_strides_up_to_alignment():
    item = Struct("Item", (("w", Vec(3, f32)), ("k", i32), ("tag", Array(u32, 3))))
    assert field_offsets(item) == (0, 12, 16) and size_of(item) == 32 and stride(item) == 32
    pair = Struct("P", (("a", f32), ("v", Vec(4, f32)), ("b", u32)))
    assert field_offsets(pair) == (0, 16, 32) and size_of(pair) == 48 and stride(pair) == 48
    block = Struct("BlockQ8", (("d", f32), ("qs", Array(u32, 8))))
    assert field_offsets(block) == (0, 4) and stride(block) == 36
    nested = Struct("N", (("x", u32), ("m", Array(Vec(3, f32), 2))))
    assert field_offsets(nested) == (0, 16) and stride(nested) == 48


def test_structs_in_storage_and_workgroup_memory_run_as_numpy_says(gpu):
    words, w, k, tag = _items(np.random.default_rng(5))
    kern = parse(ITEMS, "items.wgsl")
    bufs = {"items": words, "outs": np.full(N * WORDS, 0xDEADBEEF, np.uint32)}
    want = _items_numpy(w, k, tag)
    np.testing.assert_array_equal(interp.run(kern, bufs, {}, (2, 1, 1))["outs"], want)
    np.testing.assert_array_equal(runtime.run(kern, bufs, {}, (2, 1, 1))["outs"], want)


def test_struct_kernels_print_back_to_the_same_ir():
    k = parse(ITEMS, "items.wgsl")
    printed = emit(k)
    assert parse(printed, "items.wgsl") == k and emit(parse(printed, "items.wgsl")) == printed
    assert "struct Item {\n  w: vec3<f32>,\n  k: i32,\n  tag: array<u32, 3>,\n}" in printed
    assert "var<storage, read> items: array<Item>;" in printed
    assert "var<workgroup> tile: array<Pair, 64>;" in printed
    assert "outs[i].tag[1u] = items[i].tag[2i];" in printed


HEAD = """struct B {
  d: f32,
  qs: array<u32, 8>,
}
@group(0) @binding(0) var<storage, read_write> out: array<B>;
var<workgroup> tile: array<B, 4>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
"""


def _run(body: str, blocks: int = 64) -> np.ndarray:
    k = parse(HEAD + body + "\n}\n")
    return interp.run(k, {"out": np.zeros(blocks * 9, np.uint32)}, {}, (1, 1, 1))["out"]


def test_each_level_of_a_struct_access_is_reached():
    got = _run("  out[gid.x].qs[gid.x % 8u] = gid.x;\n  out[gid.x].d = f32(gid.x);")
    want = np.zeros((64, 9), np.uint32)
    want[:, 0] = np.arange(64, dtype=np.float32).view(np.uint32)
    want[np.arange(64), 1 + np.arange(64) % 8] = np.arange(64)
    np.testing.assert_array_equal(got, want.reshape(-1))
    # Different members, or different elements of one member, of one struct: no race.
    _run(
        "  if (gid.x < 8u) {\n    tile[0].qs[gid.x] = gid.x;\n  }\n"
        "  if (gid.x == 9u) {\n    tile[0].d = 1.0;\n  }\n  out[gid.x].d = tile[1].d;"
    )


#: (body, blocks of out, finding, its message): each level of a struct access is bounds checked,
#: and races are found per word (the last a read of a word another wrote, no barrier).
FINDINGS = [
    ("  out[gid.x].qs[gid.x % 9u] = 1u;", 64, OutOfBounds, r"out\[gid.x\].qs\[8\] is out of bounds \(length 8\)"),
    ("  out[gid.x].d = 1.0;", 63, OutOfBounds, r"out\[63\] is out of bounds \(length 63\)"),
    ("  tile[gid.x / 16u + 1u].d = 1.0;", 64, OutOfBounds, r"tile\[4\] is out of bounds \(length 4\)"),
    ("  tile[2].qs[2] = gid.x;", 64, RaceError, r"tile\[2\] \(word 3 of the struct\)"),
    ("  out[1].d = f32(gid.x);", 64, RaceError, r"out\[1\] \(word 0 of the struct\)"),
    ("  if (gid.x == 0u) {\n    tile[1].d = 2.0;\n  }\n  out[gid.x].d = tile[1].d;", 64, RaceError, "tile"),
]  # fmt: skip


@pytest.mark.parametrize("body, blocks, finding, message", FINDINGS)
def test_the_interpreter_finds_it(body, blocks, finding, message):
    with pytest.raises(finding, match=message):
        _run(body, blocks)


ROWS = """struct Rows {
  n: u32,
  scale: f32,
  data: array<vec4<f32>>,
}

@group(0) @binding(0) var<storage, read> rows: Rows;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= min(rows.n, arrayLength(&rows.data))) {
    return;
  }
  out[i] = rows.data[i].y * rows.scale + rows.data[i][3] + f32(arrayLength(&rows.data));
}
"""


def test_a_struct_binding_ending_in_a_runtime_array_runs_as_numpy_says(gpu):
    rng = np.random.default_rng(8)
    data = rng.standard_normal((100, 4)).astype(np.float32)  # data at byte 16 (vec4 alignment)
    head = np.array([90, np.float32(1.5).view(np.uint32), 0x5A5A5A5A, 0x5A5A5A5A], np.uint32)
    words = np.concatenate([head, data.reshape(-1).view(np.uint32)])
    k = parse(ROWS, "rows.wgsl")
    assert parse(emit(k), "rows.wgsl") == k
    assert "var<storage, read> rows: Rows;" in emit(k) and "arrayLength(&rows.data)" in emit(k)
    bufs = {"rows": words, "out": np.full(128, np.nan, np.float32)}
    want = np.full(128, np.nan, np.float32)
    want[:90] = data[:90, 1] * np.float32(1.5) + data[:90, 3] + np.float32(100)
    np.testing.assert_array_equal(interp.run(k, bufs, {}, (2, 1, 1))["out"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (2, 1, 1))["out"], want)
    past = ROWS.replace("min(rows.n, arrayLength(&rows.data))", "rows.n")
    with pytest.raises(OutOfBounds, match=r"rows.data\[100\] is out of bounds \(length 100\)"):
        bufs["rows"] = words.copy()
        bufs["rows"][0] = 128
        interp.run(parse(past), bufs, {}, (2, 1, 1))


COPY = """struct B {
  d: f32,
  qs: array<u32, 8>,
  v: vec2<i32>,
}
@group(0) @binding(0) var<storage, read> src: array<B>;
@group(0) @binding(1) var<storage, read_write> out: array<B>;
var<workgroup> tile: array<B, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let b = src[gid.x];
  tile[lid.x] = b;
  workgroupBarrier();
  out[gid.x] = tile[63u - lid.x];
  out[gid.x].d = b.d * 2.0 + f32(b.v.y) + f32(b.qs[gid.x % 8u] & 7u);
}
"""


def test_whole_structs_are_loaded_bound_and_stored_member_by_member(gpu):
    rng = np.random.default_rng(4)
    src = rng.integers(1, 2**32, (128, 12), dtype=np.uint64).astype(np.uint32)  # stride 48
    src[:, 0] = rng.standard_normal(128).astype(np.float32).view(np.uint32)
    src[:, 10:12] = rng.integers(-50, 50, (128, 2)).astype(np.int32).view(np.uint32)
    k = parse(COPY, "copy.wgsl")
    assert parse(emit(k), "copy.wgsl") == k
    bufs = {"src": src.reshape(-1), "out": np.full(128 * 12, 0xDEADBEEF, np.uint32)}
    lane = np.arange(128)
    want = src[lane // 64 * 64 + 63 - lane % 64].copy()
    want[:, 9] = 0xDEADBEEF  # the padding word before v (align 8) is no member: never written
    d = src[:, 0].view(np.float32) * 2 + src[:, 11].view(np.int32).astype(np.float32)
    want[:, 0] = (d + (src[lane, 1 + lane % 8] & 7).astype(np.float32)).view(np.uint32)
    want = want.reshape(-1)
    np.testing.assert_array_equal(interp.run(k, bufs, {}, (2, 1, 1))["out"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (2, 1, 1))["out"], want)


def test_tint_takes_the_kernels():
    assert_tint_takes({"items": ITEMS, "rows": ROWS, "copy": COPY})


# ---- f16 members ---------------------------------------------------------------------------

HALVES = """enable f16;

struct Inner {
  h: f16,
  k: u32,
}

struct S {
  a: f16,
  b: vec2<f16>,
  c: f32,
  d: vec3<f16>,
  e: f16,
  n: Inner,
  t: array<f16, 3>,
}

struct H {
  h: f16,
}

struct Params {
  n: u32,
  s: f16,
  v: vec3<f16>,
  w: vec2<f16>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<S>;
@group(0) @binding(2) var<storage, read_write> out: array<S>;
@group(0) @binding(3) var<storage, read_write> halves: array<H>;
var<workgroup> tile: array<S, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let i = gid.x;
  tile[lid.x] = src[i];
  tile[lid.x].d.y = src[i].a * params.s;
  workgroupBarrier();
  var s = tile[(lid.x + 1u) % 64u];
  s.b = s.b.yx + params.w;
  s.c = s.c + f32(s.e) + f32(params.n);
  s.n.k = s.n.k ^ i;
  s.t[2] = s.t[0] + params.v.z;
  out[i] = s;
  out[i].a = src[i].n.h;
  halves[i].h = src[i].t[1] * 2.0h;
}
"""

#: S's halves: a, b, c (two halves), d, e, n.h, n.k (two), t; the rest is padding.
A, B, C, D, E, NH, NK, T = 0, [2, 3], [4, 5], [8, 9, 10], 11, 12, [14, 15], [16, 17, 18]
PAD = [1, 6, 7, 13, 19]
HALF_POISON = np.uint16(0xFFFF)  # an f16 NaN


def test_f16_members_take_wgsl_host_layout():
    k = parse(HALVES)
    s = k.binding("src").elem
    inner = s.field("n")
    assert field_offsets(inner) == (0, 4) and size_of(inner) == 8
    assert field_offsets(s) == (0, 4, 8, 16, 22, 24, 32) and size_of(s) == stride(s) == 40
    h = k.binding("halves").elem
    assert size_of(h) == stride(h) == 2  # f16 aligns to 2: two per word
    assert (k.binding("src").host, k.binding("src").host_values) == (f16, 20)
    assert parse(emit(k)) == k


def _half_inputs() -> tuple[dict, dict]:
    rng = np.random.default_rng(44)
    src = (rng.uniform(0.5, 2.0, (N, 20)) * rng.choice([-1.0, 1.0], (N, 20))).astype(np.float16)
    words = src.view(np.uint16)
    words[:, C] = rng.uniform(1.0, 9.0, N).astype(np.float32).view(np.uint16).reshape(N, 2)
    words[:, NK] = rng.integers(1, 2**32, N, dtype=np.uint32).view(np.uint16).reshape(N, 2)
    words[:, PAD] = 0x7E01  # padding: never read
    params = {"n": 7, "s": 0.75, "v": [1.5, -0.5, 0.25], "w": [-2.0, 3.0]}
    bufs = {
        "src": src,
        "out": np.full((N, 20), HALF_POISON, np.uint16).view(np.float16),
        "halves": np.full(N, HALF_POISON, np.uint16).view(np.float16),
    }
    return bufs, params


def numpy_halves(bufs: dict, params: dict) -> dict:
    """What HALVES leaves in ``out`` and ``halves``, as 16-bit halves (padding poisoned)."""
    src = bufs["src"].view(np.uint16)
    h = src.view(np.float16)
    i = np.arange(N)
    j = i // 64 * 64 + (i + 1) % 64
    half = np.float16
    out = np.full((N, 20), HALF_POISON, np.uint16)
    f = out.view(np.float16)
    f[:, A] = h[:, NH]
    f[:, B] = h[j][:, [B[1], B[0]]] + np.asarray(params["w"], half)
    c = src[j][:, C].copy().view(np.float32)[:, 0]
    c = (c + h[j, E].astype(np.float32)) + np.float32(params["n"])
    out[:, C] = c.view(np.uint16).reshape(N, 2)
    f[:, D] = h[j][:, D]
    f[:, D[1]] = h[j, A] * half(params["s"])
    f[:, E], f[:, NH] = h[j, E], h[j, NH]
    k = src[j][:, NK].copy().view(np.uint32)[:, 0] ^ i.astype(np.uint32)
    out[:, NK] = k.view(np.uint16).reshape(N, 2)
    f[:, T] = h[j][:, T]
    f[:, T[2]] = h[j, T[0]] + half(params["v"][2])
    return {"out": out, "halves": (h[:, T[1]] * half(2.0)).view(np.uint16)}


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_f16_members_in_storage_workgroup_and_uniform_run_as_numpy_says(backend, request):
    run = backend_run(backend, request)
    bufs, params = _half_inputs()
    got = run(parse(HALVES), bufs, params, (N // 64, 1, 1))
    want = numpy_halves(bufs, params)
    for name, w in want.items():
        g = np.asarray(got[name]).view(np.uint16).reshape(w.shape)
        assert np.array_equal(g, w), f"{name}: {np.argwhere(g != w)[:4].tolist()}"


def test_two_invocations_writing_the_halves_of_one_word_do_not_race():
    # halves[i].h for i = 2k, 2k + 1 share a word; an f16 is its own memory location in WGSL
    bufs, params = _half_inputs()
    got = interp.run(parse(HALVES), bufs, params, (N // 64, 1, 1))
    assert not np.isnan(got["halves"]).any()
    racy = HALVES.replace("halves[i].h = ", "halves[i / 2u].h = ")
    with pytest.raises(RaceError, match=r"halves\[\d+\] \(half 0 of the struct\)"):
        interp.run(parse(racy), bufs, params, (N // 64, 1, 1))


def test_a_race_on_an_f16_member_names_its_half():
    racy = HALVES.replace("out[i].a = src[i].n.h;", "out[i / 2u].e = src[i].n.h;")
    bufs, params = _half_inputs()
    with pytest.raises(RaceError, match=r"out\[\d+\] \(half 11 of the struct\)"):
        interp.run(parse(racy), bufs, params, (N // 64, 1, 1))


def test_tint_takes_the_f16_kernel():
    assert_tint_takes({"halves": HALVES})


HALF_ROWS = """enable f16;
struct Rows {
  n: f16,
  k: u32,
  data: array<vec2<f16>>,
}
struct Ctr {
  tag: f16,
  hits: atomic<u32>,
  lo: f16,
}
@group(0) @binding(0) var<storage, read> rows: Rows;
@group(0) @binding(1) var<storage, read_write> ctr: Ctr;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  let d = rows.data[i % arrayLength(&rows.data)];
  atomicAdd(&ctr.hits, i);
  if (i == 0u) {
    ctr.tag = rows.n;
  }
  if (i == 1u) {
    ctr.lo = d.y;
  }
  out[i] = f32(d.x * rows.n) + f32(rows.k);
}
"""


def test_whole_struct_bindings_with_f16_members_run_as_numpy_says(gpu):
    """A binding that is one struct of f16 members ending in a runtime-sized array, and an
    atomic beside f16 members (its word is two halves); ``f32(rows.k)`` converts a member."""
    rng = np.random.default_rng(49)
    rows = (rng.uniform(0.5, 2.0, 4 + 2 * 40) * rng.choice([-1, 1], 84)).astype(np.float16)
    halves = rows.view(np.uint16)
    halves[1] = 0x7E01  # padding after n
    halves[2:4] = np.array([12345], np.uint32).view(np.uint16)
    ctr = np.full(6, 0x7E01, np.uint16)  # tag, padding, hits (two halves), lo, padding
    ctr[2:4] = 0
    bufs = {"rows": rows, "ctr": ctr.view(np.float16), "out": np.full(N, np.nan, np.float32)}
    data = rows[4:].reshape(40, 2)
    i = np.arange(N)
    d = data[i % 40]
    want_out = (d[:, 0] * rows[0]).astype(np.float32) + np.float32(12345)
    want_ctr = ctr.copy()
    want_ctr[0], want_ctr[4] = halves[0], data[1, 1].view(np.uint16)
    want_ctr[2:4] = np.array([i.sum()], np.uint32).view(np.uint16)
    k = parse(HALF_ROWS)
    assert parse(emit(k)) == k
    for run in (interp.run, runtime.run):
        got = run(k, bufs, None, (N // 64, 1, 1))
        # f16 arithmetic: a GPU may carry the product in f32 (half an f16 ulp of it apart).
        product = float(np.abs(d[:, 0].astype(np.float32) * np.float32(rows[0])).max())
        assert_as_numpy(got["out"], want_out, run, run.__module__, eps=2**-10, scale=product)
        np.testing.assert_array_equal(np.asarray(got["ctr"]).view(np.uint16), want_ctr)


FLAGS = """struct F {
  on: bool,
  v: f32,
  m: vec2<bool>,
}
struct G {
  f: F,
  n: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> t: array<G, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let v = x[gid.x];
  t[lid.x].f = F(v > 1.0, v, vec2<bool>(v < 1.5, true));
  t[lid.x].n = gid.x;
  workgroupBarrier();
  let g = t[(lid.x + 1u) % 64u];
  out[gid.x] = select(0.0, g.f.v, g.f.on) + select(0.0, 10.0, g.f.m.x && g.f.m.y) + f32(g.n);
}
"""


def test_bool_members_of_a_workgroup_struct_run_as_numpy_says(gpu):
    """Workgroup memory is not host-shareable: its structs may hold bool (a word of 0 or 1)."""
    x = np.random.default_rng(50).uniform(0.5, 2.0, N).astype(np.float32)
    i = np.arange(N)
    j = i // 64 * 64 + (i + 1) % 64
    v = x[j]
    want = np.where(v > 1, v, np.float32(0)) + np.where(v < 1.5, np.float32(10), 0)
    want = want.astype(np.float32) + j.astype(np.float32)
    k = parse(FLAGS)
    assert parse(emit(k)) == k
    for run in (interp.run, runtime.run):
        got = run(k, {"x": x, "out": np.full(N, np.nan, np.float32)}, None, (N // 64, 1, 1))
        np.testing.assert_array_equal(got["out"], want, err_msg=run.__module__)
    assert_tint_takes({"flags": FLAGS})


def test_a_bool_member_in_storage_is_refused_as_tint_refuses_it():
    bad = FLAGS.replace(
        "var<workgroup> t: array<G, 64>;",
        "@group(0) @binding(2) var<storage, read_write> t: array<G>;",
    )
    assert_refused_as_tint_refuses(bad, WgslTypeError, "member on: bool in storage memory")
