"""Pointers to structs as a helper's parameters, as WGSL has them: ``ptr<function, S>``,
``ptr<private, S>`` and ``ptr<uniform, P>`` (the params struct, or another uniform's), read as
``(*p).n`` and ``p.n`` and, in function and private memory, written through. Each kernel runs
as numpy says on the interpreter and, where naga compiles it, on llvmpipe; Tint takes each.
naga (this wgpu) refuses a uniform pointer parameter as it refuses workgroup and storage ones
(``docs/grammar.md``, *Pointers*): the GPU path specialises a helper passed a whole uniform to
it, and a pointer into part of one keeps its parameter, run on the interpreter and under Tint
only, as workgroup and storage ones are."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.ir.handles import specialise_handles
from kvdsl.ir.portability import POINTER_PARAMETER, hazards
from kvdsl.ir.types import Ptr, Struct, Vec, u32
from kvdsl.runtime import CompileError
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes

S = Struct("S", (("a", u32), ("v", Vec(2, u32))))

LOCAL = """struct S {
  a: u32,
  v: vec2<u32>,
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;

var<private> g: S;

fn total(p: ptr<function, S>) -> u32 {
  return (*p).a + p.v.x * 3u + (*p).v.y;
}

fn bump(p: ptr<private, S>, x: u32) {
  (*p).a += x;
  p.v.y = p.v.x ^ x;
}

fn swap(p: ptr<function, S>) {
  let t = (*p).v.x;
  p.v.x = p.v.y;
  (*p).v.y = t;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = src[gid.x];
  var s = S(x, vec2<u32>(gid.x, x >> 3u));
  g = S(gid.x * 7u, vec2<u32>(x & 255u, 0u));
  bump(&g, x % 97u);
  let q: ptr<function, S> = &s;
  let before = total(q);
  swap(&s);
  out[gid.x] = before + total(&s) * 2u + g.a + g.v.y * 5u + s.v.x * 11u;
}
"""


def local_numpy(x: np.ndarray) -> np.ndarray:
    i = np.arange(len(x), dtype=np.uint64)
    x = x.astype(np.uint64)
    before = x + i * 3 + (x >> 3)
    after = x + (x >> 3) * 3 + i
    ga, gvy = i * 7 + x % 97, (x & 255) ^ (x % 97)
    return ((before + after * 2 + ga + gvy * 5 + (x >> 3) * 11) % 2**32).astype(np.uint32)


def test_function_and_private_struct_pointer_parameters_run_as_numpy_says(gpu):
    k = parse(LOCAL, "local.wgsl")
    assert [t for _, t in k.functions[0].params] == [Ptr("function", S)]
    assert [t for _, t in k.functions[1].params] == [Ptr("private", S), u32]
    printed = emit(k)
    assert "fn bump(p: ptr<private, S>, x: u32) {" in printed
    assert "(*p).v.y = (*p).v.x ^ x;" in printed
    assert parse(printed, "local.wgsl") == k
    assert hazards(k) == []
    x = np.random.default_rng(44).integers(1, 1 << 30, 128).astype(np.uint32)
    for run in (interp.run, runtime.run):
        bufs = {"src": x, "out": np.full(128, 0xDEADBEEF, np.uint32)}
        got = run(k, bufs, {}, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, local_numpy(x), err_msg=run.__module__)
    assert_tint_takes({"local": LOCAL})


UNIFORM = """struct P {
  n: u32,
  k: u32,
}

struct Taps {
  w: vec4<u32>,
  shift: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: P;
@group(0) @binding(2) var<uniform> taps: Taps;

fn scaled(p: ptr<uniform, P>, i: u32) -> u32 {
  return (*p).n * i + p.k;
}

fn tap(t: ptr<uniform, Taps>, i: u32) -> u32 {
  return t.w[i % 4u] << (*t).shift;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let q: P = params;
  out[gid.x] = scaled(&params, gid.x) + tap(&taps, gid.x) + q.k;
}
"""


def test_a_uniform_struct_pointer_parameter_runs_as_numpy_says(gpu):
    # naga takes no uniform pointer parameter: the GPU path specialises each helper passed a
    # whole uniform to it (kvdsl.ir.handles), so the kernel runs there too.
    k = parse(UNIFORM, "uniform.wgsl")
    assert [t for _, t in k.functions[0].params] == [Ptr("uniform", k.params, "read"), u32]
    assert parse(emit(k), "uniform.wgsl") == k
    assert hazards(k) == []
    gpu_text = emit(specialise_handles(k))
    assert "fn scaled_params(i: u32) -> u32 {\n  return params.n * i + params.k;" in gpu_text
    assert "fn tap_taps(i: u32) -> u32 {\n  return taps.w[i % 4u] << taps.shift;" in gpu_text
    rng = np.random.default_rng(45)
    n, kk, shift = int(rng.integers(1, 1000)), int(rng.integers(1, 1000)), int(rng.integers(1, 9))
    w = rng.integers(1, 1 << 20, 4)
    values = {"n": n, "k": kk, "taps": {"w": w.tolist(), "shift": shift}}
    i = np.arange(128, dtype=np.uint64)
    want = ((n * i + kk + (w[i % 4].astype(np.uint64) << shift) + kk) % 2**32).astype(np.uint32)
    for run in (interp.run, runtime.run):
        bufs = {"out": np.full(128, 0xDEADBEEF, np.uint32)}
        got = run(k, bufs, values, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)
    assert_tint_takes({"uniform": UNIFORM})


def test_a_pointer_into_part_of_a_uniform_keeps_its_parameter_which_naga_refuses(gpu):
    text = UNIFORM.replace(
        "fn tap(t: ptr<uniform, Taps>, i: u32) -> u32 {\n  return t.w[i % 4u] << (*t).shift;",
        "fn tap(t: ptr<uniform, vec4<u32>>, i: u32) -> u32 {\n  return (*t)[i % 4u] << taps.shift;",
    ).replace("tap(&taps, gid.x)", "tap(&taps.w, gid.x)")
    k = parse(text, "part.wgsl")
    assert {why for _, why in hazards(k)} == {POINTER_PARAMETER}
    assert "fn tap(t: ptr<uniform, vec4<u32>>, i: u32) -> u32 {" in emit(specialise_handles(k))
    values = {"n": 3, "k": 5, "taps": {"w": [1, 2, 3, 4], "shift": 2}}
    got = interp.run(k, {"out": np.zeros(64, np.uint32)}, values, (1, 1, 1))["out"]
    i = np.arange(64)
    np.testing.assert_array_equal(got, 3 * i + 5 + (np.array([1, 2, 3, 4])[i % 4] << 2) + 5)
    with pytest.raises(CompileError):
        runtime.run(k, {"out": np.zeros(64, np.uint32)}, values, (1, 1, 1))
    assert_tint_takes({"part": text})


def test_a_storage_pointer_to_a_struct_holding_a_bool_is_refused_as_tint_refuses_it():
    head = (
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "struct S { n: u32, b: bool }\n"
    )
    main = (
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[gid.x] = 1u; }\n"
    )
    text = head + "fn f(p: ptr<storage, S, read>) -> u32 { return p.n; }\n" + main
    assert_refused_as_tint_refuses(
        text,
        WgslTypeError,
        r"parameter p of f: storage memory does not hold a S \(it holds a bool\)",
    )
    taken = head + "fn f(p: ptr<workgroup, S>) -> u32 { return p.n; }\n" + main
    parse(taken)
    assert_tint_takes({"taken": taken})
