"""A module ``const`` of an abstract value (no type written) is abstract where it is used, as
WGSL evaluates it: each use reads its value in its place, so the expression around it is folded
in f64 (AbstractFloat) or exactly (AbstractInt) before it takes a concrete type. Its declaration
is still printed, at the type it takes alone; an abstract float no concrete type holds
(``const BIG = 1e50;``) has none, and is refused where a use makes it concrete, as Tint refuses
it there."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse

#: ``M * 3.0 - 0.3`` is 5.551115e-17 in f64 (0 in f32); ``N / 2.0`` of an abstract int const is
#: 1.5; ``B``, a const of a const, is 0.1 * 3.0 in f64; ``K`` sizes an array, bounds a loop and
#: indexes; ``BIG * 1e-50`` is 1.0; the helper ``tiny`` reads ``M`` as the entry point does.
TEXT = """const M = 0.1;
const N = 3;
const A = 0.1;
const B = A * 3.0;
const K = 4;
const BIG = 1e50;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
fn tiny(v: f32) -> f32 {
  return v * (M * 3.0 - 0.3) * 1e16;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  const_assert N * 2 == 6;
  let i = gid.x;
  var w: array<f32, K>;
  for (var j = 0; j < K; j++) {
    w[j] = x[i] * f32(j);
  }
  out[i * 4u] = M * 3.0 - 0.3;
  out[i * 4u + 1u] = N / 2.0 + x[i];
  out[i * 4u + 2u] = (B - 0.3) * 1e16 + w[K - 1] + BIG * 1e-50;
  out[i * 4u + 3u] = tiny(x[i]);
}
"""

#: ``BIG`` made concrete: no f32 holds 1e50.
BIG_CONCRETE = """const BIG = 1e50;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main() {
  out[0] = BIG;
}
"""


def test_module_consts_of_abstract_values_are_abstract_where_used_as_tint_evaluates_them(gpu):
    from kvdsl.runtime import tint_check

    k = parse(TEXT)
    printed = emit(k)
    assert parse(printed) == k
    assert "const M: f32 = 0.1f;" in printed and "const N: i32 = 3i;" in printed
    assert "const B: f32 = 0.3f;" in printed and "array<f32, 4>" in printed
    assert "BIG" not in printed  # no concrete type holds it; every use reads it in place
    x = np.random.default_rng(8128).uniform(0.5, 2.0, 64).astype(np.float32)
    f = np.float32
    tiny = f(0.1 * 3.0 - 0.3)  # in f64, then f32: 5.551115e-17, where f32 arithmetic gives 0
    assert tiny != 0
    want = np.stack(
        [
            np.full(64, tiny),
            f(1.5) + x,
            f((0.1 * 3.0 - 0.3) * 1e16) + x * f(3.0) + f(1.0),
            x * tiny * f(1e16),
        ],
        axis=1,
    ).reshape(-1)
    for backend in (interp, runtime):
        got = backend.run(k, {"x": x, "out": np.full(256, np.nan, f)}, None, (1, 1, 1))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=backend.__name__)
        assert got[0] == tiny
    assert tint_check({"text": TEXT, "printed": printed}) == {"text": None, "printed": None}


def test_an_abstract_module_const_no_type_holds_is_refused_where_it_becomes_concrete():
    from kvdsl.runtime import tint_check

    with pytest.raises(WgslTypeError, match="1e[+]50 is out of range for f32") as err:
        parse(BIG_CONCRETE)
    assert err.value.line == 5
    tint = tint_check({"big": BIG_CONCRETE})["big"]
    assert "5:12 error: value 1.0000000000000001e+50 cannot be represented as 'f32'" in tint


def test_an_abstract_module_const_no_type_holds_keeps_its_name():
    text = BIG_CONCRETE.replace("out[0] = BIG;", "out[0] = 1.0;") + "var<private> BIG: f32;\n"
    with pytest.raises(WgslTypeError, match="var<private> BIG is already declared"):
        parse(text)
