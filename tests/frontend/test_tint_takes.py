"""Modules kvdsl once refused that Tint takes: a swizzle assignment as a for loop's initialiser
or update, an assignment whose reference calls a function (the call once, before the value, as
Tint evaluates it), declarations named like predeclared types and builtins (scoped as WGSL
scopes them), abstract ints beside abstract floats (``2 * 1.5`` an abstract float), one
component or a swizzle of a storage buffer's vector element written. Each kernel runs on the
interpreter and on the GPU (llvmpipe will do) over random non-zero inputs into a poisoned output,
to what numpy says; each prints back to the same IR, Tint takes the text, and Tint and naga its
print. A predeclared name used where a declaration takes it (a value called) is refused with
Tint's words: the cases under ``tests/frontend/cases/predeclared_names/``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.forms import ENTRY, N, POISON, assert_form_runs_as_numpy_says, head, kernel
from tests.helpers.wgsl import assert_tint_takes_them_and_their_prints

SEED = 4403
U = np.uint64

#: name -> (WGSL text, numpy of the input array a (as uint64) -> out, out's lanes per element)
CASES: dict[str, tuple[str, object, int]] = {}


def _for_swizzles(a: np.ndarray) -> np.ndarray:
    k = (a & U(3)) + U(2)  # the first loop's trips
    n = k + U(70) * (k - (k >= 3))  # the trip with v.z == 2 continues before the 70
    x, y, z, w = U(3), a >> U(3), k, a & U(7)
    m = U(3) * (a >> U(3)) + U(3)
    return x + y * U(3) + z * U(5) + w * U(7) + n * U(11) + m * U(13)


# The initialiser and the update swizzle assignments; the body continues past the update on one
# trip, and declares a `v` of its own that the update does not see.
CASES["for_swizzle_init_and_update"] = (
    kernel(
        "  var v = vec4(a[i], 1u, 2u, 3u);\n  var n = 0u;\n"
        "  for (v.zw = vec2(0u, a[i] & 7u); v.z < (a[i] & 3u) + 2u; v.zx += vec2(1u, 3u)) {\n"
        "    n += 1u;\n    if (v.z == 2u) { continue; }\n    let v = 7u;\n    n += v * 10u;\n  }\n"
        "  var m = 0u;\n"
        "  for (v.yx = vec2(a[i] >> 3u, 0u); v.x < 3u; v.x++) { m += v.y + v.x; }\n"
        "  out[i] = v.x + v.y * 3u + v.z * 5u + v.w * 7u + n * 11u + m * 13u;"
    ),
    _for_swizzles,
    1,
)


def _through_calls(a: np.ndarray) -> np.ndarray:
    c = a + U(1)  # one bump: s[(a + 1) & 1]
    j = c & U(1)
    s = np.ones((N, 2, 4), np.uint64)
    s[:, 1] = 2
    rows = np.arange(N)
    s[rows, j, 2] = a * U(3)
    s[rows, j, 0] = U(5)
    c = c + U(1)  # the second bump: s[(a + 2) & 1]
    j = c & U(1)
    s[rows, j, 1] += c  # the value reads c after the reference's bump
    s[rows, j, 3] += U(9)
    c = c + U(1)  # the third: t[(a + 3) & 1] += 4
    t = np.stack([a, a * U(2)], axis=1)
    t[rows, c & U(1)] += U(4)
    flat = s.reshape(N, 8) * (np.arange(8, dtype=np.uint64) + U(1))
    return flat.sum(axis=1) + c * U(1000) + t[:, 0] * U(7) + t[:, 1] * U(11)


# The reference of an assignment calls a function that bumps a counter: once per assignment,
# before the value (which reads the counter) is evaluated, as Tint evaluates it.
CASES["assign_through_a_call"] = (
    kernel(
        "  var c = a[i];\n  var s = array<vec4<u32>, 2>(vec4(1u), vec4(2u));\n"
        "  s[bump(&c)].zx = vec2(a[i] * 3u, 5u);\n  s[bump(&c)].yw += vec2(c, 9u);\n"
        "  var t = array<u32, 2>(a[i], a[i] * 2u);\n  t[bump(&c)] += 4u;\n"
        "  var sum = 0u;\n"
        "  for (var j = 0u; j < 8u; j++) { sum += s[j / 4u][j % 4u] * (j + 1u); }\n"
        "  out[i] = sum + c * 1000u + t[0] * 7u + t[1] * 11u;",
        "fn bump(p: ptr<function, u32>) -> u32 { *p += 1u; return *p & 1u; }\n",
    ),
    _through_calls,
    1,
)


def _reference_first(a: np.ndarray) -> np.ndarray:
    c0 = a & U(1)
    t = np.zeros((N, 3), np.uint64)
    rows = np.arange(N)
    t[rows, c0] = (c0 + U(1)) * U(10)
    t[rows, c0 + U(1)] += (c0 + U(2)) * U(10)
    return t[:, 0] + t[:, 1] * U(100) + t[:, 2] * U(10000) + (c0 + U(2)) * U(1000000)


# The value calls a helper that changes what the reference's index reads: the reference first.
CASES["reference_before_the_value"] = (
    kernel(
        "  var c = a[i] & 1u;\n  var t = array<u32, 3>();\n"
        "  t[c] = bump(&c);\n  t[c] += bump(&c);\n"
        "  out[i] = t[0] + t[1] * 100u + t[2] * 10000u + c * 1000000u;",
        "fn bump(p: ptr<function, u32>) -> u32 { *p += 1u; return *p * 10u; }\n",
    ),
    _reference_first,
    1,
)


# Abstract ints beside abstract floats make abstract floats: operators, a conversion of one, a
# comparison, builtins, an inferred constructor and an element of one; an abstract int operand
# exact before it converts (16777217 - 16777216 is 1, though neither is an f32).
CASES["abstract_int_and_float"] = (
    kernel(
        "  let x = 2 * 1.5;\n  let v = vec2(1, 2) * 2.5;\n  let m = max(1, 2.5) + array(3, 0.5)[1];\n"
        "  let k = select(0u, 1u, 2 < 2.5);\n"
        "  out[i] = a[i] * u32(x) + u32(v.y) * 10u + u32(m * 4) * 100u + k * 1000u"
        " + u32((2 + 1) * 1.5 * 2) + u32((16777217 - 16777216) * 1.5 * 2) * 10000u;"
    ),
    lambda a: a * U(3) + U(50 + 1200 + 1000 + 9 + 30000),
    1,
)


def _components(a: np.ndarray) -> np.ndarray:
    out = np.full((N, 4), POISON, np.uint64)
    out[:, 1] = a * U(3)
    out[:, 3] = a + U(1)
    out[:, 0] = a ^ U(5)
    out[:, 2] = a + U(9) + U(1)
    return out


# One component, a swizzle, a lane by index and a compound one of a storage buffer's vector
# element; the element's other lanes are as they were.
CASES["storage_vector_components"] = (
    kernel(
        "  out[i].y = a[i] * 3u;\n  out[i].wx = vec2(a[i] + 1u, a[i] ^ 5u);\n"
        "  out[i][2] = a[i] + 9u;\n  out[i].b += 1u;",
        out="vec4<u32>",
    ),
    _components,
    4,
)


def _names(a: np.ndarray) -> np.ndarray:
    k = a & U(3)
    return (
        U(7) * a + U(9) + U(30) + U(100) * (k * (k + U(1)) // U(2)) + U(3000)
        + (a & U(1)) * U(10000) + (U(3) * a + U(3)) * U(7)
    )  # fmt: skip


# Declarations named like predeclared types, aliases and builtins, as WGSL scopes them: a
# module-scope const and function, a helper's parameters, a block's let and the type past the
# block, a for loop's var, lets past which the type is named again.
CASES["predeclared_names"] = (
    head()
    + "const vec4f = 3u;\n"
    + "fn f32(x: u32) -> u32 { return x * 5u; }\n"
    + "fn g(u32: u32, i32: u32) -> u32 { return u32 * i32 + vec4f; }\n"
    + ENTRY
    + "  let i = gid.x;\n  var s = 0u;\n  { let u32 = a[i] + 1u; s = u32 * 2u; }\n"
    + "  var t: u32 = s + f32(a[i]);\n  { let vec2u = 7u; t += vec2u; }\n"
    + "  let q: vec2u = vec2u(t, vec4f);\n  var n = 0u;\n"
    + "  for (var i32 = 0u; i32 < (a[i] & 3u); i32++) { n += i32 + 1u; }\n"
    + "  let z: i32 = -2;\n  let bool = a[i] & 1u;\n  let ptr = g(a[i], 3u);\n"
    + "  out[i] = q.x + q.y * 10u + n * 100u + u32(z + 5) * 1000u + bool * 10000u + ptr * 7u;"
    + "\n}\n",
    _names,
    1,
)


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("name", CASES)
def test_tint_form_prints_back_and_runs_as_numpy_says(name, backend, request):
    text, want, lanes = CASES[name]
    assert_form_runs_as_numpy_says(text, name, want, backend, request, SEED, lanes=lanes, wide=U)


def test_tint_takes_the_forms_and_tint_and_naga_their_prints():
    assert_tint_takes_them_and_their_prints({n: t for n, (t, _, _) in CASES.items()})
