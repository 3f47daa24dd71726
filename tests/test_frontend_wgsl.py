"""What the frontend takes, WGSL's compilers take: hand-written edge cases of the language,
each parsed by kvdsl and compiled by naga and Tint (Dawn's Null backend). Where kvdsl takes a
text, both compilers must; kvdsl may be stricter (its subset, its declaration order, a barrier
only under a uniform condition as Tint requires and naga does not check). The tenth stop wrote
these and found six texts kvdsl took that WGSL refuses (each now also a located-error test in
``test_frontend.py``)."""

from __future__ import annotations


from kvdsl.frontend import FrontendError, parse
from test_frontend import kernel

H = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = H) -> str:
    return kernel(body, head)


def helper(fn: str) -> str:
    return H + fn + "\n"


CASES = {
    "fn_const_runtime": kernel("  const x = gid.x;\n  out[0u] = x;"),
    "fn_const_ok": kernel("  const x = 3u;\n  out[0u] = x;"),
    "mod_const_runtime": kernel(
        "  out[0u] = C;", H + "const C: u32 = 3u + D;\nconst D: u32 = 1u;\n"
    ),
    "u32_too_big": kernel("  out[0u] = 4294967296u;"),
    "i32_too_big": kernel("  out[0u] = u32(2147483648i);"),
    "abstract_too_big": kernel("  let x: i32 = 2147483648;\n  out[0u] = u32(x);"),
    "var_no_type": kernel("  var x;\n  out[0u] = 1u;"),
    "redeclare_same_scope": kernel("  let x = 1u;\n  let x = 2u;\n  out[0u] = x;"),
    "shadow_inner": kernel("  let x = 1u;\n  {\n    let x = 2u;\n    out[0u] = x;\n  }"),
    "shadow_builtin_fn": kernel("  let min = 1u;\n  out[0u] = min;"),
    "float_lit_too_big": kernel("  out[0u] = u32(1e39f);"),
    "f16_no_enable": kernel("  out[0u] = u32(1.0h);"),
    "shift_too_big_const": kernel("  out[0u] = 1u << 32u;"),
    "negative_u32": kernel("  out[0u] = -1u;"),
    "index_const_oob_fixed": kernel("  var a: array<u32, 4>;\n  out[0u] = a[4];"),
    "divide_by_zero_const": kernel("  out[0u] = 1u / 0u;"),
    "unreachable_after_return": kernel("  return;\n  out[0u] = 1u;"),
    "let_unused_ok": kernel("  let y = 1u;\n  out[0u] = 2u;"),
    "bool_to_u32_select": kernel("  out[0u] = select(0u, 1u, true && false);"),
    "compound_on_let": kernel("  let x = 1u;\n  x += 1u;\n  out[0u] = x;"),
    "vec_swizzle_assign": kernel(
        "  var v = vec4<u32>(1u);\n  v.xy = vec2<u32>(2u);\n  out[0u] = v.x;"
    ),
    "ptr_deref": kernel("  var a = 1u;\n  let p = &a;\n  out[0u] = *p;"),
    "semicolon_after_fn": kernel("  out[0u] = 1u;") + ";\n",
    "empty_params_struct": "struct P {\n}\n" + kernel("  out[0u] = 1u;"),
    "trailing_comma_args": kernel("  out[0u] = max(1u, 2u,);"),
    "attr_spaces": H.replace("@group(0)", "@ group(0)")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = 1u;\n}\n",
    "workgroup_size_trailing_comma": kernel("  out[0u] = 1u;").replace(
        "@workgroup_size(64)", "@workgroup_size(64,)"
    ),
    "hex_upper_X": kernel("  out[0u] = 0X1Fu;"),
    "leading_zero_int": kernel("  out[0u] = 012u;"),
    "float_suffix_on_int_form": kernel("  out[0u] = u32(1f);"),
    "exp_no_digits": kernel("  out[0u] = u32(1e3);"),
    "bool_add": k("  let b = true + false;\n  out[0u] = 1u;"),
    "if_vec_cond": k("  if (vec2<bool>(true, false)) { out[0u] = 1u; }"),
    "not_int": k("  out[0u] = u32(!1i);"),
    "bitnot_bool": k("  let b = ~true;\n  out[0u] = select(0u, 1u, b);"),
    "neg_u32": k("  let x = 1u;\n  out[0u] = -x;"),
    "abs_u32": k("  out[0u] = abs(3u);"),
    "dot_int": k("  out[0u] = dot(vec2<u32>(1u), vec2<u32>(2u));"),
    "isqrt_int": k("  out[0u] = u32(inverseSqrt(4i));"),
    "min_mixed": k("  out[0u] = u32(min(1u, 2i));"),
    "abstract_plus_u32": k("  out[0u] = 1u + 1;"),
    "float_plus_u32": k("  out[0u] = u32(1.5 + 1u);"),
    "shift_i32_by_i32": k("  let a = 1i;\n  let b = 2i;\n  out[0u] = u32(a << b);"),
    "shift_by_abstract": k("  let a = 1u;\n  out[0u] = a << 1;"),
    "splat_abstract": k("  let v = vec4<f32>(1);\n  out[0u] = u32(v.x);"),
    "f32_of_bool": k("  out[0u] = u32(f32(true));"),
    "bool_of_float": k("  out[0u] = select(0u, 1u, bool(1.0));"),
    "u32_of_neg_abstract": k("  out[0u] = u32(-1);"),
    "u32_of_neg_i32": k("  out[0u] = u32(-1i);"),
    "return_value_main": k("  out[0u] = 1u;\n  return 1u;"),
    "helper_missing_return": helper("fn f(x: u32) -> u32 {\n  if (x > 1u) { return 1u; }\n}")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = f(gid.x);\n}\n",
    "helper_return_in_loop_only": helper("fn f(x: u32) -> u32 {\n  loop { return 1u; }\n}")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = f(gid.x);\n}\n",
    "select_vec_cond": k(
        "  let v = select(vec2<u32>(0u), vec2<u32>(1u), vec2<bool>(true, false));\n  out[0u] = v.x;"
    ),
    "compare_vec_in_select": k(
        "  let v = select(0u, 1u, vec2<u32>(1u) == vec2<u32>(1u));\n  out[0u] = v;"
    ),
    "mod_float": k("  out[0u] = u32(5.5f % 2.0f);"),
    "int_div_float": k("  out[0u] = 5u / 2.0f;"),
    "let_without_init": k("  let x: u32;\n  out[0u] = 1u;"),
    "assign_to_builtin": k("  gid = vec3<u32>(0u);\n  out[0u] = 1u;"),
    "assign_to_param_field": "struct P { n: u32, }\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  params.n = 1u;\n  out[0u] = 1u;\n}\n",
    "store_to_read_binding": "@group(0) @binding(0) var<storage, read> inp: array<u32>;\n"
    + "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  inp[0u] = 1u;\n  out[0u] = inp[1u];\n}\n",
    "workgroup_size_const_expr": "const W: u32 = 32u;\n"
    + H
    + "@compute @workgroup_size(W * 2u)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = 1u;\n}\n",
    "workgroup_size_mixed_types": H
    + "@compute @workgroup_size(64u, 1i)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = 1u;\n}\n",
    "duplicate_builtin": H
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(global_invocation_id) g2: vec3<u32>) {\n  out[0u] = 1u;\n}\n",
    "builtin_wrong_type": H
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<i32>) {\n  out[0u] = 1u;\n}\n",
    "two_lets_shadow_param": helper("fn f(x: u32) -> u32 {\n  let x = 2u;\n  return x;\n}")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = f(gid.x);\n}\n",
    "recursion": helper("fn f(x: u32) -> u32 {\n  return f(x);\n}")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = f(gid.x);\n}\n",
    "array_index_negative_const": k("  var a: array<u32, 4>;\n  out[0u] = a[-1];"),
    "array_runtime_size_workgroup": H
    + "var<workgroup> w: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  out[0u] = w[0];\n}\n",
    "barrier_in_nonuniform_if": H
    + "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n  if (lid.x < 4u) { workgroupBarrier(); }\n  out[0u] = w[0];\n}\n",
    "float_eq_compare_f16mix": k("  out[0u] = select(0u, 1u, 1.0f == 1.0);"),
    "large_workgroup_array": H
    + "var<workgroup> w: array<vec4<f32>, 2048>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n  w[lid.x] = vec4<f32>(1.0);\n  workgroupBarrier();\n  out[0u] = u32(w[0].x);\n}\n",
}


def test_what_the_frontend_takes_naga_and_tint_take():
    from kvdsl.runtime import CompileError, compile_wgsl, tint_check

    taken = {}
    for name, text in CASES.items():
        try:
            parse(text)
        except FrontendError:
            continue
        taken[name] = text
    assert len(taken) > 15
    refused = {}
    for name, text in taken.items():
        try:
            compile_wgsl(text)
        except CompileError as err:
            refused[name] = f"naga: {err}"
    refused |= {n: f"tint: {e}" for n, e in tint_check(taken).items() if e is not None}
    assert not refused, refused
