"""Uniforms as WebGPU runtimes declare them: of any name, several in one module, and of any
type a uniform holds (a struct, a scalar, a vector, a fixed-size array). The params struct
(``var<uniform> params: S``) is the kernel's params; each other uniform is an
:class:`~kvdsl.ir.tree.Uniform`, whose value the host gives by the uniform's name beside the
params fields, the runtime packing each into its own buffer. Each kernel runs on both backends
as numpy says, every uniform holding a different random value, so a uniform bound in another's
place, or packed at other offsets, fails."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.ir.tree import Uniform
from kvdsl.ir.types import Array, Vec, f32
from kvdsl.runtime import ParamsError
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes
from tests.helpers.backends import assert_as_numpy

N = 100

UNIFORMS = """struct Shape {
  n: u32,
  offset: u32,
}

struct Affine {
  scale: f32,
  bias: f32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(1) @binding(0) var<uniform> shape: Shape;
@group(1) @binding(1) var<uniform> affine: Affine;
@group(1) @binding(2) var<uniform> gain: f32;
@group(1) @binding(3) var<uniform> taps: array<vec4<f32>, 2>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if i >= shape.n {
    return;
  }
  let t = taps[i / 4u % 2u][i % 4u];
  dst[i] = (src[i + shape.offset] * affine.scale + affine.bias) * gain + t;
}
"""

# The params struct beside a uniform of another name.
BESIDE = """struct Params {
  n: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<uniform> shift: vec2<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if gid.x < params.n {
    out[gid.x] = f32(gid.x) * params.scale + shift[gid.x % 2u];
  }
}
"""


def _values(rng) -> dict:
    return {
        "shape": {"n": 90, "offset": int(rng.integers(1, 9))},
        "affine": {"scale": float(rng.uniform(0.5, 2.0)), "bias": float(rng.uniform(-1, 1))},
        "gain": float(rng.uniform(1.5, 3.0)),
        "taps": rng.uniform(-4, 4, (2, 4)).tolist(),
    }


def test_uniforms_of_any_name_and_type_are_uniforms_of_the_ir():
    k = parse(UNIFORMS, "uniforms.wgsl")
    assert k.params is None
    assert [u.name for u in k.uniforms] == ["shape", "affine", "gain", "taps"]
    assert k.uniforms[2] == Uniform("gain", f32)
    assert k.uniforms[3] == Uniform("taps", Array(Vec(4, f32), 2))
    printed = emit(k)
    assert "@group(0) @binding(2) var<uniform> shape: Shape;" in printed
    assert "@group(0) @binding(5) var<uniform> taps: array<vec4<f32>, 2>;" in printed
    assert parse(printed, "uniforms.wgsl") == k


def test_several_uniforms_run_as_numpy_says(gpu):
    rng = np.random.default_rng(46)
    v = _values(rng)
    src = rng.standard_normal(N + 16).astype(np.float32)
    f = np.float32
    i = np.arange(N)
    taps = np.array(v["taps"], f).reshape(-1)[(i // 4 % 2) * 4 + i % 4]
    a = v["affine"]
    want = (src[i + v["shape"]["offset"]] * f(a["scale"]) + f(a["bias"])) * f(v["gain"]) + taps
    want = np.where(i < 90, want.astype(f), np.nan)
    k = parse(UNIFORMS, "uniforms.wgsl")
    for run in (interp.run, runtime.run):
        bufs = {"src": src, "dst": np.full(N, np.nan, f)}
        got = run(k, bufs, v, (2, 1, 1))["dst"]
        assert_as_numpy(got, want, run, run.__module__)
    assert_tint_takes({"uniforms": UNIFORMS})


def test_a_uniform_beside_the_params_struct_runs_as_numpy_says(gpu):
    k = parse(BESIDE, "beside.wgsl")
    assert [n for n, _ in k.params.fields] == ["n", "scale"]
    assert k.uniforms == (Uniform("shift", Vec(2, f32)),)
    p = {"n": 70, "scale": 0.75, "shift": [2.5, -1.25]}
    i = np.arange(N)
    want = np.where(
        i < 70,
        i.astype(np.float32) * np.float32(0.75) + np.array([2.5, -1.25], np.float32)[i % 2],
        7.0,
    ).astype(np.float32)
    for run in (interp.run, runtime.run):
        got = run(k, {"out": np.full(N, 7.0, np.float32)}, p, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)


def test_a_uniform_without_its_value_or_of_the_wrong_shape_is_refused_by_name():
    k = parse(UNIFORMS, "uniforms.wgsl")
    v = _values(np.random.default_rng(3))
    bufs = {"src": np.ones(N + 16, np.float32), "dst": np.zeros(N, np.float32)}
    del v["gain"]
    with pytest.raises(ParamsError, match=r"uniform 'gain' \(f32\) has no value"):
        runtime.run(k, bufs, v, (2, 1, 1))
    with pytest.raises(KeyError, match=r"uniform 'gain' has no value"):
        interp.run(k, bufs, v, (2, 1, 1))
    v["gain"] = 1.0
    v["taps"] = [[1.0, 2.0, 3.0, 4.0]]
    with pytest.raises(ParamsError, match=r"'taps' is array<vec4<f32>, 2>"):
        runtime.run(k, bufs, v, (2, 1, 1))


def test_a_uniform_is_not_assigned_and_holds_what_the_uniform_address_space_holds():
    head = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
    body = (
        "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    )
    assert_refused_as_tint_refuses(
        head + "@group(0) @binding(1) var<uniform> n: u32;\n" + body + "  n = 1u;\n}\n",
        WgslTypeError,
        r"'n' is a uniform, not a var",
    )
    assert_refused_as_tint_refuses(
        head + "@group(0) @binding(1) var<uniform> on: bool;\n" + body + "  out[0] = u32(on);\n}\n",
        WgslTypeError,
        r"uniform 'on': bool holds a bool",
    )


# BESIDE with the uniform named like a params field (its struct named P).
CLASH = BESIDE.replace("Params", "P").replace("shift", "scale")


def test_a_uniform_named_like_a_params_field_runs_with_the_field_given_as_params_dot_name(gpu):
    # The host's one dict names each as the WGSL text reads it: the field as params.scale, the
    # uniform as scale; the bare name alone would give one of the two, and is refused.
    k = parse(CLASH, "clash.wgsl")
    assert [n for n, _ in k.params.fields] == ["n", "scale"]
    assert k.uniforms == (Uniform("scale", Vec(2, f32)),)
    assert parse(emit(k), "clash.wgsl") == k
    rng = np.random.default_rng(158)
    field, pair = float(rng.uniform(0.5, 2.0)), rng.uniform(-4, 4, 2).astype(np.float32)
    p = {"n": 70, "params.scale": field, "scale": pair.tolist()}
    i = np.arange(N)
    want = i.astype(np.float32) * np.float32(field) + pair[i % 2]
    want = np.where(i < 70, want, np.nan).astype(np.float32)
    for run in (interp.run, runtime.run):
        got = run(k, {"out": np.full(N, np.nan, np.float32)}, p, (2, 1, 1))["out"]
        assert_as_numpy(got, want, run, run.__module__)
    both = r"params field 'scale' and uniform 'scale' share the name 'scale': give the field as "
    bare = {"n": 70, "scale": pair.tolist()}
    with pytest.raises(ParamsError, match=both + r"'params.scale' and the uniform as 'scale'"):
        runtime.run(k, {"out": np.zeros(N, np.float32)}, bare, (2, 1, 1))
    with pytest.raises(KeyError, match=both):
        interp.run(k, {"out": np.zeros(N, np.float32)}, bare, (2, 1, 1))
    assert_tint_takes({"clash": CLASH})


POINTED = """struct P {
  n: u32,
  k: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: P;
@group(0) @binding(2) var<uniform> taps: array<vec4<u32>, 2>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = &params;
  let q = &taps;
  let t = &taps[gid.x / 4u % 2u];
  out[gid.x] = (*p).n + p.k * gid.x + (*q)[1].y + (*t)[gid.x % 4u];
}
"""

# A helper taking a uniform pointer: WGSL's unrestricted_pointer_parameters (Tint takes it;
# naga refuses the helper, so it runs in the interpreter, and `kvdsl check` notes it).
PASSED = POINTED.replace(
    "@compute",
    "fn pick(t: ptr<uniform, array<vec4<u32>, 2>>, i: u32) -> u32 {\n"
    "  return (*t)[i / 4u % 2u][i % 4u];\n}\n\n@compute",
).replace("(*t)[gid.x % 4u]", "pick(q, gid.x)")


def test_pointers_into_uniform_memory_run_as_numpy_says(gpu):
    k = parse(POINTED, "pointed.wgsl")
    assert parse(emit(k), "pointed.wgsl") == k
    taps = np.random.default_rng(49).integers(1, 1000, (2, 4))
    p = {"n": 7, "k": 3, "taps": taps.tolist()}
    i = np.arange(128)
    want = (7 + 3 * i + taps[1, 1] + taps.reshape(-1)[(i // 4 % 2) * 4 + i % 4]).astype(np.uint32)
    for run in (interp.run, runtime.run):
        got = run(k, {"out": np.full(128, 0xDEADBEEF, np.uint32)}, p, (2, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)
    k = parse(PASSED, "passed.wgsl")
    assert str(k.functions[0].params[0][1]) == "ptr<uniform, array<vec4<u32>, 2>>"
    got = interp.run(k, {"out": np.full(128, 0xDEADBEEF, np.uint32)}, p, (2, 1, 1))["out"]
    np.testing.assert_array_equal(got, want)
    assert_tint_takes({"pointed": POINTED, "passed": PASSED})


def test_a_uniform_is_not_written_through_a_pointer():
    text = POINTED.replace("  out[gid.x] =", "  (*q)[0].x = 1u;\n  out[gid.x] =")
    assert_refused_as_tint_refuses(
        text, WgslTypeError, r"q points at read-only uniform memory \(ptr<uniform, array"
    )


def test_what_a_uniform_pointer_reads_is_as_uniform_as_the_pointer():
    """A barrier under a condition on a value read through a pointer into uniform memory stands
    where the pointer is uniform (Tint takes it), and is refused where its index is not."""
    head = (
        "struct P { n: u32 }\n"
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@group(0) @binding(1) var<uniform> params: P;\n"
        "@group(0) @binding(2) var<uniform> taps: array<vec4<u32>, 2>;\n"
        "fn f(t: ptr<uniform, array<vec4<u32>, 2>>) -> u32 {\n"
        "  if (*t)[0].x > 0u {\n    workgroupBarrier();\n  }\n  return 1u;\n}\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n"
    )
    tail = "  out[lid.x] = 1u;\n}\n"
    taken = {
        "let": head
        + "  let p = &params;\n  if (*p).n > 0u {\n    workgroupBarrier();\n  }\n"
        + tail,
        "param": head + "  let r = f(&taps);\n" + tail,
    }
    for name, text in taken.items():
        parse(text, f"{name}.wgsl")
    assert_tint_takes(taken)
    assert_refused_as_tint_refuses(
        head
        + "  let p = &taps[lid.x % 2u];\n  if (*p).x > 0u {\n    workgroupBarrier();\n  }\n"
        + tail,
        WgslTypeError,
        r"workgroupBarrier\(\) must be reached in uniform control flow",
    )
