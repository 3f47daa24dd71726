"""The WGSL runtimes write, beyond kvdsl's own kernels: call statements of helpers, ``loop`` with
``continuing`` and ``break if``, ``switch``, ``const_assert``, ``alias``, ``requires`` and
``diagnostic`` directives, and the numeric, bit and packing builtins. Each text parses, prints
back to the same IR, and runs on the interpreter as on the GPU and as a numpy statement of it
says. Texts of each construct that kvdsl, naga and Tint take, and invalid ones kvdsl refuses as
a WGSL compiler does, are conformance cases (``cases/language/``, run by ``test_wgsl_cases.py``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir import Dispatch, u32
from kvdsl.ir import tree as ir
from tests.helpers.wgsl import printed_back
from tests.helpers.backends import assert_as_numpy

HEAD = """@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
struct P { n: u32 }
@group(0) @binding(2) var<uniform> params: P;
"""

MAIN = """@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.n) {
    return;
  }
"""

#: A switch with several selectors, a default and a break; a loop whose continuing block
#: counts and leaves by ``break if``, a continue out of a switch into it; const_assert,
#: alias and the two directives.
CONTROL = (
    "requires packed_4x8_integer_dot_product;\ndiagnostic(off, derivative_uniformity);\n"
    + "alias Word = u32;\n"
    + HEAD.replace("array<u32>;\n@group(0) @binding(1)", "array<Word>;\n@group(0) @binding(1)")
    + """const K: u32 = 4u;
const_assert K > 2u;

fn classify(v: u32) -> u32 {
  var r = 0u;
  switch v % 5u {
    case 0u, 1u: {
      r = 10u;
    }
    case 2u {
      r = 20u;
      if (v > 100u) {
        break;
      }
      r = 21u;
    }
    case 3u, default {
      r = 99u;
    }
  }
  return r;
}

"""
    + MAIN
    + """  const_assert K * 2u == 8u;
  var s = 0u;
  var k = 0u;
  loop {
    if (k >= a[i] % 7u) {
      break;
    }
    switch k {
      case 3u: {
        k++;
        continue;
      }
      default: {
      }
    }
    s += k;
    continuing {
      k++;
      break if k > 5u;
    }
  }
  o[i] = s * 1000u + classify(a[i]);
}
"""
)


def control_numpy(a: np.ndarray) -> np.ndarray:
    """What CONTROL computes, stated in Python."""
    out = []
    for v in a.tolist():
        s, k = 0, 0
        while k < v % 7:
            if k == 3:
                k += 1  # the switch's clause, then continue
            else:
                s += k
            k += 1  # the continuing block
            if k > 5:
                break
        r = {0: 10, 1: 10, 2: 20 if v > 100 else 21}.get(v % 5, 99)
        out.append(s * 1000 + r)
    return np.array(out, np.uint32)


#: Helpers that return nothing, called as statements, one returning a value whose value the
#: call statement discards; each writes the output.
CALLS = (
    HEAD
    + """
fn put(i: u32, v: u32) {
  if (v % 2u == 0u) {
    o[i] = v / 2u;
    return;
  }
  o[i] = v * 3u + 1u;
}

fn mark(i: u32) -> u32 {
  o[i + params.n] = countOneBits(a[i]) + firstLeadingBit(a[i]);
  return 7u;
}

"""
    + MAIN
    + """  put(i, a[i]);
  mark(i);
}
"""
)


def calls_numpy(a: np.ndarray) -> np.ndarray:
    first = np.array([v.bit_length() - 1 if v else 0xFFFFFFFF for v in a.tolist()], np.uint64)
    ones = np.array([bin(v).count("1") for v in a.tolist()], np.uint64)
    collatz = np.where(a % 2 == 0, a // 2, a.astype(np.uint64) * 3 + 1)
    return np.concatenate([collatz, (ones + first) % 2**32]).astype(np.uint32)


def _run(text: str, a: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
    k = parse(text)
    n = len(a)
    k = dataclasses.replace(k, dispatch=Dispatch(ir.Lit(n, u32), 64, 65535))
    bufs = {"a": a, "o": np.full(words, 0xDEADBEEF, np.uint32)}
    return interp.run(k, bufs, {"n": n})["o"], runtime.run(k, bufs, {"n": n})["o"]


def _inputs(n: int = 300) -> np.ndarray:
    a = np.random.default_rng(7).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    a[:40] = np.arange(40)  # every branch of the small cases
    a[40] = 0
    return a


def test_switch_loop_continuing_const_assert_alias_and_directives_run_as_numpy_says(gpu):
    a = _inputs()
    got_i, got_g = _run(CONTROL, a, len(a))
    want = control_numpy(a)
    np.testing.assert_array_equal(got_i, want)
    np.testing.assert_array_equal(got_g, want)


def test_call_statements_of_helpers_run_as_numpy_says(gpu):
    a = _inputs()
    got_i, got_g = _run(CALLS, a, 2 * len(a))
    want = calls_numpy(a)
    np.testing.assert_array_equal(got_i, want)
    np.testing.assert_array_equal(got_g, want)


def test_array_length_is_each_bindings_element_count(gpu):
    text = (
        "@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;\n"
        "@group(0) @binding(1) var<storage, read_write> o: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  if (gid.x >= arrayLength(&o)) {\n    return;\n  }\n"
        "  o[gid.x] = arrayLength(&x) * 1000u + u32(x[gid.x % arrayLength(&x)].y);\n}\n"
    )
    k = parse(text)
    assert parse(emit(k)) == k
    x = np.random.default_rng(3).uniform(0, 100, 40).astype(np.float32)
    bufs = {"x": x, "o": np.full(70, 0xDEADBEEF, np.uint32)}
    want = 10 * 1000 + x.reshape(10, 4)[np.arange(70) % 10, 1].astype(np.uint32)
    np.testing.assert_array_equal(interp.run(k, bufs, {}, (2, 1, 1))["o"], want)
    np.testing.assert_array_equal(runtime.run(k, bufs, {}, (2, 1, 1))["o"], want)


def test_new_constructs_print_back_to_the_same_ir():
    printed, _ = printed_back(CONTROL), printed_back(CALLS)
    assert printed.startswith(
        "requires packed_4x8_integer_dot_product;\ndiagnostic(off, derivative_uniformity);\n"
    )
    assert "const_assert K > 2u;" in printed and "break if k > 5u;" in printed
    assert "case 3u, default {" in printed and "continuing {" in printed
    assert "Word" not in printed  # an alias is resolved to its type


MODULE_CONSTS = """const A = array<u32, 4>(3u, 1u, 4u, 1u);
const W = array<vec2<f32>, 2>(vec2<f32>(0.5, 1.5), vec2<f32>(-2.0, 4.0));
const V = vec3<i32>(-7, 2, 9);
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  out[i] = x[i] * W[i % 2u].y + f32(A[i % 4u] + u32(V[i % 3u] + 7)) + W[1].x;
}
"""


def test_module_consts_of_array_and_vector_type_run_as_numpy_says(gpu):
    k = parse(MODULE_CONSTS)
    assert parse(emit(k)) == k
    x = np.random.default_rng(51).uniform(0.5, 2.0, 128).astype(np.float32)
    i = np.arange(128)
    w_y, a, v = np.float32([1.5, 4.0]), np.array([3, 1, 4, 1]), np.array([-7, 2, 9])
    want = x * w_y[i % 2] + (a[i % 4] + v[i % 3] + 7).astype(np.float32) + np.float32(-2.0)
    for run in (interp.run, runtime.run):
        got = run(k, {"x": x, "out": np.full(128, np.nan, np.float32)}, None, (2, 1, 1))
        np.testing.assert_allclose(got["out"], want, rtol=1e-6, err_msg=run.__module__)


#: ``--`` where no decrement statement ends (in an expression) is two ``-``, as WGSL tokenises
#: in context and Tint reads it; a function-scope const of an abstract value is abstract where it
#: is used (``h * 1e-50 * 1e50`` and ``t * 3.0 - 0.3`` evaluated in f64 before they take f32, an
#: abstract int const divided by a float a float), as WGSL evaluates it.
ABSTRACT = (
    "@group(0) @binding(0) var<storage, read> a: array<i32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n  var v = a[i];\n  v--;\n"
    "  const h = 0.5;\n  const t = 0.1;\n  const n = 3;\n  const x = h * 1e-50 * 1e50;\n"
    "  out[i * 4u] = f32(v--a[i] + 1i--2i);\n"
    "  out[i * 4u + 1u] = x + f32(v);\n"
    "  out[i * 4u + 2u] = t * 3.0 - 0.3;\n"
    "  out[i * 4u + 3u] = n / 2.0 + t * f32(v);\n}\n"
)


def test_minus_minus_in_an_expression_and_abstract_function_consts_run_as_tint_reads_them(gpu):
    from kvdsl.runtime import tint_check

    k = parse(ABSTRACT)
    assert parse(emit(k)) == k
    rng = np.random.default_rng(4444)
    a = rng.integers(1, 1000, 64, dtype=np.int32)
    f = np.float32
    v = a - 1
    want = np.stack(
        [
            (v + a + 3).astype(f),
            f(0.5) + v.astype(f),
            np.full(64, f(0.1 * 3.0 - 0.3)),  # in f64, then f32: not 0, as in f32
            f(1.5) + f(0.1) * v.astype(f),
        ],
        axis=1,
    ).reshape(-1)
    for backend in (interp, runtime):
        got = backend.run(k, {"a": a, "out": np.full(256, np.nan, f)}, {}, (1, 1, 1))["out"]
        assert_as_numpy(got, want, backend.run)
    assert tint_check({"abstract": ABSTRACT}) == {"abstract": None}
