"""Forms WebGPU runtimes write that Tint takes: hex floats, `vec4(...)` without an element type,
`_ = e;`, swizzle assignment, `@must_use` and `@diagnostic` on helpers,
`@builtin(local_invocation_index)` and builtins as members of the entry point's parameter
struct, a `var` of `frexp`'s result, a `bool` member of a struct value, declarations named like
predeclared types, Unicode identifiers. Each kernel runs on the interpreter and on the GPU
(llvmpipe will do) over random non-zero inputs into a poisoned output, to what numpy says; each
prints back to the same IR, and Tint and naga take both the text and its print. What Tint
refuses of these forms kvdsl refuses too: the cases under ``tests/frontend/cases/runtime_forms/``
(``test_wgsl_cases.py`` runs them)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.emit import emit
from kvdsl.frontend import parse
from tests.helpers.forms import ENTRY, GROUPS, HEAD, N, assert_form_runs_as_numpy_says, kernel
from tests.helpers.wgsl import assert_refused, refused_by_compilers

SEED = 44


def want_of(fn):
    return lambda a: fn(a.astype(np.uint64)).astype(np.uint32)


#: name -> (WGSL text, numpy of the input array a -> out)
CASES: dict[str, tuple[str, object]] = {}

# @must_use and @diagnostic on helpers, @diagnostic on the entry point; the module's diagnostic
# directive.
CASES["helper_attributes"] = (
    "diagnostic(off, derivative_uniformity);\n"
    + HEAD
    + "@must_use\nfn twice(x: u32) -> u32 { return x * 2u; }\n"
    + "@diagnostic(off, derivative_uniformity) @must_use\n"
    + "fn plus(x: u32, y: u32) -> u32 { return x + y; }\n"
    + "@diagnostic(warning, derivative_uniformity)\n"
    + ENTRY
    + "  let i = gid.x;\n  out[i] = plus(twice(a[i]), 7u);\n}\n",
    lambda a: a * np.uint32(2) + np.uint32(7),
)

# @builtin(local_invocation_index) beside global_invocation_id and workgroup_id.
CASES["local_invocation_index"] = (
    HEAD
    + "@compute @workgroup_size(8, 4)\n"
    + "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
    + "@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>) {\n"
    + "  let i = wg.x * 32u + li;\n  out[i] = a[i] * 3u + li * 100000u + gid.y;\n}\n",
    lambda a: a * np.uint32(3)
    + (np.arange(N) % 32).astype(np.uint32) * np.uint32(100000)
    + ((np.arange(N) % 32) // 8).astype(np.uint32),
)

# Hex floats, abstract and suffixed, each exact (the sum's bits are compared).
CASES["hex_floats"] = (
    kernel("  out[i] = bitcast<u32>(f32(a[i]) * 0x1.8p-3f + 0x.Cp2 - 0X1P-2f + 0x1.);"),
    lambda a: (
        a.astype(np.float32) * np.float32(0.1875)
        + np.float32(3.0)
        - np.float32(0.25)
        + np.float32(1.0)
    ).view(np.uint32),
)
CASES["hex_floats_f16"] = (
    "enable f16;\n"
    + kernel(
        "  let h = vec2<f16>(f16(a[i] & 0xffu) * 0x1.8p-1h + 0x.4p0, 0x1p-14h);\n"
        "  out[i] = pack2x16float(vec2<f32>(h));"
    ),
    lambda a: ((a & 0xFF).astype(np.float16) * np.float16(0.75) + np.float16(0.25))
    .view(np.uint16)
    .astype(np.uint32)
    | np.uint32(int(np.float16(2.0**-14).view(np.uint16)) << 16),
)

# _ = e: a helper's call runs (once per phony), alone or inside an expression; a phony of no
# call, or of a pointer, does nothing.
CASES["phony"] = (
    HEAD
    + "@must_use fn bump(p: ptr<function, u32>, by: u32) -> u32 {\n  *p = *p + by;\n"
    + "  return *p;\n}\n"
    + ENTRY
    + "  let i = gid.x;\n  var x = a[i];\n  _ = bump(&x, 5u);\n  _ = bump(&x, 7u) * 2u;\n"
    + "  _ = &out;\n  _ = a[i] + 1u;\n  _ = x;\n  out[i] = x;\n}\n",
    lambda a: a + np.uint32(12),
)

# A var of frexp's and of modf's result: its members read and written.
CASES["var_frexp_modf"] = (
    kernel(
        "  var r = frexp(f32(a[i]) + 0.5);\n  r.exp += 3i;\n  r.fract = r.fract * 4.0;\n"
        "  var m = modf(f32(a[i] % 1000u) / 8.0);\n  m.whole = m.whole + 2.0;\n"
        "  out[i] = bitcast<u32>(r.fract) ^ u32(r.exp) ^ (u32(m.whole) * 1000u + u32(m.fract * "
        "1000.0));"
    ),
    lambda a: _frexp_modf(a),
)

# A bool member of a struct value: built, copied, written, returned from a helper.
CASES["bool_member"] = (
    HEAD
    + "struct Flag { on: bool, v: u32, both: vec2<bool> }\n"
    + "fn flip(f: Flag) -> Flag {\n  var g = f;\n  g.on = !g.on;\n  g.both.y = g.on;\n"
    + "  return g;\n}\n"
    + ENTRY
    + "  let i = gid.x;\n  let s = Flag(a[i] % 3u == 0u, a[i], vec2<bool>(false, true));\n"
    + "  let t = flip(s);\n"
    + "  out[i] = select(t.v, t.v * 2u, t.on) + select(0u, 1u, s.on) + select(0u, 10u, t.both.y)"
    + " + select(0u, 100u, t.both.x);\n}\n",
    lambda a: np.where(a % 3 == 0, a + 1, a * 2 + 10).astype(np.uint32),
)

# Unicode identifiers: a let, a var, a helper and its parameter.
CASES["unicode_identifiers"] = (
    HEAD
    + "alias Vé = vec2<u32>;\n"
    + "fn größe(maß: u32) -> u32 { return maß * 3u; }\n"
    + ENTRY
    + "  let i = gid.x;\n  let été = größe(a[i]);\n  var 数 = été + 1u;\n  数 ^= 0x55u;\n"
    + "  let w = Vé(数, été);\n  out[i] = w.x + select(0u, 1u << 31u, été > 6u && 1u < 数);\n}\n",
    lambda a: _unicode(a),
)


def _unicode(a: np.ndarray) -> np.ndarray:
    ete = a * np.uint32(3)
    shu = (ete + np.uint32(1)) ^ np.uint32(0x55)
    return shu + np.where((ete > 6) & (shu > 1), np.uint32(1 << 31), np.uint32(0))


# Builtins as the members of the entry point's parameter struct, beside a builtin parameter.
CASES["builtin_struct_parameter"] = (
    HEAD
    + "struct Inputs {\n  @builtin(local_invocation_index) li: u32,\n"
    + "  @builtin(global_invocation_id) gid: vec3<u32>,\n  @builtin(workgroup_id) wg: vec3<u32>,\n}\n"
    + "@compute @workgroup_size(16, 4)\n"
    + "fn main(@builtin(num_workgroups) n: vec3<u32>, in: Inputs) {\n"
    + "  let i = in.wg.x * 64u + in.li;\n"
    + "  out[i] = a[i] + in.gid.y * 1000u + in.li * 100000u + n.x * 10000000u;\n}\n",
    lambda a: a
    + ((np.arange(N) % 64) // 16 * 1000).astype(np.uint32)
    + (np.arange(N) % 64 * 100000).astype(np.uint32)
    + np.uint32(20000000),
)


# vecN(...), array(...) and matCxR(...) without an element type: of a concrete argument's, the
# abstract ones converted to it; of abstract ones alone, of the context's type (a component's
# or an element's too: vec3(1, 2, 3).zy.x + x), else i32 (f32 where a float is among them).
CASES["inferred_constructors"] = (
    kernel(
        "  let v = vec4(a[i], 2u, 3, 4);\n  let w = vec3(a[i] & 0xffu);\n  let f = vec2(1, 2.5);\n"
        "  let t = array(a[i], a[i] + 1u, 7);\n  let p: vec2<u32> = vec2(5, 6);\n"
        "  let q = array(vec2(1, 2), vec2(3, 4));\n  let m = mat2x2(1.0, 2.0, 3.0, 4.0);\n"
        "  var z: vec2<u32> = vec2();\n  let h = vec2(-1, 2) + vec2<i32>(z);\n"
        "  out[i] = v.x + v.y * v.z * v.w + w.z + u32(f.y * 2.0) + t[2] + t[1] + p.y + u32(q[1].x)"
        " + u32(m[1].y) + u32(h.x + 1) + bitcast<u32>(h.x) + vec3(1, 2, 3).zy.x + array(4, 5)[1];"
    ),
    lambda a: a * np.uint32(2)
    + (a & np.uint32(0xFF))
    + np.uint32(50 - 1 + 3 + 5),  # bitcast<u32>(-1i) wraps the sum
)


# v.zx = e and v.xy op= e (colour names too, through a pointer, of an array's element): e once,
# each named lane written, the others left as they were. Tint takes it; naga refuses it, and
# kvdsl prints one assignment per lane, which both take.
CASES["swizzle_assignment"] = (
    kernel(
        "  var v = vec4(a[i], a[i] + 1u, a[i] + 2u, a[i] + 3u);\n"
        "  v.wy = v.yw + vec2(10u, 20u);\n  v.bg *= 3u;\n"
        "  var s = array<vec3<u32>, 2>();\n  s[1].zx = vec2(a[i], 7u);\n  s[1].xz += vec2(1u, 2u);\n"
        "  let p = &v;\n  p.x <<= 1u;\n  p.zx ^= vec2(0xffu, 0x0fu);\n"
        "  out[i] = v.x + v.y * 3u + v.z * 5u + v.w * 7u + s[1].x * 11u + s[1].y * 13u"
        " + s[1].z * 17u + s[0].y;"
    ),
    lambda a: _swizzled(a.astype(np.uint64)),
)
#: What naga (wgpu 0.32) refuses of the texts, Tint taking them: swizzle assignment, and an f16
#: hex float ("numeric literal not representable by target type" of 0x1.8p-1h). kvdsl's prints
#: of them both take.
NAGA_REFUSES = {"swizzle_assignment", "hex_floats_f16"}

# Function-scope declarations named like the predeclared aliases: a block's let and var, a
# helper's parameters, a let whose initialiser calls the alias it then shadows.
CASES["alias_names"] = (
    HEAD
    + "fn scale(vec2u: u32, mat3x3f: u32) -> u32 { return vec2u * mat3x3f; }\n"
    + ENTRY
    + "  let i = gid.x;\n  var s = 0u;\n  {\n    let vec4f = a[i] + 1u;\n"
    + "    var vec3u = vec4f * 2u;\n    vec3u += 5u;\n    s = vec3u;\n  }\n"
    + "  let vec4f = vec4f(f32(a[i] & 0xffu));\n"
    + "  out[i] = s + scale(a[i], 3u) + u32(vec4f.w);\n}\n",
    lambda a: a * np.uint32(5) + np.uint32(7) + (a & np.uint32(0xFF)),
)


def _swizzled(a: np.ndarray) -> np.ndarray:
    x = (a << 1) ^ 0x0F
    y = (a + 23) * 3
    z = ((a + 2) * 3) ^ 0xFF
    w = a + 11
    return ((x + 3 * y + 5 * z + 7 * w + 11 * 8 + 17 * (a + 2)) & 0xFFFFFFFF).astype(np.uint32)


def _frexp_modf(a: np.ndarray) -> np.ndarray:
    fract, exp = np.frexp(a.astype(np.float32) + np.float32(0.5))
    r = (fract * np.float32(4)).astype(np.float32).view(np.uint32) ^ (exp + 3).astype(np.uint32)
    q = (a % 1000).astype(np.float32) / np.float32(8)
    whole = np.floor(q)
    part = (q - whole).astype(np.float32)
    m = (whole + 2).astype(np.uint32) * np.uint32(1000) + (part * np.float32(1000)).astype(
        np.uint32
    )
    return r ^ m


WORKGROUPS = {"local_invocation_index": (4, 1, 1), "builtin_struct_parameter": (2, 1, 1)}


@pytest.mark.parametrize("backend", ["interp", "gpu"])
@pytest.mark.parametrize("name", CASES)
def test_runtime_form_prints_back_and_runs_as_numpy_says(name, backend, request):
    text, want = CASES[name]
    groups = WORKGROUPS.get(name, GROUPS)
    assert_form_runs_as_numpy_says(text, name, want, backend, request, SEED, groups)


def test_naga_and_tint_take_the_runtime_forms_and_their_prints():
    texts = {n: t for n, (t, _) in CASES.items()}
    texts |= {f"{n}_printed": emit(parse(t, f"{n}.wgsl")) for n, t in list(texts.items())}
    refused = refused_by_compilers(texts)
    assert {n: e for n, e in refused.items() if n not in NAGA_REFUSES} == {}
    assert all(refused[n].startswith("naga: ") for n in NAGA_REFUSES)


def test_an_alias_named_as_a_type_in_a_declarations_scope_is_refused_as_tint_refuses_it():
    text = kernel("  let vec4f = 1u;\n  let q: vec4f = vec4<f32>(1.0);")
    assert_refused(text, "t.wgsl", "cannot use 'let vec4f' as type")
    assert "cannot use 'let vec4f' as type" in refused_by_compilers({"t": text})["t"]
