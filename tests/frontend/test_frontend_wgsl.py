"""What the frontend takes, WGSL's compilers take: hand-written edge cases of the language,
each parsed by kvdsl and compiled by naga and Tint (Dawn's Null backend). Where kvdsl takes a
text, both compilers must; kvdsl may be stricter (its subset, its declaration order, a barrier
only under a uniform condition as Tint requires and naga does not check). Where kvdsl is
stricter, ``test_frontend.py`` or a test below shows it (docs/grammar.md names each), and
non-ASCII text and a uniform field no uniform may hold are errors, not crashes."""

from __future__ import annotations


import pytest

from kvdsl.frontend import FrontendError, parse
from tests.helpers.wgsl import kernel
from tests.helpers.wgsl import refused_by_compilers

H = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"


def k(body: str, head: str = H) -> str:
    return kernel(body, head)


def helper(fn: str) -> str:
    return H + fn + "\n"


# An entry point that calls the helper f.
E = (
    "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  out[0u] = f(1u);\n}\n"
)


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
    # No u32 has a minus, zero's included (a reader that folds -0u to 0u takes it).
    "negative_zero_u32": kernel("  out[0u] = -0u;"),
    # An entry point named like a type: WGSL then reads every u32 as the function (kvdsl emits
    # "main", so a parser that only checks its own names takes it).
    "entry_named_u32": H + "@compute @workgroup_size(1)\nfn u32() {\n  out[0] = 1u;\n}\n",
    "negative_zero_u32_paren": kernel("  out[0u] = -(0u);"),
    "negative_zero_abstract_ok": kernel("  let x: u32 = -0;\n  out[0u] = x;"),
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
    "and_or_mix": k("  let a = 1u; let b = 2u; let c = 3u;\n  out[0u] = a & b | c;"),
    "add_shift_mix": k("  let a = 1u;\n  out[0u] = a + 1u << 2u;"),
    "rel_chain": k("  let a = 1u;\n  out[0u] = select(0u, 1u, a < 2u == true);"),
    "land_lor_mix": k("  let a = true;\n  out[0u] = select(0u, 1u, a && a || a);"),
    "neg_mul": k("  let a = 2i;\n  out[0u] = u32(-a * 3i);"),
    "not_eq": k("  let a = true;\n  out[0u] = select(0u, 1u, !a == false);"),
    "bitnot_neg": k("  out[0u] = u32(~-1i);"),
    "swizzle_mixed_sets": k("  let v = vec4<u32>(1u);\n  out[0u] = v.xg.x;"),
    "swizzle_too_long": k("  let v = vec4<u32>(1u);\n  out[0u] = v.xyzwx.x;"),
    "swizzle_rgba": k("  let v = vec4<u32>(1u);\n  out[0u] = v.rg.y;"),
    "swizzle_on_scalar": k("  let x = 1u;\n  out[0u] = x.x;"),
    "swizzle_past_size": k("  let v = vec2<u32>(1u);\n  out[0u] = v.z;"),
    "index_scalar": k("  let x = 1u;\n  out[0u] = x[0];"),
    "array_ctor_short": k("  let a = array<u32, 3>(1u, 2u);\n  out[0u] = a[0];"),
    "vec_ctor_too_many": k("  let v = vec2<u32>(1u, 2u, 3u);\n  out[0u] = v.x;"),
    "vec_ctor_from_parts": k("  let v = vec3<u32>(vec2<u32>(1u), 1u);\n  out[0u] = v.z;"),
    "vec_ctor_short": k("  let v = vec4<f32>(vec2<f32>(1.0), 1.0);\n  out[0u] = u32(v.x);"),
    "bool_vec_land": k("  let v = vec2<bool>(true) && vec2<bool>(false);\n  out[0u] = 1u;"),
    "bool_vec_and": k(
        "  let v = vec2<bool>(true) & vec2<bool>(false);\n  out[0u] = select(0u, 1u, v.x);"
    ),
    "select_mixed": k("  out[0u] = select(0u, 1i, true);"),
    "const_div_zero_float": k("  out[0u] = u32(1.0 / 0.0);"),
    "i32_of_float": k("  out[0u] = u32(i32(3.9f));"),
    "float_forms": k("  let a = 1.;\n  let b = .5;\n  let c = 1e3;\n  out[0u] = u32(a + b + c);"),
    "abstract_float_to_u32": k("  out[0u] = 1e3;"),
    "abstract_float_int_ctx": k("  let x: u32 = 1.5;\n  out[0u] = x;"),
    "vec_times_scalar": k("  let v = vec2<f32>(1.0) * 2.0;\n  out[0u] = u32(v.x);"),
    "scalar_minus_vec": k("  let v = 2u - vec2<u32>(1u);\n  out[0u] = v.x;"),
    "vec_shift_scalar": k("  let v = vec2<u32>(1u) << 2u;\n  out[0u] = v.x;"),
    "compare_bools_lt": k("  out[0u] = select(0u, 1u, true < false);"),
    "eq_bools": k("  out[0u] = select(0u, 1u, true == false);"),
    "assign_vec_component_index": k("  var v = vec4<u32>(1u);\n  v[2] = 3u;\n  out[0u] = v.z;"),
    "var_array_elem_assign": k("  var a: array<u32, 4>;\n  a[1u] = 3u;\n  out[0u] = a[1u];"),
    "let_array_index_runtime": k(
        "  let a = array<u32, 4>(1u, 2u, 3u, 4u);\n  out[0u] = a[gid.x % 4u];"
    ),
    "trailing_comma_ctor": k("  let v = vec2<u32>(1u, 2u,);\n  out[0u] = v.x;"),
    "paren_lhs": k("  var x = 1u;\n  (x) = 2u;\n  out[0u] = x;"),
    "compound_shift_i32": k("  var x = 1i;\n  x <<= 2u;\n  out[0u] = u32(x);"),
    "increment_u32_var": k("  var x = 1u;\n  x++;\n  out[0u] = x;"),
    "increment_let": k("  let x = 1u;\n  x++;\n  out[0u] = x;"),
    "for_const_init": k("  for (const i = 0u; i < 1u; ) { break; }\n  out[0u] = 1u;"),
    "empty_for_body_cond_false": k("  for (var i = 0u; false; i++) { }\n  out[0u] = 1u;"),
    "loop_break_if_missing": k("  loop { if (gid.x > 0u) { break; } }\n  out[0u] = 1u;"),
    "continue_in_loop_only": k("  loop { if (gid.x > 0u) { break; } continue; }\n  out[0u] = 1u;"),
    "else_if_chain": k(
        "  if (gid.x == 0u) { out[0u] = 1u; } else if (gid.x == 1u) { out[0u] = 2u; } else { out[0u] = 3u; }"
    ),
    "unicode_ident": k("  let é = 1u;\n  out[0u] = é;"),
    "keyword_ident": k("  let loop1 = 1u;\n  out[0u] = loop1;"),
    "reserved_ident": k("  let double = 1u;\n  out[0u] = double;"),
    "underscore_ident": k("  let _ = 1u;\n  out[0u] = 1u;"),
    "dunder_ident": k("  let __x = 1u;\n  out[0u] = __x;"),
    "directive_after_decl": H + "enable f16;\n" + k("  out[0u] = 1u;", ""),
    "duplicate_enable": "enable f16;\nenable f16;\n" + k("  out[0u] = 1u;"),
    "enable_list": "enable f16, subgroups;\n" + k("  out[0u] = 1u;"),
    "enable_split": "enable\n  subgroups /* x */ ,;\n" + k("  out[0u] = 1u;"),
    "helper_wrong_argc": helper("fn f(x: u32) -> u32 { return x; }")
    + E.replace("f(1u)", "f(1u, 2u)"),
    "helper_wrong_argtype": helper("fn f(x: u32) -> u32 { return x; }")
    + E.replace("f(1u)", "f(1i)"),
    "helper_abstract_arg": helper("fn f(x: u32) -> u32 { return x; }") + E.replace("f(1u)", "f(1)"),
    "helper_no_return_type_used": helper("fn f(x: u32) { }") + E,
    "helper_assign_param": helper("fn f(x: u32) -> u32 { x = 2u; return x; }") + E,
    "helper_after_main": E + "fn f(x: u32) -> u32 { return x; }\n",
    "helper_name_shadows_builtin": helper("fn max(x: u32) -> u32 { return x; }")
    + E.replace("f(1u)", "max(1u)"),
    "helper_calls_barrier": helper("fn f(x: u32) -> u32 { workgroupBarrier(); return x; }") + E,
    "helper_uses_gid": helper("fn f(x: u32) -> u32 { return gid.x; }") + E,
    "two_entry_points": H
    + "@compute @workgroup_size(64)\nfn a(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = 1u; }\n@compute @workgroup_size(64)\nfn b(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = 2u; }\n",
    "entry_no_builtins": H + "@compute @workgroup_size(64)\nfn main() { out[0u] = 1u; }\n",
    "entry_return_type": H
    + "@compute @workgroup_size(64)\nfn main() -> u32 { out[0u] = 1u; return 1u; }\n",
    "workgroup_size_on_helper": helper("@workgroup_size(64) fn f(x: u32) -> u32 { return x; }") + E,
    "unknown_builtin": H
    + "@compute @workgroup_size(64)\nfn main(@builtin(vertex_index) v: u32) { out[0u] = v; }\n",
    "subgroup_size_no_enable": H
    + "@compute @workgroup_size(64)\nfn main(@builtin(subgroup_size) s: u32) { out[0u] = s; }\n",
    "local_index_builtin": H
    + "@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_index) i: u32) { out[i] = 1u; }\n",
    "uniform_f16_no_enable": "struct P { h: f16, }\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = u32(params.h); }\n",
    "uniform_vec3_field": "struct P { v: vec3<u32>, n: u32, }\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = params.v.x + params.n; }\n",
    "uniform_bool_field": "struct P { b: bool, }\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = select(0u, 1u, params.b); }\n",
    "storage_bool_array": "@group(0) @binding(0) var<storage, read_write> out: array<bool>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = true; }\n",
    "storage_write_only": "@group(0) @binding(0) var<storage, write> out: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = 1u; }\n",
    "storage_vec3_array": "@group(0) @binding(0) var<storage, read_write> out: array<vec3<f32>>;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = vec3<f32>(1.0); }\n",
    "uniform_without_params_name": "struct P { n: u32, }\n"
    + H
    + "@group(0) @binding(1) var<uniform> p: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = p.n; }\n",
    "workgroup_bool_array": H
    + "var<workgroup> w: array<bool, 4>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) { w[0] = true; workgroupBarrier(); out[0u] = select(0u, 1u, w[0]); }\n",
    "workgroup_read_before_barrier": H
    + "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) { w[lid.x] = 1u; out[lid.x] = w[(lid.x + 1u) % 64u]; }\n",
    "const_array_module": "const A = array<u32, 2>(1u, 2u);\n" + k("  out[0u] = A[1];"),
    "const_vec_module": "const V = vec2<u32>(1u, 2u);\n" + k("  out[0u] = V.y;"),
    "const_abstract_module": "const N = 4;\n" + k("  out[0u] = u32(N);"),
    "const_float_in_u32": "const F: f32 = 1.5;\n" + k("  out[0u] = F;"),
    "semicolon_after_struct": "struct P { n: u32, };\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = params.n; }\n",
    "struct_field_semicolons": "struct P { n: u32; }\n"
    + H
    + "@group(0) @binding(1) var<uniform> params: P;\n@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[0u] = params.n; }\n",
    "for_empty_forever_break": k("  for (;;) { break; }\n  out[0u] = 1u;"),
    "loop_no_exit": k("  loop { }\n  out[0u] = 1u;"),
    "break_outside": k("  break;\n  out[0u] = 1u;"),
    "continue_outside": k("  continue;\n  out[0u] = 1u;"),
    "if_no_parens": k("  if gid.x > 0u { out[0u] = 1u; }"),
    "if_no_braces": k("  if (gid.x > 0u) out[0u] = 1u;"),
    "else_no_braces": k("  if (gid.x > 0u) { out[0u] = 1u; } else out[0u] = 2u;"),
    "for_var_out_of_scope": k("  for (var i = 0u; i < 2u; i++) { }\n  out[0u] = i;"),
    "for_let_in_init_assign": k("  for (let i = 0u; i < 2u; i++) { }\n  out[0u] = 1u;"),
    "compound_vec_component": k("  var v = vec2<u32>(1u);\n  v.x += 1u;\n  out[0u] = v.x;"),
    "compound_array_elem": k("  var a: array<u32, 2>;\n  a[0] += 3u;\n  out[0u] = a[0];"),
    "incr_array_elem": k("  var a: array<u32, 2>;\n  a[1]++;\n  out[0u] = a[1];"),
    "incr_binding_elem": k("  out[0u]++;"),
    "assign_let_component": k("  let v = vec2<u32>(1u);\n  v.x = 2u;\n  out[0u] = v.x;"),
    "phony_assign": k("  _ = gid.x;\n  out[0u] = 1u;"),
    "call_statement": helper("fn f(x: u32) -> u32 { return x; }")
    + "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n  f(1u);\n  out[0u] = 1u;\n}\n",
    "barrier_in_uniform_loop": H
    + "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n  for (var i = 0u; i < 2u; i++) { w[lid.x] = i; workgroupBarrier(); }\n  out[lid.x] = w[0];\n}\n",
    "barrier_in_loop_nonuniform_break": H
    + "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n  for (var i = 0u; i < 2u; i++) { if (lid.x > 3u) { break; } workgroupBarrier(); }\n  out[lid.x] = w[0];\n}\n",
    "barrier_after_nonuniform_return": H
    + "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n  if (lid.x > 3u) { return; }\n  workgroupBarrier();\n  out[lid.x] = w[0];\n}\n",
    "storage_barrier": k("  storageBarrier();\n  out[0u] = 1u;"),
    "nested_blocks_shadow": k("  let x = 1u;\n  { let x = 2u; { let x = 3u; out[0u] = x; } }"),
    "return_in_loop_main": k("  loop { return; }"),
    "dead_code_after_break": k("  loop { break; out[0u] = 2u; }\n  out[0u] = 1u;"),
    "for_update_call": k("  for (var i = 0u; i < 2u; i = i + 1u) { }\n  out[0u] = 1u;"),
    "for_update_compound": k("  for (var i = 0u; i < 2u; i += 1u) { }\n  out[0u] = 1u;"),
    "for_cond_non_bool": k("  for (var i = 0u; i; i++) { }\n  out[0u] = 1u;"),
    "var_function_space": k("  var<function> x: u32 = 1u;\n  out[0u] = x;"),
    "var_private_space": H
    + "var<private> p: u32;\n@compute @workgroup_size(64)\nfn main() { out[0u] = p; }\n",
    "let_type_vec_mismatch": k("  let v: vec2<u32> = vec2<i32>(1i);\n  out[0u] = v.x;"),
    "var_type_infer_abstract": k("  var x = 1;\n  out[0u] = u32(x);"),
    "var_abstract_float": k("  var x = 1.5;\n  out[0u] = u32(x);"),
    "const_expr_index_fixed": k("  const a = array<u32, 2>(1u, 2u);\n  out[0u] = a[1];"),
    "shift_negative_const": k("  out[0u] = 1u << 4294967295u;"),
    "shift_runtime_ok": k("  out[0u] = 1u << gid.x;"),
    "min_abstract_mix": k("  out[0u] = min(1u, 2);"),
    "select_abstract_mix": k("  out[0u] = select(1, 2u, true);"),
    "clamp_reversed_const": k("  out[0u] = clamp(gid.x, 5u, 1u);"),
    "dot_mixed": k("  out[0u] = u32(dot(vec2<f32>(1.0), vec2<f32>(1)));"),
    "fma_ints": k("  out[0u] = fma(1u, 2u, 3u);"),
    "round_int": k("  out[0u] = round(1u);"),
    "pack_wrong_arg": k("  out[0u] = pack2x16float(vec4<f32>(1.0));"),
    "unpack_ok": k("  out[0u] = u32(unpack2x16float(1u).x);"),
}


def test_what_the_frontend_takes_naga_and_tint_take():
    taken = {}
    for name, text in CASES.items():
        try:
            parse(text)
        except FrontendError:
            continue
        taken[name] = text
    assert len(taken) > 15
    # An enable list holding subgroups (enable_list) must compile under naga too, which refuses
    # `enable subgroups;` (gfx-rs/wgpu#5555): kvdsl's runtime takes subgroups out of any list,
    # not only a directive standing alone on its line.
    refused = refused_by_compilers(taken)
    # A subgroup builtin without `enable subgroups;` is taken as naga takes it (the printer
    # writes the directive back); Tint asks for the directive.
    without = refused.pop("subgroup_size_no_enable", "")
    assert without.startswith("tint: ") and "subgroup_size" in without, without
    assert not refused


def test_text_outside_wgsl_is_an_error_not_a_crash():
    # Non-ASCII text: kvdsl's names are ASCII (stricter than WGSL, docs/grammar.md); the
    # template-list scan must give an error, not an AttributeError. A
    # no-break space is no WGSL blankspace (Tint and naga refuse it).
    for body, column, char in (
        ("  let \u00e9 = 1u;", 7, "'\u00e9' (U+00E9)"),
        ("  let x = 1u\u00b2;", 13, "'\u00b2' (U+00B2)"),
        ("  let x\u00a0= 1u;", 8, "'\u00a0' (U+00A0)"),
    ):
        with pytest.raises(FrontendError) as info:
            parse(k(body))
        assert str(info.value) == f"<wgsl>:4:{column}: unexpected character {char}"


def test_wgsl_line_breaks_end_a_line_comment():
    # U+2028 is a WGSL line break: the store after it is code, as naga and Tint read it.
    k2028 = parse(k("  out[0u] = 1u; // c\u2028  out[1u] = 2u;"))
    assert k2028.body == parse(k("  out[0u] = 1u; // c\n  out[1u] = 2u;")).body


@pytest.mark.parametrize(
    "br", ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"], ids=ascii
)
def test_errors_count_wgsl_lines_whatever_ends_them(br):
    # Every WGSL line break ends a line of the error's location (lark and the messages counted
    # "\n" alone: a file of lone CRs had every error on line 1), a CR LF once.
    text = k("  let a = 1u;\n  let b = a + 1i;\n  out[0u] = b;").replace("\n", br)
    with pytest.raises(FrontendError) as info:
        parse(text)
    assert info.value.line == 5, str(info.value)
    bad = k("  let a = 1u;\n  let b = a +;").replace("\n", br)
    with pytest.raises(FrontendError) as info:
        parse(bad)
    assert (info.value.line, info.value.column) == (5, 14), str(info.value)


def test_no_declaration_shadows_a_type_or_builtin():
    # kvdsl reads a type's name and the builtins it parses as nodes of their own as such
    # everywhere, so no declaration takes one (the op table's builtins may be shadowed:
    # test_shadowed_builtins.py).
    for text, what in (
        (helper("fn f(u32: u32) -> u32 { return u32 + 1u; }") + E, "parameter u32"),
        (E.replace("fn main(", "fn vec4u("), "entry point vec4u"),
    ):
        with pytest.raises(FrontendError) as info:
            parse(text)
        assert what in str(info.value) and "type's or a builtin's" in str(info.value)
        assert info.value.line is not None


def test_colour_swizzles_read_as_xyzw():
    text = "  var v = vec4<u32>(1u);\n  v.g = 2u;\n  out[0u] = v.rg.y + v.a;"
    xyzw = text.replace(".g ", ".y ").replace(".rg.", ".xy.").replace(".a;", ".w;")
    assert parse(k(text)).body == parse(k(xyzw)).body
