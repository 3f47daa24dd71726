"""Module-scope vars past arrays and atomics, as WebGPU runtimes write them: a ``var<workgroup>``
of a scalar, a vector or a struct (one per workgroup, zero at its start, shared by its
invocations, read by ``workgroupUniformLoad``), and ``var<private>`` with or without an
initialiser (one per invocation, seen by the entry point and every helper). Each kernel runs on
both backends as numpy says: a workgroup var shared across workgroups, or a private var shared
across invocations, gives other values. The interpreter finds races on a workgroup var as on a
workgroup array (per word, named as WGSL writes it); a private var cannot race."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.interp import RaceError
from kvdsl.ir.tree import PrivateVar, WorkgroupVar
from kvdsl.ir.types import Vec, f32, u32
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes

GROUPS = 3

WORKGROUP = """struct Stats {
  count: u32,
  half: f32,
  first: vec2<f32>,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

var<workgroup> part: array<f32, 64>;
var<workgroup> total: f32;
var<workgroup> stats: Stats;
var<workgroup> scale: vec4<f32>;
var<workgroup> rounds: u32;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let i = wid.x * 64u + lid.x;
  part[lid.x] = x[i];
  if lid.x == 0u {
    scale = vec4<f32>(f32(wid.x) + 1.0, 2.0, 3.0, 4.0);
    stats.first = vec2<f32>(x[i], x[i + 1u]);
    rounds = wid.x + 1u;
  }
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if lid.x < s {
      part[lid.x] += part[lid.x + s];
    }
    workgroupBarrier();
  }
  if lid.x == 0u {
    total = part[0];
    stats.count = wid.x + 5u;
    stats.half = total * 0.5;
  }
  let r = workgroupUniformLoad(&rounds);
  var extra = 0.0;
  for (var k = 0u; k < r; k++) {
    extra += scale.y;
    workgroupBarrier();
  }
  out[i] = x[i] * scale.x + total + f32(stats.count) + stats.half
    + stats.first.y * scale[lid.x % 4u] + extra;
}
"""

PRIVATE = """const K = 3u;

var<private> seed: u32 = K * 7u;
var<private> acc: vec2<f32>;

@group(0) @binding(0) var<storage, read_write> out: array<f32>;

fn next() -> u32 {
  seed = seed * 1664525u + 1013904223u;
  acc.x += f32(seed >> 24u);
  return seed;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  seed += gid.x;
  for (var k = 0u; k < gid.x % 5u; k++) {
    let p = &acc;
    (*p).y += 1.0;
  }
  let a = next();
  let b = next();
  out[gid.x] = f32(a % 1000u) + f32(b % 7u) + acc.x + acc.y;
}
"""


def _workgroup_want(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for g in range(GROUPS):
        xs = x[g * 64 : (g + 1) * 64]
        total = xs.sum(dtype=np.float32)  # whole numbers: exact in any order
        scale = np.array([g + 1, 2, 3, 4], np.float32)
        lanes = np.arange(64)
        out[g * 64 : (g + 1) * 64] = (
            xs * scale[0] + total + (g + 5) + total * np.float32(0.5)
            + xs[1] * scale[lanes % 4] + (g + 1) * np.float32(2.0)
        )  # fmt: skip
    return out


def test_workgroup_scalars_vectors_and_structs_are_workgroup_vars():
    k = parse(WORKGROUP, "workgroup.wgsl")
    assert WorkgroupVar("total", f32) in k.workgroup_vars
    assert WorkgroupVar("scale", Vec(4, f32)) in k.workgroup_vars
    assert [w.name for w in k.workgroup_vars] == ["part", "total", "stats", "scale", "rounds"]
    assert "var<workgroup> stats: Stats;" in emit(k)
    assert parse(emit(k), "workgroup.wgsl") == k


def test_workgroup_vars_are_one_per_workgroup_and_run_as_numpy_says(gpu):
    x = np.random.default_rng(47).integers(-8, 9, GROUPS * 64).astype(np.float32)
    want = _workgroup_want(x)
    k = parse(WORKGROUP, "workgroup.wgsl")
    for run in (interp.run, runtime.run):
        bufs = {"x": x, "out": np.full(GROUPS * 64, np.nan, np.float32)}
        got = run(k, bufs, {}, (GROUPS, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)
    assert_tint_takes({"workgroup": WORKGROUP})


@pytest.mark.parametrize(
    "old, new, message",
    [
        (  # lane 0 writes total, every lane reads it with no barrier between
            "    stats.half = total * 0.5;\n  }\n  let r",
            "    stats.half = total * 0.5;\n  }\n  let t = total;\n  let r",
            r"^total \(workgroup memory\): invocation .* local \(0, 0, 0\)\) wrote it .* reads it",
        ),
        (  # every lane writes one member of the struct
            "  let i = wid.x * 64u + lid.x;\n",
            "  let i = wid.x * 64u + lid.x;\n  stats.count = lid.x;\n",
            r"^stats \(word 0 of the struct\) \(workgroup memory\): invocation .* wrote it .* writes it",
        ),
        (  # every lane writes one lane of the vector
            "  let i = wid.x * 64u + lid.x;\n",
            "  let i = wid.x * 64u + lid.x;\n  scale.z = 1.0;\n",
            r"^scale\.z \(workgroup memory\): invocation .* wrote it .* writes it",
        ),
    ],
)
def test_the_interpreter_finds_races_on_a_workgroup_var(old, new, message):
    text = WORKGROUP.replace(old, new)
    assert text != WORKGROUP
    x = np.ones(GROUPS * 64, np.float32)
    with pytest.raises(RaceError, match=message):
        interp.run(parse(text, "race.wgsl"), {"x": x, "out": np.zeros_like(x)}, {}, (GROUPS, 1, 1))


def _private_want(n: int) -> np.ndarray:
    gid = np.arange(n, dtype=np.uint64)
    mod = np.uint64(2**32)
    a = ((21 + gid) * 1664525 + 1013904223) % mod
    b = (a * 1664525 + 1013904223) % mod
    acc_x = (a >> np.uint64(24)) + (b >> np.uint64(24))
    return ((a % 1000) + (b % 7) + acc_x + gid % 5).astype(np.float32)


def test_private_vars_are_one_per_invocation_and_run_as_numpy_says(gpu):
    k = parse(PRIVATE, "private.wgsl")
    assert k.private_vars[1] == PrivateVar("acc", Vec(2, f32))
    assert k.private_vars[0].ty == u32 and k.private_vars[0].init is not None
    assert "var<private> seed: u32 = K * 7u;" in emit(k)
    assert parse(emit(k), "private.wgsl") == k
    want = _private_want(2 * 64)
    for run in (interp.run, runtime.run):
        got = run(k, {"out": np.full(128, np.nan, np.float32)}, {}, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)
    assert_tint_takes({"private": PRIVATE})


@pytest.mark.parametrize(
    "decl, message",
    [
        ("var<private> g: u32 = n;", r"var<private> g: initialiser n is not a const-expression"),
        ("var<private> g: atomic<u32>;", r"var<private> g: type atomic<u32> .* no atomic"),
    ],
)
def test_a_private_var_wgsl_refuses_is_refused_as_tint_refuses_it(decl, message):
    text = (
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@group(0) @binding(1) var<uniform> n: u32;\n" + decl + "\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = n;\n"
        "}\n"
    )
    assert_refused_as_tint_refuses(text, WgslTypeError, message)


HALVES = """enable f16;

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> h: vec2<f16>;

var<workgroup> w: f16;
var<private> p: f16 = 1.5h;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  if lid.x == 0u {
    w = h.y;
  }
  workgroupBarrier();
  p += h.x * f16(lid.x);
  out[lid.x] = f32(p + w);
}
"""


def test_f16_uniforms_workgroup_and_private_vars_enable_f16_and_run_as_numpy_says(gpu):
    k = parse(HALVES, "halves.wgsl")
    assert emit(k).startswith("enable f16;\n")
    assert parse(emit(k), "halves.wgsl") == k
    h = np.array([0.25, 2.0], np.float16)
    lanes = np.arange(64).astype(np.float16)
    want = ((np.float16(1.5) + h[0] * lanes) + h[1]).astype(np.float32)
    for run in (interp.run, runtime.run):
        got = run(k, {"out": np.full(64, np.nan, np.float32)}, {"h": h.tolist()}, (1, 1, 1))
        np.testing.assert_array_equal(got["out"], want, err_msg=run.__module__)
