"""``texture_depth_2d`` and ``texture_depth_2d_array`` (``textureLoad`` an ``f32``,
``textureDimensions``, ``textureNumLayers``, ``textureSampleLevel`` at a whole-number level)
and ``sampler_comparison`` (``textureSampleCompareLevel`` and ``textureGatherCompare`` through
WebGPU's default sampler with the compare function "less": nearest texel, coordinates clamped
to the edge, 1.0 where the reference is below the texel), in the entry point and through a
helper's parameters: on the interpreter and on the GPU (llvmpipe will do; the runtime writes the
depth32float texture with a render pass) over random non-zero depths into a poisoned output, to
what numpy says; Tint and naga take the text and its print; what WGSL refuses of them is
refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds
from kvdsl.runtime import BufferError
from tests.helpers.backends import backend_run
from tests.helpers.textures import (
    BACKENDS,
    ENTRY,
    assert_compilers_take_it_and_its_print,
    footprint,
    indices_and_poison,
    read_back,
    run_of,
)

N, K = 128, 8  # invocations, outputs each
H, W, L = 5, 7, 3  # the textures' height, width and layers
HEAD = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var d: texture_depth_2d;\n"
    "@group(0) @binding(3) var da: texture_depth_2d_array;\n"
    "@group(0) @binding(4) var sc: sampler_comparison;\n"
    "@group(0) @binding(5) var s: sampler;\n"
)
HELPERS = (
    "fn shadow(t: texture_depth_2d, sm: sampler_comparison, p: vec2<f32>, r: f32) -> f32 {\n"
    "  return textureSampleCompareLevel(t, sm, p, r);\n}\n"
)
BODY = (
    "  let i = gid.x;\n  let o = i * 8u;\n  let v = a[i];\n"
    "  let dims = textureDimensions(d);\n  let n = textureNumLayers(da);\n"
    "  let c = vec2<u32>(v % dims.x, (v / 8u) % dims.y);\n"
    "  let uv = (vec2<f32>(f32(v % 11u), f32(v % 13u)) - 1.5) / vec2<f32>(dims);\n"
    "  let near = (vec2<f32>(f32(v % 9u), f32((v / 9u) % 8u)) - 1.25) / vec2<f32>(dims);\n"
    "  let r = f32(v % 97u) / 97.0;\n"
    "  out[o] = textureLoad(d, c, 0);\n"
    "  out[o + 1u] = textureLoad(da, vec2<i32>(c), v % n, 0u);\n"
    "  out[o + 2u] = shadow(d, sc, uv, r);\n"
    "  out[o + 3u] = textureSampleCompareLevel(da, sc, uv, i32(v % 5u) - 1, r);\n"
    "  let g = textureGatherCompare(d, sc, near, r);\n"
    "  out[o + 4u] = dot(g, vec4<f32>(1.0, 2.0, 4.0, 8.0));\n"
    "  out[o + 5u] = dot(textureGatherCompare(da, sc, near, v % n, r), vec4<f32>(1.0, 2.0, 4.0, 8.0));\n"
    "  out[o + 6u] = textureSampleLevel(d, s, uv, 0) + textureSampleLevel(da, s, uv, 2u, 0i);\n"
    "  out[o + 7u] = f32(dims.x * 100u + dims.y * 10u + n + textureDimensions(da, 0).x);\n"
)
TEXT = HEAD + HELPERS + ENTRY + BODY + "}\n"


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4440)
    return indices_and_poison(rng, N, N * K) | {
        "d": rng.uniform(0.05, 0.95, (H, W)).astype(np.float32),
        "da": rng.uniform(0.05, 0.95, (L, H, W)).astype(np.float32),
    }


def _want() -> np.ndarray:
    t = _inputs()
    a = t["a"].astype(np.int64)
    d, da, f = t["d"], t["da"], np.float32
    x, y, layer = a % W, (a // 8) % H, a % L
    ref = (a % 97).astype(f) / f(97)  # as the kernel divides, in f32
    ui, vi = np.clip(a % 11 - 2, 0, W - 1), np.clip(a % 13 - 2, 0, H - 1)  # the nearest texel
    clamped = np.clip(a % 5 - 1, 0, L - 1)  # the array index, clamped to the layers
    texels = footprint(a % 9 - 2, (a // 9) % 8 - 2, W, H)  # of textureGatherCompare

    def gathered(tex):
        passed = [(ref < tex(uu, vv)).astype(f) for uu, vv in texels]
        return passed[0] + passed[1] * f(2) + passed[2] * f(4) + passed[3] * f(8)

    want = np.stack(
        [
            d[y, x],
            da[layer, y, x],
            (ref < d[vi, ui]).astype(f),
            (ref < da[clamped, vi, ui]).astype(f),
            gathered(lambda uu, vv: d[vv, uu]),
            gathered(lambda uu, vv: da[layer, vv, uu]),
            d[vi, ui] + da[2, vi, ui],
            np.full(N, W * 100 + H * 10 + L + W, f),
        ],
        axis=1,
    )
    return want.astype(f).reshape(-1)


def _run(run, text: str = TEXT, **given) -> np.ndarray:
    return run(parse(text), _inputs() | given, {}, (N // 64, 1, 1))["out"]


def test_the_text_prints_back_as_it_reads():
    read_back(TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_depth_textures_load_sample_and_compare_as_numpy_says(backend, request):
    got = _run(backend_run(backend, request))
    want = _want()
    assert 0 < want[2::K].sum() < N and 0 < want[4::K].sum()  # both outcomes of the compare
    np.testing.assert_array_equal(got, want)


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(TEXT)


def test_a_depth_texel_outside_the_texture_is_out_of_bounds():
    text = TEXT.replace("textureLoad(d, c, 0)", "textureLoad(d, c + vec2<u32>(0u, 3u), 0)")
    with pytest.raises(OutOfBounds, match=r"d texel \(\d+, \d+\) is out of bounds \(width 7"):
        _run(interp.run, text)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_depth_texture_given_with_channels_is_refused_naming_its_axes(backend):
    with pytest.raises((TypeError, BufferError), match=r"expected float32\[height, width\]"):
        _run(run_of(backend), d=np.full((H, W, 4), 0.5, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_depth_outside_0_to_1_is_refused_naming_where(backend):
    da = _inputs()["da"]
    da[1, 2, 3] = 1.5
    with pytest.raises((TypeError, BufferError), match=r"'da' .* holds 1.5 at \[1, 2, 3\]: .*"):
        _run(run_of(backend), da=da)
