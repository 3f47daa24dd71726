"""Structs and fixed-size arrays among the uniform's params fields, as WebGPU runtimes pack
their uniforms: ``array<vec4<u32>, 2>`` of packed sizes, a struct of ranges, an array of
structs. The host gives a struct field as an object of its members and an array field as a list
of its elements; the runtime packs them in WGSL's layout (:func:`kvdsl.runtime.pack_params`),
and the interpreter holds them as values of function scope. Each kernel runs on both backends
as numpy says; what kvdsl refuses of a uniform, Tint refuses too."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import WgslTypeError, parse
from kvdsl.runtime import ParamsError
from kvdsl.runtime.layout import pack_params, params_layout
from tests.helpers.wgsl import assert_refused_as_tint_refuses, assert_tint_takes

N = 128

# Every member where WGSL's older uniform rules put it too (a struct or an array element 16
# bytes apart), so naga takes the module as well as Tint.
PACKED = """struct Range {
  lo: u32,
  hi: u32,
  scale: f32,
  shift: i32,
}

struct Params {
  span: Range,
  sizes: array<vec4<u32>, 2>,
  taps: array<Range, 3>,
  n: u32,
  bias: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if i >= params.n {
    return;
  }
  let tap = params.taps[i % 3u];
  let size = params.sizes[i / 4u % 2u][i % 4u];
  var acc = params.bias + f32(size) * params.span.scale;
  if i >= params.span.lo && i < params.span.hi {
    acc += x[i] * tap.scale + f32(tap.shift);
  }
  out[i] = acc + f32(params.taps[2].lo);
}
"""


def _params(rng) -> dict:
    def rng_range():
        lo = int(rng.integers(0, 40))
        return {
            "lo": lo,
            "hi": lo + int(rng.integers(20, 80)),
            "scale": float(rng.uniform(0.5, 2.0)),
            "shift": int(rng.integers(-9, 9)),
        }

    return {
        "span": rng_range(),
        "sizes": rng.integers(1, 100, (2, 4)).tolist(),
        "taps": [rng_range() for _ in range(3)],
        "n": 100,
        "bias": float(rng.uniform(-1, 1)),
    }


def _want(x: np.ndarray, p: dict) -> np.ndarray:
    f = np.float32
    i = np.arange(N)
    sizes = np.array(p["sizes"], np.uint32).reshape(-1)[i % 8]
    acc = f(p["bias"]) + sizes.astype(f) * f(p["span"]["scale"])
    scale = np.array([f(t["scale"]) for t in p["taps"]])[i % 3]
    shift = np.array([t["shift"] for t in p["taps"]], f)[i % 3]
    inside = (i >= p["span"]["lo"]) & (i < p["span"]["hi"])
    acc = np.where(inside, acc + (x * scale + shift), acc).astype(f)
    out = (acc + f(p["taps"][2]["lo"])).astype(f)
    return np.where(i < p["n"], out, np.float32(np.nan))


def test_struct_and_array_members_of_the_uniform_run_as_numpy_says(gpu):
    rng = np.random.default_rng(44)
    p = _params(rng)
    x = rng.standard_normal(N).astype(np.float32)
    k = parse(PACKED, "packed.wgsl")
    assert parse(emit(k), "packed.wgsl") == k
    bufs = {"x": x, "out": np.full(N, np.nan, np.float32)}
    want = _want(x, p)
    for run in (interp.run, runtime.run):
        got = run(k, bufs, p, (2, 1, 1))["out"]
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=run.__module__)
    assert_tint_takes({"packed": PACKED})


def test_the_host_packs_members_at_wgsls_offsets():
    k = parse(PACKED, "packed.wgsl")
    offsets, size = params_layout(k.params)
    assert offsets == {"span": 0, "sizes": 16, "taps": 48, "n": 96, "bias": 100}
    assert size == 112
    p = _params(np.random.default_rng(1))
    words = np.frombuffer(pack_params(k.params, p), np.uint32)
    span = p["span"]
    assert words[:4].tolist() == [
        span["lo"],
        span["hi"],
        *struct.unpack("<I", struct.pack("<f", span["scale"])),
        span["shift"] & 0xFFFFFFFF,
    ]
    assert words[4:12].tolist() == np.array(p["sizes"]).reshape(-1).tolist()
    assert [words[12 + 4 * j] for j in range(3)] == [t["lo"] for t in p["taps"]]
    assert words[24] == 100


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p.update(span={"lo": 1, "hi": 2, "scale": 1.0}), r"'span' is struct Range"),
        (
            lambda p: p.update(sizes=[[1, 2, 3, 4]]),
            r"'sizes' is array<vec4<u32>, 2>: .* a list of 2",
        ),
        (lambda p: p["taps"][1].update(shift=1.5), r"'taps\[1\]\.shift' is i32: .* an integer"),
        (lambda p: p["sizes"].__setitem__(1, [1, 2, 3]), r"'sizes\[1\]' is vec4<u32>: .* 4 values"),
    ],
)
def test_a_params_value_of_the_wrong_shape_is_refused_naming_the_member(change, message):
    k = parse(PACKED, "packed.wgsl")
    p = _params(np.random.default_rng(2))
    change(p)
    with pytest.raises(ParamsError, match=message):
        pack_params(k.params, p)


def test_a_layout_only_the_standard_uniform_rules_allow_runs_in_the_interpreter():
    """``n: u32`` then a struct at offset 4, a ``u32`` array of stride 4: WGSL's
    uniform_buffer_standard_layout (Tint) takes them; naga (wgpu 0.32) keeps the older rules
    and refuses the module, so it runs in the interpreter and under Dawn."""
    text = (
        "struct Pair { a: u32, b: u32 }\n"
        "struct Params { n: u32, pair: Pair, xs: array<u32, 3> }\n"
        "@group(0) @binding(0) var<uniform> params: Params;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = params.n + params.pair.b * params.xs[gid.x % 3u];\n"
        "}\n"
    )
    k = parse(text, "standard.wgsl")
    assert params_layout(k.params)[0] == {"n": 0, "pair": 4, "xs": 12}
    p = {"n": 5, "pair": {"a": 1, "b": 3}, "xs": [7, 11, 13]}
    got = interp.run(k, {"out": np.full(64, 7, np.uint32)}, p, (1, 1, 1))["out"]
    np.testing.assert_array_equal(got, 5 + 3 * np.array([7, 11, 13], np.uint32)[np.arange(64) % 3])
    assert_tint_takes({"standard": text})


@pytest.mark.parametrize(
    "decl, message",
    [
        ("struct In { c: atomic<u32> }\nstruct Params { n: u32, inner: In }", "holds an atomic"),
        ("struct In { on: bool }\nstruct Params { n: u32, inner: In }", "holds a bool"),
        ("struct Params { n: u32, flags: array<vec4<bool>, 2> }", "holds a bool"),
    ],
)
def test_members_wgsl_keeps_out_of_a_uniform_are_refused_as_tint_refuses_them(decl, message):
    text = (
        decl + "\n@group(0) @binding(0) var<uniform> params: Params;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
        "  out[gid.x] = params.n;\n"
        "}\n"
    )
    assert_refused_as_tint_refuses(text, WgslTypeError, message)
