"""kvdsl's own limits: the refusals docs/grammar.md lists under "Refusals Tint does not make",
each a module kvdsl refuses and Tint takes. A limit lifted fails here, and its row and case go;
every other refusal of the frontend is one Tint makes too (the conformance cases hold Tint's
verdict beside kvdsl's)."""

from __future__ import annotations

import pytest

from kvdsl.frontend import FrontendError, parse
from kvdsl.runtime import tint_check

O = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = "") -> str:
    return (
        O
        + head
        + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        + body
        + "\n}\n"
    )


LIMITS = {
    "member_align": k(
        "  out[0] = params.n;",
        "struct P { @align(16) n: u32 }\n@group(0) @binding(1) var<uniform> params: P;\n",
    ),
    "member_size": k(
        "  out[0] = params.n;",
        "struct P { @size(16) n: u32 }\n@group(0) @binding(1) var<uniform> params: P;\n",
    ),
    "uniform_named_u": k(
        "  out[0] = u.n;", "struct P { n: u32 }\n@group(0) @binding(1) var<uniform> u: P;\n"
    ),
    "two_uniforms": k(
        "  out[0] = a.n + b.n;",
        "struct P { n: u32 }\n@group(0) @binding(1) var<uniform> a: P;\n@group(0) @binding(2) var<uniform> b: P;\n",
    ),
    "uniform_scalar": k("  out[0] = n;", "@group(0) @binding(1) var<uniform> n: u32;\n"),
    "var_private": k("  g = gid.x; out[0] = g;", "var<private> g: u32;\n"),
    "wg_scalar": k("  w = gid.x; out[0] = w;", "var<workgroup> w: u32;\n"),
    "wg_struct": k("  s.a = gid.x; out[0] = s.a;", "struct S { a: u32 }\nvar<workgroup> s: S;\n"),
    "ptr_uniform": k(
        "  let p = &params; out[0] = (*p).n;",
        "struct P { n: u32 }\n@group(0) @binding(1) var<uniform> params: P;\n",
    ),
    "wg_count_member": k(
        "  t[0] = 1u; out[0] = t[0];",
        "struct R { n: u32 }\nconst C = R(4u);\nvar<workgroup> t: array<u32, C.n>;\n",
    ),
    "for_init_call": k(
        "  var c = 0u;\n  for (f(&c); c < 3u; c++) { }\n  out[0] = c;",
        "fn f(p: ptr<function, u32>) { *p = 1u; }\n",
    ),
    "for_update_call": k(
        "  var c = 0u;\n  for (; c < 3u; f(&c)) { }\n  out[0] = c;",
        "fn f(p: ptr<function, u32>) { *p += 1u; }\n",
    ),
    "ptr_struct_parameter": k(
        "  var s = S(1u); out[0] = g(&s);",
        "struct S { a: u32 }\nfn g(p: ptr<function, S>) -> u32 { return (*p).a; }\n",
    ),
    "array_length_through_a_pointer": k(
        "  out[0] = g(&out);",
        "fn g(p: ptr<storage, array<u32>, read_write>) -> u32 { return arrayLength(p); }\n",
    ),
    "binding_slot_reused_by_an_unused_var": k(
        "  out[0] = 1u;", "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n"
    ),
    "member_location": k("  out[0] = 1u;", "struct S { @location(0) a: u32 }\n"),
    "workgroup_index": (
        O + "@compute @workgroup_size(64)\nfn main(@builtin(workgroup_index) w: u32) {\n"
        "  out[w] = w;\n}\n"
    ),
    "storage_texture": k(
        "  out[0] = 1u;", "@group(0) @binding(1) var tex: texture_storage_2d<rgba8unorm, write>;\n"
    ),
}


def test_each_limit_kvdsl_keeps_is_one_tint_does_not_make():
    for name, text in LIMITS.items():
        with pytest.raises(FrontendError):
            parse(text, f"{name}.wgsl")
    assert {n: e for n, e in tint_check(LIMITS).items() if e is not None} == {}
