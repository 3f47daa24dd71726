"""Storage bindings that are one value, not a runtime-sized array: a scalar, a vector, an
``atomic<u32>`` counter, a struct (atomic members included), and structs inside structs. Each
kernel runs on the interpreter and the GPU as numpy says; the interpreter finds the races and
out-of-order reads such bindings invite. Refusals are conformance cases
(``cases/module_storage/``, ``cases/nested_structs/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.interp import RaceError
from kvdsl.ir.types import Array, Struct, Vec, f32, field_offsets, size_of, u32
from tests.helpers.wgsl import CASES, assert_tint_takes, read_case
from tests.helpers.backends import assert_as_numpy

COUNTERS = """struct Config {
  n: u32,
  scale: f32,
  bias: vec4<f32>,
}
@group(0) @binding(0) var<storage, read> cfg: Config;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> total: atomic<u32>;
@group(0) @binding(3) var<storage, read_write> peak: atomic<i32>;
@group(0) @binding(4) var<storage, read_write> first: f32;
@group(0) @binding(5) var<storage, read_write> v: vec4<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if i >= cfg.n {
    return;
  }
  atomicAdd(&total, x[i]);
  atomicMax(&peak, i32(x[i]) - 500);
  if i == 0u {
    first = f32(x[0]) * cfg.scale;
    v = cfg.bias * 2.0;
    v.w = cfg.scale + v.x;
  }
}
"""


def _counters(rng):
    bias = rng.standard_normal(4).astype(np.float32)
    cfg = np.frombuffer(struct.pack("<If8x", 100, 1.5) + bias.tobytes(), np.uint32).copy()
    bufs = {
        "cfg": cfg,
        "x": rng.integers(1, 1000, 128).astype(np.uint32),
        "total": np.array([7], np.uint32),
        "peak": np.array([-9999], np.int32),
        "first": np.array([np.nan], np.float32),
        "v": np.full(4, np.nan, np.float32),
    }
    v = bias * np.float32(2)
    v[3] = np.float32(1.5) + v[0]
    want = {
        "total": np.array([7 + int(bufs["x"][:100].sum())], np.uint32),
        "peak": np.array([int(bufs["x"][:100].max()) - 500], np.int32),
        "first": np.array([np.float32(bufs["x"][0]) * np.float32(1.5)], np.float32),
        "v": v,
    }
    return bufs, want


def _check(got: dict, want: dict, run=None, **within) -> None:
    """Each of ``want`` in ``got`` as :func:`assert_as_numpy` holds ``run``'s."""
    for name, w in want.items():
        assert_as_numpy(got[name], w, run, name, **within)


def test_scalar_vector_atomic_and_struct_bindings_run_as_numpy_says(gpu):
    bufs, want = _counters(np.random.default_rng(4))
    k = parse(COUNTERS, "counters.wgsl")
    printed = emit(k)
    assert parse(printed, "counters.wgsl") == k
    assert "var<storage, read_write> total: atomic<u32>;" in printed
    assert "var<storage, read> cfg: Config;" in printed
    _check(interp.run(k, bufs, {}, (2, 1, 1)), want)
    _check(runtime.run(k, bufs, {}, (2, 1, 1)), want)


@pytest.mark.parametrize(
    "body, message",
    [
        ("  first = f32(gid.x);", r"^first: invocation gid=\(0, 0, 0\).* wrote it"),
        (
            "  if gid.x == 0u {\n    v = vec4<f32>(1.0);\n  }\n  if gid.x == 1u {\n"
            "    v.y = 2.0;\n  }",
            r"^v\.y: invocation gid=\(0, 0, 0\).* wrote it in `v = .* and invocation "
            r"gid=\(1, 0, 0\).* writes it",
        ),
        (
            "  if gid.x == 0u {\n    first = 1.0;\n  }\n  if gid.x == 65u {\n"
            "    v.x = first;\n  }",
            r"^first: invocation gid=\(0, 0, 0\).* wrote it .* and invocation gid=\(65, 0, 0\)"
            r".* reads it",
        ),
    ],
)
def test_the_interpreter_finds_races_on_a_scalar_or_a_vector_component(body, message):
    text = COUNTERS.split("  let i = gid.x;")[0] + body + "\n}\n"
    bufs, _ = _counters(np.random.default_rng(4))
    with pytest.raises(RaceError, match=message):
        interp.run(parse(text, "race.wgsl"), bufs, {}, (2, 1, 1))


MERGE = """struct State {
  done: atomic<u32>,
  groups: u32,
  result: f32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: State;
var<workgroup> acc: array<f32, 64>;
var<workgroup> ticket: array<u32, 1>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  acc[lid.x] = x[wid.x * 64u + lid.x];
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if lid.x < s {
      acc[lid.x] = acc[lid.x] + acc[lid.x + s];
    }
    workgroupBarrier();
  }
  if lid.x == 0u {
    partials[wid.x] = acc[0];
  }
  storageBarrier();
  if lid.x == 0u {
    ticket[0] = atomicAdd(&state.done, 1u);
  }
  let last = workgroupUniformLoad(&ticket[0]) == state.groups - 1u;
  storageBarrier();
  if last && lid.x == 0u {
    var total = 0.0;
    for (var g = 0u; g < state.groups; g++) {
      total += partials[g];
    }
    state.result = total;
  }
}
"""


def _merge_inputs(rng):
    x = rng.integers(-8, 8, 256).astype(np.float32)  # small integers: every order sums exactly
    state = np.array([0, 4, np.float32(np.nan).view(np.uint32)], np.uint32)
    return {"x": x, "partials": np.full(4, np.nan, np.float32), "state": state}


def test_the_last_workgroup_merges_through_a_struct_counter(gpu):
    bufs = _merge_inputs(np.random.default_rng(6))
    k = parse(MERGE, "merge.wgsl")
    assert parse(emit(k), "merge.wgsl") == k
    partials = bufs["x"].reshape(4, 64).sum(axis=1, dtype=np.float32)
    want = {
        "partials": partials,
        "state": np.array([4, 4, np.float32(partials.sum()).view(np.uint32)], np.uint32),
    }
    _check(interp.run(k, bufs, {}, (4, 1, 1)), want)
    _check(runtime.run(k, bufs, {}, (4, 1, 1)), want)


def test_without_the_barrier_after_the_counter_the_merge_reads_race():
    planted = MERGE.replace("  storageBarrier();\n  if last", "  if last")
    with pytest.raises(RaceError, match=r"^partials\[\d\]: .* wrote it .* reads it"):
        interp.run(parse(planted), _merge_inputs(np.random.default_rng(6)), {}, (4, 1, 1))


#: Structs inside structs: a struct's member, an array of structs as a member, a struct value
#: built of one and passed to a helper (a conformance case too).
NESTED = read_case(CASES / "nested_structs" / "struct_in_a_struct.wgsl").text
HEAD = Struct(
    "Head",
    (
        ("span", Struct("Range", (("lo", u32), ("hi", u32)))),
        ("scale", Vec(3, f32)),
        ("tags", Array(Struct("Range", (("lo", u32), ("hi", u32))), 2)),
    ),
)


def test_structs_inside_structs_run_as_numpy_says(gpu):
    assert field_offsets(HEAD) == (0, 16, 28) and size_of(HEAD) == 48  # 12 words a head
    rng = np.random.default_rng(9)
    n = 8
    words = np.full((n, 12), 0x5A5A5A5A, np.uint32)  # padding words hold garbage
    lo = rng.integers(0, 20, n)
    words[:, 0], words[:, 1] = lo, lo + rng.integers(1, 10, n)
    scale = rng.standard_normal((n, 3)).astype(np.float32)
    words[:, 4:7] = scale.view(np.uint32)
    words[:, 7:11] = rng.integers(1, 100, (n, 4))
    x = rng.standard_normal(32).astype(np.float32)
    bufs = {
        "heads": words.reshape(-1),
        "x": x,
        "out": np.full(n * 12, 0xDEADBEEF, np.uint32),
        "sums": np.full(n, np.nan, np.float32),
    }
    out = np.full((n, 12), 0xDEADBEEF, np.uint32)
    out[:, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]] = words[:, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]
    out[:, 3] = 0xDEADBEEF  # the padding between span and scale is not stored
    out[:, 2] = 0xDEADBEEF
    sums = np.empty(n, np.float32)
    for i in range(n):
        s = np.float32(0)
        for k in range(words[i, 0], words[i, 1]):
            s = np.float32(s + x[k] * scale[i, 1])
        count = words[i, 1] - words[i, 0]
        sums[i] = s + np.float32(count) + np.float32(words[i, 10])
        out[i, 0], out[i, 1] = words[i, 0], count
        out[i, 7] = words[i, 9] + 7
    want = {"out": out.reshape(-1), "sums": sums}
    k = parse(NESTED, "nested.wgsl")
    assert parse(emit(k), "nested.wgsl") == k
    _check(interp.run(k, bufs, {}, (2, 1, 1)), want)
    _check(runtime.run(k, bufs, {}, (2, 1, 1)), want)


TILES = """struct Pair {
  a: f32,
  b: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read_write> tags: array<u32>;
var<workgroup> tile: array<array<Pair, 4>, 16>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let r = lid.x / 4u;
  let c = lid.x % 4u;
  tile[r][c].a = x[gid.x];
  tile[r][c].b = gid.x * 3u;
  workgroupBarrier();
  let row = tile[15u - r];
  out[gid.x] = row[3u - c].a + tile[r][(c + 1u) % 4u].a;
  tags[gid.x] = tile[15u - r][c].b;
}
"""


def test_a_workgroup_array_of_arrays_of_structs_runs_as_numpy_says(gpu):
    x = np.random.default_rng(12).standard_normal(128).astype(np.float32)
    bufs = {"x": x, "out": np.full(128, np.nan, np.float32), "tags": np.zeros(128, np.uint32)}
    g = np.arange(128)
    lane, base = g % 64, g - g % 64
    r, c = lane // 4, lane % 4
    want = {
        "out": x[base + (15 - r) * 4 + 3 - c] + x[base + r * 4 + (c + 1) % 4],
        "tags": ((base + (15 - r) * 4 + c) * 3).astype(np.uint32),
    }
    k = parse(TILES, "tiles.wgsl")
    assert parse(emit(k), "tiles.wgsl") == k
    assert "var<workgroup> tile: array<array<Pair, 4>, 16>;" in emit(k)
    _check(interp.run(k, bufs, {}, (2, 1, 1)), want)
    _check(runtime.run(k, bufs, {}, (2, 1, 1)), want)
    racy = TILES.replace("  workgroupBarrier();\n", "")
    with pytest.raises(RaceError, match=r"^tile\[\d+\]\[\d\] \(word 0 of the struct\)"):
        interp.run(parse(racy), bufs, {}, (2, 1, 1))


NESTED_TILES = """enable f16;
struct In {
  lo: u32,
  h: f16,
  hi: f32,
}
struct Out {
  r: In,
  t: array<In, 2>,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<Out>;
var<workgroup> tile: array<array<Out, 2>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let v = x[gid.x];
  tile[lid.x][1].r = In(gid.x * 3u, f16(v), v * 2.0);
  tile[lid.x][1].t[1].h = f16(-v);
  tile[lid.x][1].t[1].lo = gid.x;
  tile[lid.x][1].t[1].hi = v + 1.0;
  tile[lid.x][0].t[0] = tile[lid.x][1].r;
  workgroupBarrier();
  let j = (lid.x + 1u) % 64u;
  out[gid.x].r = tile[j][0].t[0];
  out[gid.x].t[1] = tile[j][1].t[1];
}
"""


def _in_halves(lo: np.ndarray, h: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``In`` values as its six halves (``lo``, ``h``, a padding half, ``hi``), padding 0."""
    out = np.zeros((len(lo), 6), np.uint16)
    out[:, 0:2] = lo.astype(np.uint32).view(np.uint16).reshape(-1, 2)
    out[:, 2] = h.astype(np.float16).view(np.uint16)
    out[:, 4:6] = hi.astype(np.float32).view(np.uint16).reshape(-1, 2)
    return out


def test_structs_in_structs_in_a_workgroup_array_of_arrays_run_as_numpy_says(gpu):
    rng = np.random.default_rng(14)
    x = (rng.uniform(0.5, 2.0, 128) * rng.choice([-1, 1], 128)).astype(np.float32)
    poison = np.uint16(0xFFFF)
    bufs = {"x": x, "out": np.full((128, 18), poison, np.uint16).view(np.float16)}
    g = np.arange(128)
    j = g - g % 64 + (g % 64 + 1) % 64
    want = np.full((128, 18), poison, np.uint16)
    want[:, 0:6] = _in_halves(j * 3, x[j], x[j] * np.float32(2))
    want[:, 12:18] = _in_halves(j, -x[j], x[j] + np.float32(1))
    want[:, [3, 15]] = poison  # the padding half after In.h, left as it was
    k = parse(NESTED_TILES, "nested_tiles.wgsl")
    assert parse(emit(k), "nested_tiles.wgsl") == k
    for run in (interp.run, runtime.run):
        got = np.asarray(run(k, bufs, {}, (2, 1, 1))["out"]).view(np.uint16).reshape(128, 18)
        assert np.array_equal(got, want), f"{run.__module__}: {np.argwhere(got != want)[:4]}"
    racy = NESTED_TILES.replace("  workgroupBarrier();\n", "")
    with pytest.raises(RaceError, match=r"^tile\[\d+\]\[0\] \(half 6 of the struct\)"):
        interp.run(parse(racy), bufs, {}, (2, 1, 1))
    assert_tint_takes({"nested_tiles": NESTED_TILES})


#: The conformance case with f16 struct members, run here on both backends.
HALVES = read_case(CASES / "struct_values" / "f16_members.wgsl").text


def test_struct_values_with_f16_members_run_as_numpy_says(gpu):
    x = np.random.default_rng(13).standard_normal(128).astype(np.float32)
    v, k = x.astype(np.float16), np.float16(1.5)
    want = (
        (v * k).astype(np.float32) + (v + k).astype(np.float32) + np.arange(128, dtype=np.float32)
    )
    kern = parse(HALVES, "halves.wgsl")
    assert parse(emit(kern), "halves.wgsl") == kern and "  lo: f16," in emit(kern)
    bufs = {"x": x, "out": np.full(128, np.nan, np.float32)}
    _check(interp.run(kern, bufs, {}, (2, 1, 1)), {"out": want})
    # f16 arithmetic: a GPU may carry it in f32 (half an f16 ulp of each result apart).
    scale = float(np.abs(v.astype(np.float32)).max() + 1.5) * 1.5
    _check(
        runtime.run(kern, bufs, {}, (2, 1, 1)), {"out": want}, runtime.run, eps=2**-10, scale=scale
    )
