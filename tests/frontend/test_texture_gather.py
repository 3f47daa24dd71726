"""``textureGather`` (the four texels a bilinear filter reads, one channel of each, in WGSL's
order ``(umin, vmax), (umax, vmax), (umax, vmin), (umin, vmin)``, each clamped to the edge) of
``texture_2d<T>``, ``texture_2d_array<T>`` and ``texture_depth_2d``, and ``textureSampleGrad``
(through WebGPU's default sampler and one mip level: the texel ``textureSampleLevel`` reads at
level 0, whatever the gradients), on the interpreter and on the GPU (llvmpipe will do) over
random non-zero texels into a poisoned output, to what numpy says; Tint and naga take the text
and its print; what WGSL refuses of them is refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl.frontend import parse
from tests.helpers.backends import backend_run
from tests.helpers.textures import (
    BACKENDS,
    ENTRY,
    assert_compilers_take_it_and_its_print,
    assert_refused_in_words,
    footprint,
    indices_and_poison,
    read_back,
    refused_kernel,
)
from tests.helpers.wgsl import refused_by_compilers

N, H, W, L = 128, 5, 7, 3  # invocations; the textures' height, width and layers
HEAD = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;\n"
    "@group(0) @binding(2) var img: texture_2d<f32>;\n"
    "@group(0) @binding(3) var ids: texture_2d_array<u32>;\n"
    "@group(0) @binding(4) var d: texture_depth_2d;\n"
    "@group(0) @binding(5) var s: sampler;\n"
    "const C = 3u;\n"
)
BODY = (
    "  let i = gid.x;\n  let o = i * 4u;\n  let v = a[i];\n"
    "  let dims = vec2<f32>(textureDimensions(img));\n"
    "  let near = (vec2<f32>(f32(v % 9u), f32((v / 9u) % 8u)) - 1.25) / dims;\n"
    "  let uv = (vec2<f32>(f32(v % 11u), f32(v % 13u)) - 1.5) / dims;\n"
    "  out[o] = textureGather(1, img, s, near);\n"
    "  out[o + 1u] = vec4<f32>(textureGather(C, ids, s, near, i32(v % 5u) - 1));\n"
    "  out[o + 2u] = textureGather(d, s, near);\n"
    "  out[o + 3u] = textureSampleGrad(img, s, uv, vec2<f32>(0.3), vec2<f32>(-0.2, 0.1));\n"
)
TEXT = HEAD + ENTRY + BODY + "}\n"


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4442)
    return indices_and_poison(rng, N, (N * 4, 4)) | {
        "img": rng.uniform(0.5, 4.0, (H, W, 4)).astype(np.float32),
        "ids": rng.integers(1, 1000, (L, H, W, 4), dtype=np.uint32),
        "d": rng.uniform(0.05, 0.95, (H, W)).astype(np.float32),
    }


def _want() -> np.ndarray:
    t = _inputs()
    a = t["a"].astype(np.int64)
    texels = footprint(a % 9 - 2, (a // 9) % 8 - 2, W, H)
    layer = np.clip(a % 5 - 1, 0, L - 1)  # the array index, clamped to the layers

    def gathered(texel):
        return np.stack([texel(x, y) for x, y in texels], axis=1).astype(np.float32)

    ui, vi = np.clip(a % 11 - 2, 0, W - 1), np.clip(a % 13 - 2, 0, H - 1)  # the nearest texel
    want = np.stack(
        [
            gathered(lambda x, y: t["img"][y, x, 1]),
            gathered(lambda x, y: t["ids"][layer, y, x, 3]),
            gathered(lambda x, y: t["d"][y, x]),
            t["img"][vi, ui],
        ],
        axis=1,
    )
    return want.reshape(N * 4, 4)


def test_the_text_prints_back_as_it_reads():
    read_back(TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gathers_and_gradient_samples_are_as_numpy_says(backend, request):
    got = backend_run(backend, request)(parse(TEXT), _inputs(), {}, (N // 64, 1, 1))["out"]
    np.testing.assert_array_equal(got, _want())


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(TEXT)


def _k(body: str) -> str:
    return refused_kernel(HEAD, body, "vec4<f32>(1.0)")


#: Texel offsets (a const vecN<i32>, -8 to 7, added to the texel coordinates before the clamp)
#: of textureSampleLevel, textureSampleCompareLevel, textureGather and textureGatherCompare;
#: textureSampleBaseClampToEdge (of the one level, nearest: the texel textureSampleLevel reads)
#: and textureNumLevels (one level).
OFFSETS = (
    HEAD
    + "@group(0) @binding(6) var vol: texture_3d<f32>;\n"
    + "@group(0) @binding(7) var sc: sampler_comparison;\n"
    + ENTRY
    + "  let i = gid.x;\n  let o = i * 4u;\n  let v = a[i];\n"
    + "  let dims = vec2<f32>(textureDimensions(img));\n"
    + "  let near = (vec2<f32>(f32(v % 9u), f32((v / 9u) % 8u)) - 1.25) / dims;\n"
    + "  let uv = (vec2<f32>(f32(v % 11u), f32(v % 13u)) - 1.5) / dims;\n"
    + "  let r = f32(v % 97u) / 97.0;\n"
    + "  out[o] = textureSampleLevel(img, s, uv, 0.0, vec2<i32>(2, -1))\n"
    + "    + textureSampleBaseClampToEdge(img, s, uv) * 16.0;\n"
    + "  out[o + 1u] = textureGather(2, img, s, near, vec2(-1, i32(C)));\n"
    + "  out[o + 2u] = textureGatherCompare(d, sc, near, r, vec2<i32>(1, -2));\n"
    + "  out[o + 3u] = vec4<f32>(textureSampleCompareLevel(d, sc, uv, r, vec2<i32>(-8, 7)),\n"
    + "    textureSampleLevel(vol, s, vec3<f32>(uv, 0.5), 0.0, vec3<i32>(1, 0, -1)).x,\n"
    + "    f32(textureNumLevels(img) + textureNumLevels(d) * 10u), 0.0);\n}\n"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_texel_offsets_base_clamp_and_levels_are_as_numpy_says(backend, request):
    k = read_back(OFFSETS)
    rng = np.random.default_rng(4447)
    given = _inputs() | {"vol": rng.uniform(0.5, 4.0, (3, H, W, 4)).astype(np.float32)}
    got = backend_run(backend, request)(k, given, {}, (N // 64, 1, 1))["out"]
    a = given["a"].astype(np.int64)
    img, d, vol, f = given["img"], given["d"], given["vol"], np.float32
    ui, vi = a % 11 - 2, a % 13 - 2  # the nearest texel, before the clamp
    ref = (a % 97).astype(f) / f(97)

    def clamp(x, n):
        return np.clip(x, 0, n - 1)

    def gathered(texel, du, dv):
        texels = footprint(a % 9 - 2 + du, (a // 9) % 8 - 2 + dv, W, H)
        return np.stack([texel(x, y) for x, y in texels], axis=1).astype(f)

    base = img[clamp(vi, H), clamp(ui, W)]
    want = np.stack(
        [
            img[clamp(vi - 1, H), clamp(ui + 2, W)] + base * f(16),
            gathered(lambda x, y: img[y, x, 2], -1, 3),
            gathered(lambda x, y: (ref < d[y, x]).astype(f), 1, -2),
            np.stack(
                [
                    (ref < d[clamp(vi + 7, H), clamp(ui - 8, W)]).astype(f),
                    vol[clamp(np.full(N, 0), 3), clamp(vi, H), clamp(ui + 1, W), 0],
                    np.full(N, 11, f),
                    np.zeros(N, f),
                ],
                axis=1,
            ),
        ],
        axis=1,
    )
    np.testing.assert_array_equal(got, want.reshape(N * 4, 4))
    assert refused_by_compilers({"offsets": OFFSETS}) == {}


#: What WGSL refuses of offsets, in Tint's words.
OFFSETS_REFUSED = {
    "an_offset_past_7": (
        _k("  let g = textureSampleLevel(img, s, vec2<f32>(0.5), 0.0, vec2<i32>(8, 0));"),
        "each component of the offset argument must be at least -8 and at most 7. offset "
        "component 0 is 8",
    ),
    "an_offset_of_no_const": (
        _k("  let g = textureGather(0, img, s, vec2<f32>(0.5), vec2<i32>(i32(i)));"),
        "the 'offset' argument of 'textureGather' must be a const-expression",
    ),
}


@pytest.mark.parametrize("name", OFFSETS_REFUSED)
def test_what_wgsl_refuses_of_offsets_is_refused_as_tint_refuses_it(name):
    text, words = OFFSETS_REFUSED[name]
    assert_refused_in_words(name, text, words, words)
