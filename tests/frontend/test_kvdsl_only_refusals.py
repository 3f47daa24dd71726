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
    "uniform_named_like_field": k(
        "  out[0] = params.n + n;",
        "struct P { n: u32 }\n@group(0) @binding(1) var<uniform> params: P;\n"
        "@group(0) @binding(2) var<uniform> n: u32;\n",
    ),
    "ptr_struct_param": O
    + "struct P { n: u32 }\n@group(0) @binding(1) var<uniform> params: P;\n"
    + "fn f(p: ptr<uniform, P>) -> u32 { return (*p).n; }\n@compute @workgroup_size(64)\n"
    + "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0] = f(&params);\n}\n",
    "wg_count_member": k(
        "  t[0] = 1u; out[0] = t[0];",
        "const C = R(4u);\nstruct R { n: u32 }\nvar<workgroup> t: array<u32, C.n>;\n",
    ),
    "ptr_struct_parameter": k(
        "  var s = S(1u); out[0] = g(&s);",
        "struct S { a: u32 }\nfn g(p: ptr<function, S>) -> u32 { return (*p).a; }\n",
    ),
    "binding_slot_shared_with_an_unused_uniform": k(
        "  out[0] = 1u;", "@group(0) @binding(0) var<uniform> u: u32;\n"
    ),
    "binding_slot_shared_by_a_buffer_an_uncalled_helper_uses": k(
        "  out[0] = 1u;",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\nfn h() { x[0] = 1u; }\n",
    ),
    "member_invariant": k(
        "  out[0] = 1u;", "struct S { @builtin(position) @invariant a: vec4<f32> }\n"
    ),
    "texture_param": O
    + "@group(0) @binding(1) var img: texture_storage_2d<r32uint, write>;\n"
    + "fn put(t: texture_storage_2d<r32uint, write>, i: u32) { textureStore(t, vec2<u32>(i, 0u), "
    + "vec4<u32>(i)); }\n@compute @workgroup_size(64)\n"
    + "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  put(img, gid.x);\n}\n",
    "sampled_texture": k("  out[0] = 1u;", "@group(0) @binding(1) var tex: texture_2d<f32>;\n"),
}


def test_each_limit_kvdsl_keeps_is_one_tint_does_not_make():
    for name, text in LIMITS.items():
        with pytest.raises(FrontendError):
            parse(text, f"{name}.wgsl")
    assert {n: e for n, e in tint_check(LIMITS).items() if e is not None} == {}
