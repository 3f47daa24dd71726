"""The WGSL runtimes write, beyond kvdsl's own kernels: call statements of helpers, ``loop`` with
``continuing`` and ``break if``, ``switch``, ``const_assert``, ``alias``, ``requires`` and
``diagnostic`` directives, and the numeric, bit and packing builtins. Each text parses, prints
back to the same IR, compiles under naga and Tint, and runs on the interpreter as on the GPU
and as a numpy statement of it says; each invalid text is refused by kvdsl as by a WGSL
compiler."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import FrontendError, parse
from kvdsl.ir import Dispatch, u32
from kvdsl.ir import tree as ir
from tests.helpers.wgsl import assert_taken, kernel, refused_by_compilers

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
    for text in (CONTROL, CALLS):
        k = parse(text)
        assert parse(emit(k)) == k
        assert emit(parse(emit(k))) == emit(k)
    printed = emit(parse(CONTROL))
    assert printed.startswith(
        "requires packed_4x8_integer_dot_product;\ndiagnostic(off, derivative_uniformity);\n"
    )
    assert "const_assert K > 2u;" in printed and "break if k > 5u;" in printed
    assert "case 3u, default {" in printed and "continuing {" in printed
    assert "Word" not in printed  # an alias is resolved to its type


H = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"

#: Valid WGSL of the constructs, each taken by kvdsl, naga and Tint.
TAKEN = {
    "switch_default_in_list": kernel("  switch gid.x { case 1u, default, 2u { out[1u] = 2u; } }"),
    "switch_i32_parens": kernel(
        "  let v = i32(gid.x) - 3;\n  switch (v) {\n    case -1, 4: { out[2u] = 1u; }\n"
        "    default: { }\n  }"
    ),
    "break_in_switch_in_loop": kernel(
        "  var n = 0u;\n  loop {\n    switch n { case 2u { break; } default { } }\n"
        "    n++;\n    if (n > 4u) { break; }\n  }\n  out[3u] = n;"
    ),
    "continuing_without_break_if": kernel(
        "  var n = 0u;\n  loop {\n    if (n > 4u) { break; }\n"
        "    continuing {\n      n += 2u;\n    }\n  }\n  out[3u] = n;"
    ),
    "continuing_sees_body_names": kernel(
        "  var n = 0u;\n  loop {\n    let inc = 3u;\n    continuing {\n      n += inc;\n"
        "      break if n >= 9u;\n    }\n  }\n  out[3u] = n;"
    ),
    "const_assert_in_function": kernel("  const_assert 1 < 2;"),
    "array_length": kernel("  if (gid.x < arrayLength(&out)) {\n    out[gid.x] = 2u;\n  }"),
    "barrier_in_uniform_switch": H
    + "var<workgroup> t: array<u32, 64>;\n@compute @workgroup_size(64)\n"
    + "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: "
    + "vec3<u32>) {\n  switch wid.x {\n    case 0u {\n      t[lid.x] = 1u;\n"
    + "      workgroupBarrier();\n      out[lid.x] = t[63u - lid.x];\n    }\n"
    + "    default {\n    }\n  }\n}\n",
    "alias_of_vector": "alias V = vec4<u32>;\n"
    + kernel("  let v = V(1u, 2u, 3u, 4u);\n  out[1u] = v.w;"),
    "void_helper": H
    + "fn f(x: u32) {\n  out[x] = x;\n}\n"
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    + "  f(gid.x);\n}\n",
    "builtins": kernel(
        "  let w = gid.x * 2654435761u;\n  let f = f32(gid.x) * 0.25;\n"
        "  out[1u] = extractBits(w, 3u, 7u) + insertBits(w, 5u, 2u, 3u) + reverseBits(w)\n"
        "    + countLeadingZeros(w) + countTrailingZeros(w) + firstTrailingBit(w)\n"
        "    + pack4xU8Clamp(unpack4xU8(w)) + pack4xI8(unpack4xI8(w))\n"
        "    + bitcast<u32>(dot4I8Packed(w, 0x01ff02feu)) + dot4U8Packed(w, w)\n"
        "    + pack4x8snorm(unpack4x8snorm(w)) + pack2x16unorm(unpack2x16unorm(w))\n"
        "    + u32(pow(f, 3.0) + sign(-f) + fract(f) + mix(f, 2.0, 0.5)\n"
        "    + step(0.5, f) + smoothstep(0.0, 1.0, f) + ldexp(f, 2) + saturate(f)\n"
        "    + length(vec2f(3.0, f)) + distance(vec2f(f), vec2f(2.0))\n"
        "    + normalize(vec3f(1.0, f, 2.0)).x + cross(vec3f(f, 0.0, 0.0),\n"
        "    vec3f(0.0, 1.0, f)).z + atan2(f, 1.0) + tanh(f) + exp2(f) + log2(f + 1.0)\n"
        "    + degrees(f) + radians(f) + quantizeToF16(f) + asinh(f) + acosh(f + 1.0))\n"
        "    + select(0u, 1u, all(vec2<bool>(true, gid.x > 0u)) || any(vec2<bool>(false, f > 1.0)));"
    ),
}


def test_what_kvdsl_takes_naga_and_tint_take():
    assert_taken(TAKEN)


def _v(body: str) -> str:
    return kernel(body)


#: Invalid WGSL: kvdsl's refusal (a part of its message) and the compilers refuse it too.
REFUSED = {
    "switch_no_default": (_v("  switch gid.x { case 1u { } }"), "0 default clauses"),
    "switch_two_defaults": (
        _v("  switch gid.x { case 1u { } default { } case default { } }"),
        "2 default clauses",
    ),
    "switch_repeated_value": (
        _v("  switch gid.x { case 1u, 2u { } case 1u { } default { } }"),
        "appears twice",
    ),
    "switch_float": (_v("  switch 1.5 { default { } }"), "not i32 or u32"),
    "switch_case_type": (_v("  switch gid.x { case 1i { } default { } }"), "case 1i is i32"),
    "switch_case_not_const": (
        _v("  let y = gid.y;\n  switch gid.x { case y { } default { } }"),
        "not a const-expression",
    ),
    "continue_in_switch_outside_loop": (
        _v("  switch gid.x { default { continue; } }"),
        "continue outside a loop",
    ),
    "break_in_continuing": (
        _v("  loop {\n    continuing {\n      break;\n    }\n  }"),
        "break in a continuing block",
    ),
    "return_in_continuing": (
        _v("  loop {\n    if gid.x > 2u { break; }\n    continuing {\n      return;\n    }\n  }"),
        "return in a continuing block",
    ),
    "continuing_never_exits": (
        _v("  var n = 0u;\n  loop {\n    continuing {\n      n++;\n    }\n  }"),
        "the loop never exits",
    ),
    "break_if_not_bool": (
        _v("  var n = 0u;\n  loop {\n    continuing {\n      n++;\n      break if n;\n    }\n  }"),
        "expected bool",
    ),
    "const_assert_false": (_v("  const_assert 1 > 2;"), "the assertion is false"),
    "array_length_of_a_var": (
        _v("  var a: array<u32, 4>;\n  out[1u] = arrayLength(&a);"),
        "'a' is not a storage binding",
    ),
    "barrier_in_varying_switch": (
        _v(
            "  switch gid.x {\n    case 0u {\n      workgroupBarrier();\n    }\n    default {\n"
            "    }\n  }"
        ),
        "workgroupBarrier",
    ),
    "module_const_assert_false": (
        "const C = 3u;\nconst_assert C == 4u;\n" + _v(""),
        "the assertion is false",
    ),
    "const_assert_runtime": (_v("  const_assert gid.x > 0u;"), "not a const-expression"),
    "requires_unknown": ("requires no_such_feature;\n" + _v(""), "not a WGSL language feature"),
    "diagnostic_bad_severity": (
        "diagnostic(loud, derivative_uniformity);\n" + _v(""),
        "the severity is one of",
    ),
    "builtin_call_statement": (_v("  countOneBits(gid.x);"), "@must_use"),
    "void_helper_as_value": (
        H
        + "fn f(x: u32) {\n  out[x] = x;\n}\n@compute @workgroup_size(64)\n"
        + "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  let y = f(gid.x);\n}\n",
        "returns no value",
    ),
    "extract_bits_i32_offset": (_v("  out[1u] = extractBits(gid.x, 1i, 2u);"), "must be u32"),
    "pack4xi8_of_u32": (_v("  out[1u] = pack4xI8(vec4<u32>(1u));"), "expects (vec4<i32>)"),
    "ldexp_u32_exponent": (_v("  let f = ldexp(1.0, 2u);"), "exponent must be i32"),
    "cross_of_vec2": (_v("  let c = cross(vec2f(1.0), vec2f(2.0));"), "3-component"),
    "countonebits_of_float": (_v("  let c = countOneBits(1.5);"), "integer"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_kvdsl_refuses_what_wgsl_refuses(name):
    text, message = REFUSED[name]
    with pytest.raises(FrontendError) as info:
        parse(text, f"{name}.wgsl")
    assert message in str(info.value), str(info.value)


def test_the_compilers_refuse_every_refused_text():
    refused = refused_by_compilers({n: t for n, (t, _) in REFUSED.items()})
    assert set(refused) == set(REFUSED), sorted(set(REFUSED) - set(refused))
