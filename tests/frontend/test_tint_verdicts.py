"""kvdsl's verdict is Tint's on modules where the two once differed. Those refused in Tint's
words (a const or const_assert naming an override, an alias named like another module
declaration, a texture builtin of no overload, an @invariant Tint refuses, a type generator's
name where a declaration takes it) are conformance cases, ``tests/frontend/cases/tint_verdicts/``;
here, a must_use helper named like a builtin called as a statement is refused, and a helper named
like a builtin called as a statement, abstract float arithmetic evaluated in f64 before it takes
a type and @invariant on a struct member's @builtin(position) are taken, run on the interpreter
and on the GPU (llvmpipe will do) over random non-zero inputs into a poisoned output, to what
numpy says."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.runtime import tint_check
from tests.helpers.forms import ENTRY, HEAD, POISON, N, kernel
from tests.helpers.wgsl import refused_by_compilers


def inputs() -> np.ndarray:
    return np.random.default_rng(4404).integers(1, 1 << 20, N, dtype=np.uint32)


def test_a_must_use_helper_named_like_a_builtin_called_as_a_statement_is_refused():
    text = kernel(
        "  min(i, 7u);\n  out[i] = 1u;", "@must_use fn min(j: u32, y: u32) -> u32 { return j; }\n"
    )
    with pytest.raises(WgslTypeError, match=r"min is @must_use"):
        parse(text)
    assert "annotated with '@must_use'" in tint_check({"t": text})["t"]


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


# Declarations named like WGSL's type generators, scoped as WGSL scopes them: a struct and a
# function at module scope, a block's let and var, a helper's parameters; past the blocks the
# generator is the type again.
CASES["declarations_named_like_type_generators"] = (
    kernel(
        "  var v = vec4(a[i], 3u);\n  { let vec2 = a[i] + 1u; v.a = vec2 * 2u; }\n"
        "  { var array = v.a + 1u; array += mat2x2(1u); v.b += array; }\n"
        "  let w = vec2<u32>(v.a, v.b);\n  out[i] = w.x + w.y * 7u + h(a[i], 2u);",
        "struct vec4 { a: u32, b: u32 }\nfn mat2x2(x: u32) -> u32 { return x * 5u; }\n"
        "fn h(bitcast: u32, array: u32) -> u32 { return bitcast * array; }\n",
    ),
    lambda a: 18 * a + 79,
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


#: Module declarations of every kind named like predeclared types: a binding (given by the host
#: by its fresh name, f32_), a workgroup var, an override, a struct and an alias.
PREDECLARED_NAMES = (
    HEAD
    + "@group(0) @binding(2) var<storage, read> f32: array<u32>;\n"
    + "var<workgroup> bool: array<u32, 64>;\noverride ptr: u32 = 9u;\n"
    + "struct atomic { x: u32 }\nalias i32 = u32;\n"
    + ENTRY
    + "  let i = gid.x;\n  bool[i % 64u] = a[i];\n  workgroupBarrier();\n"
    + "  let s = atomic(bool[(i + 1u) % 64u]);\n  let k: i32 = s.x + ptr;\n"
    + "  out[i] = k + f32[i] * 3u;\n}\n"
)


def _predeclared_names(backend, constants=None) -> np.ndarray:
    k = parse(PREDECLARED_NAMES, "names.wgsl", constants=constants)
    assert parse(emit(k), "names.wgsl") == k
    assert [b.name for b in k.bindings] == ["a", "out", "f32_"]
    bufs = {"a": inputs(), "out": np.full(N, POISON, np.uint32), "f32_": inputs() ^ 0x55}
    return backend.run(k, bufs, {}, (N // 64, 1, 1))["out"]


def _predeclared_want(p: int) -> np.ndarray:
    a = inputs().astype(np.int64)
    nxt = a.reshape(-1, 64)[:, (np.arange(64) + 1) % 64].reshape(-1)
    return ((nxt + p + (a ^ 0x55) * 3) & 0xFFFFFFFF).astype(np.uint32)


def test_module_declarations_named_like_predeclared_types_on_the_interpreter():
    np.testing.assert_array_equal(_predeclared_names(interp), _predeclared_want(9))
    got = _predeclared_names(interp, {"ptr": 4})  # the override by the name the text gives it
    np.testing.assert_array_equal(got, _predeclared_want(4))
    assert tint_check({"names": PREDECLARED_NAMES}) == {"names": None}
    printed = emit(parse(PREDECLARED_NAMES))
    assert refused_by_compilers({"printed": printed}) == {}


def test_module_declarations_named_like_predeclared_types_on_the_gpu(gpu):
    np.testing.assert_array_equal(_predeclared_names(runtime), _predeclared_want(9))


def test_abstract_floats_fold_in_f64_where_a_const_assert_checks_them():
    text = kernel("  out[i] = a[i];", "const_assert 16777217.0 - 16777216.0 == 1.0;\n")
    parse(text)
    assert tint_check({"t": text})["t"] is None
    with pytest.raises(WgslTypeError, match="const_assert"):
        parse(text.replace("== 1.0", "== 0.0"))
