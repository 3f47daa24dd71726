"""Module consts of struct type (``const R = Range(3u, 9u);``, ``const Z = Range();``, structs
holding arrays, vectors and other structs): read by member anywhere (``R.lo``, ``T.w[k]``,
``T.span.hi``), whole (``let t = T;``), and folded where WGSL folds them (a ``const_assert`` over
a member). Each kernel runs on both backends as numpy says; Tint takes what kvdsl takes and
refuses the false assertion kvdsl refuses."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.ir.types import Struct
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes

N = 128

TAPS = """struct Range {
  lo: u32,
  hi: u32,
}

struct Tap {
  w: array<f32, 3>,
  span: Range,
  bias: vec2<f32>,
}

const R = Range(3u, 9u);
const TAP: Tap = Tap(array<f32, 3>(0.25, 0.5, 0.25), Range(1u, 3u), vec2<f32>(1.5, -2.0));
const Z = Range();
const_assert R.hi - R.lo == 6u;
const_assert TAP.span.hi == 3u && Z.lo == 0u;
const_assert TAP.bias.x + TAP.w[1] == 2.0;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  const L = Range(2u, R.hi);
  let i = gid.x;
  var acc = TAP.bias.x + TAP.bias[1];
  for (var k = 0u; k < 3u; k++) {
    acc += TAP.w[k] * x[i + k];
  }
  let t = TAP;
  if i % 4u >= t.span.lo && i % 4u < TAP.span.hi {
    acc += f32(L.lo + Z.hi);
  }
  out[i] = acc + f32(R.lo);
}
"""


def test_struct_consts_run_as_numpy_says(gpu):
    x = np.random.default_rng(9).standard_normal(N + 2).astype(np.float32)
    f = np.float32
    i = np.arange(N)
    want = f(1.5) + f(-2.0) + f(0.25) * x[:N]
    want = (want + f(0.5) * x[1 : N + 1]).astype(f)
    want = (want + f(0.25) * x[2 : N + 2]).astype(f)
    want = np.where((i % 4 >= 1) & (i % 4 < 3), want + f(2), want).astype(f)
    want = (want + f(3)).astype(f)
    k = parse(TAPS, "taps.wgsl")
    assert [c.name for c in k.consts] == ["R", "TAP", "Z"]
    assert isinstance(k.consts[1].ty, Struct)
    printed = emit(k)
    assert "const TAP: Tap = Tap(" in printed
    assert parse(printed, "taps.wgsl") == k
    bufs = {"x": x, "out": np.full(N, np.nan, np.float32)}
    for run in (interp.run, runtime.run):
        got = run(k, bufs, {}, (2, 1, 1))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=run.__module__)
    assert_tint_takes({"taps": TAPS})


@pytest.mark.parametrize(
    "asserted",
    ["R.lo == 4u", "TAP.span.lo > TAP.span.hi", "Z.hi != 0u", "TAP.w[2] == 0.5"],
)
def test_a_false_assertion_over_a_struct_consts_members_is_refused_as_tint_refuses_it(asserted):
    text = TAPS.replace("const_assert R.hi - R.lo == 6u;", f"const_assert {asserted};")
    assert_refused_as_tint_refuses(text, WgslTypeError, "const_assert")


def test_a_struct_const_of_the_wrong_type_is_refused_as_tint_refuses_it():
    text = TAPS.replace("const Z = Range();", "const Z: Range = Tap();")
    assert_refused_as_tint_refuses(text, WgslTypeError, "const Z: Range is initialised with a Tap")


TABLE = """struct Band {
  lo: f32,
  gain: f32,
}

struct Eq {
  bands: array<Band, 3>,
  offset: u32,
}

const BANDS = array<Band, 3>(Band(-1.0, 0.5), Band(0.0, 2.0), Band(1.0, 4.0));
const EQ = Eq(BANDS, 7u);
const_assert EQ.bands[2].gain == 4.0 && BANDS[0].lo == -1.0;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = x[gid.x];
  let local = array<Band, 2>(Band(0.5, 1.0), EQ.bands[gid.x % 3u]);
  var gain = 1.0;
  for (var k = 0u; k < 3u; k++) {
    if v >= BANDS[k].lo {
      gain = EQ.bands[k].gain;
    }
  }
  out[gid.x] = v * gain + f32(EQ.offset) + local[1].gain * local[0].lo;
}
"""


def test_arrays_of_structs_as_consts_and_values_run_as_numpy_says(gpu):
    x = np.random.default_rng(10).uniform(-2, 2, N).astype(np.float32)
    f = np.float32
    gain = np.select([x >= 1, x >= 0, x >= -1], [f(4), f(2), f(0.5)], f(1))
    side = np.array([0.5, 2.0, 4.0], f)[np.arange(N) % 3] * f(0.5)
    want = ((x * gain).astype(f) + f(7)).astype(f) + side
    k = parse(TABLE, "table.wgsl")
    assert parse(emit(k), "table.wgsl") == k
    bufs = {"x": x, "out": np.full(N, np.nan, np.float32)}
    for run in (interp.run, runtime.run):
        got = run(k, bufs, {}, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, want.astype(f), err_msg=run.__module__)
    assert_tint_takes({"table": TABLE})
