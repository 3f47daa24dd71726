"""kvdsl's verdict is Tint's on modules where the two once differed: a const or const_assert
naming an override, an alias named like another module declaration, a texture builtin of no
overload and an @invariant Tint refuses, refused in Tint's words; a helper named like a builtin
called as a statement, abstract float arithmetic evaluated in f64 before it takes a type and
@invariant on a struct member's @builtin(position), taken, run on the
interpreter and on the GPU (llvmpipe will do) over random non-zero inputs into a poisoned
output, to what numpy says."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.runtime import tint_check
from tests.helpers.wgsl import refused_by_compilers

N = 128
POISON = 0xDEADBEEF
HEAD = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
)
ENTRY = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"


def kernel(body: str, helpers: str = "") -> str:
    return HEAD + helpers + ENTRY + "  let i = gid.x;\n" + body + "\n}\n"


def inputs() -> np.ndarray:
    return np.random.default_rng(4404).integers(1, 1 << 20, N, dtype=np.uint32)


#: name -> (text, the words kvdsl's WgslTypeError and Tint's error both hold)
REFUSED = {
    "const_naming_an_override": (
        kernel("  out[i] = C;", "override O: u32 = 3u;\nconst C = O + 1u;\n"),
        "const initializer requires a const-expression, but expression is an override-expression",
    ),
    "function_const_naming_an_override": (
        kernel("  const C = O * 2u;\n  out[i] = C;", "override O: u32 = 3u;\n"),
        "const initializer requires a const-expression, but expression is an override-expression",
    ),
    "const_assert_naming_an_override": (
        kernel("  out[i] = O;", "override O: u32 = 3u;\nconst_assert O > 1u;\n"),
        "const assertion requires a const-expression, but expression is an override-expression",
    ),
    "function_const_assert_naming_an_override": (
        kernel("  const_assert O > 1u;\n  out[i] = O;", "override O: u32 = 3u;\n"),
        "const assertion requires a const-expression, but expression is an override-expression",
    ),
    "alias_named_like_a_binding": (
        kernel("  out[i] = 1u;", "alias out = u32;\n"),
        "redeclaration of 'out'",
    ),
    "alias_named_like_a_helper": (
        kernel("  out[i] = h(1u);", "alias h = u32;\nfn h(x: u32) -> u32 { return x; }\n"),
        "redeclaration of 'h'",
    ),
    "alias_named_like_a_struct": (
        kernel("  out[i] = 1u;", "struct S { a: u32 }\nalias S = u32;\n"),
        "redeclaration of 'S'",
    ),
    "alias_declared_twice": (
        kernel("  out[i] = 1u;", "alias A = u32;\nalias A = i32;\n"),
        "redeclaration of 'A'",
    ),
    "texture_load_without_a_level": (
        kernel(
            "  out[i] = u32(textureLoad(t, vec2<u32>(i, 0u)).x);",
            "@group(0) @binding(2) var t: texture_2d<f32>;\n",
        ),
        "no matching call to 'textureLoad(texture_2d<f32>, vec2<u32>)'",
    ),
    "texture_store_without_a_value": (
        kernel(
            "  textureStore(t, vec2<u32>(i, 0u));\n  out[i] = 1u;",
            "@group(0) @binding(2) var t: texture_storage_2d<r32uint, write>;\n",
        ),
        "no matching call to 'textureStore(texture_storage_2d<r32uint, write>, vec2<u32>)'",
    ),
    "array_length_of_a_buffer_at_a_slot_another_takes": (
        kernel(
            "  out[i] = a[i] + arrayLength(&x);",
            "@group(0) @binding(1) var<storage, read> x: array<u32>;\n",
        ),
        "references multiple variables that use the same resource binding",
    ),
    "a_uniform_and_a_buffer_at_one_slot_both_named": (
        kernel("  out[i] = a[i] + u;", "@group(0) @binding(0) var<uniform> u: u32;\n"),
        "references multiple variables that use the same resource binding",
    ),
    "invariant_without_a_position": (
        kernel("  out[i] = 1u;", "struct S { @invariant a: vec4<f32> }\n"),
        "'@invariant' must be applied to a position builtin",
    ),
    "invariant_twice": (
        kernel(
            "  out[i] = 1u;", "struct S { @builtin(position) @invariant @invariant a: vec4<f32> }\n"
        ),
        "duplicate invariant attribute",
    ),
    "invariant_with_parentheses": (
        kernel("  out[i] = 1u;", "struct S { @builtin(position) @invariant() a: vec4<f32> }\n"),
        "invariant attribute doesn't take parenthesis",
    ),
    "position_of_a_vec3": (
        kernel("  out[i] = 1u;", "struct S { @builtin(position) @invariant a: vec3<f32> }\n"),
        "store type of '@builtin(position)' must be 'vec4<f32>'",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused_in_tints_words(name):
    text, words = REFUSED[name]
    with pytest.raises(WgslTypeError) as err:
        parse(text, f"{name}.wgsl")
    assert words in str(err.value)
    assert words in tint_check({name: text})[name]


def test_an_override_named_by_another_override_or_shadowed_by_a_const_is_taken():
    texts = {
        "override_of_override": kernel(
            "  out[i] = P + a[i];", "override O: u32 = 3u;\noverride P = O * 2u;\n"
        ),
        "shadowing_const": kernel(
            "  const O = 2u;\n  const C = O + 1u;\n  out[i] = C + a[i];", "override O: u32 = 3u;\n"
        ),
    }
    assert tint_check(texts) == {n: None for n in texts}
    bufs = {"a": inputs(), "out": np.full(N, POISON, np.uint32)}
    got = interp.run(parse(texts["override_of_override"]), bufs, {}, (N // 64, 1, 1))["out"]
    np.testing.assert_array_equal(got, inputs() + 6)
    got = interp.run(parse(texts["shadowing_const"]), bufs, {}, (N // 64, 1, 1))["out"]
    np.testing.assert_array_equal(got, inputs() + 3)


#: name -> (text, numpy of the input array a (as int64) -> out)
CASES: dict[str, tuple[str, object]] = {}

# Helpers named like builtins (one returning nothing, one a value) called as statements: WGSL
# calls the helper; a builtin's value discarded stays refused.
CASES["helper_named_like_a_builtin_called_as_a_statement"] = (
    kernel(
        "  step(i, a[i]);\n  min(i, 7u);",
        "fn step(j: u32, x: u32) { out[j] = x * 3u; }\n"
        "fn min(j: u32, y: u32) -> u32 { out[j] += y; return j; }\n",
    ),
    lambda a: a * 3 + 7,
)

# Abstract float arithmetic in f64 before it takes a type: 16777217.0 is no f32 (its nearest
# is 16777216.0), yet the difference is 1.0; 0.1 + 0.2 - 0.3 is f64's 5.55e-17, not f32's 0.0.
CASES["abstract_floats_in_f64"] = (
    kernel(
        "  let one = u32(16777217.0 - 16777216.0);\n"
        "  let tiny = f32(a[i]) * (0.1 + 0.2 - 0.3) * 1e16;\n"
        "  let half = (3 * 1.5 - 4) * f32(a[i] & 15u);\n"
        "  out[i] = a[i] + one * 5u + u32(tiny) * 7u + u32(half) * 11u;"
    ),
    lambda a: a + 5 + _tiny(a) * 7 + ((a & 15) // 2) * 11,
)


def _tiny(a: np.ndarray) -> np.ndarray:
    f = np.float32
    return (a.astype(f) * f(0.1 + 0.2 - 0.3) * f(1e16)).astype(np.int64)


# A struct of values whose member carries a vertex output's @builtin(position) @invariant (of
# no meaning in a compute shader: checked and dropped).
CASES["member_invariant_on_a_position"] = (
    kernel(
        "  let s = S(vec4<f32>(f32(a[i] & 255u)), a[i] * 3u);\n  out[i] = s.b + u32(s.p.w);",
        "struct S { @builtin(position) @invariant p: vec4<f32>, b: u32 }\n",
    ),
    lambda a: a * 3 + (a & 255),
)


# Resources at a slot another takes, none of them named by the entry point (a uniform, a
# texture, a buffer only helpers it does not call name, a buffer a local's name hides): left
# out of the kernel, with those helpers, as WGSL leaves them out of the pipeline's layout.
CASES["resources_at_one_slot_the_entry_point_does_not_name"] = (
    "@group(0) @binding(0) var<uniform> u: vec4<u32>;\n"
    + HEAD
    + "@group(0) @binding(1) var t: texture_2d<f32>;\n"
    + "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n"
    + "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
    + "fn h(j: u32) { x[j] = u.x; }\nfn g() { h(0u); y[0] = 1u; }\n"
    + "fn keep(v: u32) -> u32 { return v * 7u; }\n"
    + ENTRY
    + "  let i = gid.x;\n  let y = keep(a[i]);\n  out[i] = y + a[i];\n}\n",
    lambda a: a * 8,
)


def _run(name: str, backend) -> np.ndarray:
    k = parse(CASES[name][0], f"{name}.wgsl")
    bufs = {"a": inputs(), "out": np.full(N, POISON, np.uint32)}
    return backend.run(k, bufs, {}, (N // 64, 1, 1))["out"]


def _want(name: str) -> np.ndarray:
    return (CASES[name][1](inputs().astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)


@pytest.mark.parametrize("name", CASES)
def test_taken_prints_back_and_runs_on_the_interpreter_as_numpy_says(name):
    k = parse(CASES[name][0], f"{name}.wgsl")
    assert parse(emit(k), f"{name}.wgsl") == k
    np.testing.assert_array_equal(_run(name, interp), _want(name))


@pytest.mark.parametrize("name", CASES)
def test_taken_on_the_gpu_is_what_numpy_says(name, gpu):
    np.testing.assert_array_equal(_run(name, runtime), _want(name))


def test_tint_takes_them_and_tint_and_naga_their_prints():
    texts = {n: t for n, (t, _) in CASES.items()}
    assert {n: e for n, e in tint_check(texts).items() if e is not None} == {}
    prints = {f"{n}_printed": emit(parse(t, f"{n}.wgsl")) for n, t in texts.items()}
    assert refused_by_compilers(prints) == {}


def test_resources_the_entry_point_does_not_name_leave_the_interface():
    k = parse(CASES["resources_at_one_slot_the_entry_point_does_not_name"][0])
    assert [b.name for b in k.bindings] == ["a", "out"]
    assert (k.uniforms, k.textures) == ((), ())
    assert [f.name for f in k.functions] == ["keep"]


def test_abstract_floats_fold_in_f64_where_a_const_assert_checks_them():
    text = kernel("  out[i] = a[i];", "const_assert 16777217.0 - 16777216.0 == 1.0;\n")
    parse(text)
    assert tint_check({"t": text})["t"] is None
    with pytest.raises(WgslTypeError, match="const_assert"):
        parse(text.replace("== 1.0", "== 0.0"))
