"""``texture_3d<T>`` (``textureLoad`` at ``vec3`` coordinates, ``textureDimensions`` a
``vec3<u32>``), 1-D textures (sampled and storage, at a scalar coordinate) and ``sampler`` (``textureSampleLevel`` of a ``texture_2d<f32>`` or
``texture_3d<f32>`` through WebGPU's default sampler: nearest texel, coordinates clamped to the
edge), in the entry point and through a helper's parameters: on the interpreter and on the GPU
(llvmpipe will do) over random non-zero texels into a poisoned output, to what numpy says; Tint
and naga take the text and its print; what WGSL refuses of them is refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds
from kvdsl.runtime import tint_check
from tests.helpers.backends import assert_as_numpy, backend_run
from tests.helpers.textures import (
    BACKENDS,
    ENTRY,
    assert_compilers_take_it_and_its_print,
    assert_refused_in_words,
    indices_and_poison,
    read_back,
)

N = 128
HEAD = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var vol: texture_3d<f32>;\n"
    "@group(0) @binding(3) var ids: texture_3d<u32>;\n"
    "@group(0) @binding(4) var img: texture_2d<f32>;\n"
    "@group(0) @binding(5) var s: sampler;\n"
)
HELPERS = (
    "fn near(t: texture_3d<f32>, sm: sampler, p: vec3<f32>) -> vec4<f32> {\n"
    "  return textureSampleLevel(t, sm, p, 0.0);\n}\n"
    "fn id_at(t: texture_3d<u32>, c: vec3<u32>) -> u32 { return textureLoad(t, c, 0u).z; }\n"
)
BODY = (
    "  let i = gid.x;\n  let d = textureDimensions(vol);\n"
    "  let c = vec3<u32>(a[i] % d.x, (a[i] / 8u) % d.y, (a[i] / 64u) % d.z);\n"
    "  let p = (vec3<f32>(c) + 0.5) / vec3<f32>(d);\n"
    "  let uv = (vec2<f32>(f32(a[i] % 11u), f32(a[i] % 13u)) - 1.5) / vec2<f32>(7.0, 6.0);\n"
    "  out[i] = textureLoad(vol, c, 0).x + near(vol, s, p).w * 2.0\n"
    "    + f32(id_at(ids, c) + textureDimensions(ids, 0).z)\n"
    "    + textureSampleLevel(img, s, uv, 3.0).y * 4.0;\n"
)
TEXT = HEAD + HELPERS + ENTRY + BODY + "}\n"


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4406)
    return indices_and_poison(rng, N, N) | {
        "vol": rng.uniform(0.5, 4.0, (3, 5, 6, 4)).astype(np.float32),  # depth, height, width
        "ids": rng.integers(1, 1000, (2, 4, 3, 4), dtype=np.uint32),
        "img": rng.uniform(0.5, 4.0, (6, 7, 4)).astype(np.float32),
    }


def _want() -> np.ndarray:
    t = _inputs()
    a = t["a"].astype(np.int64)
    x, y, z = a % 6, (a // 8) % 5, (a // 64) % 3
    ids = t["ids"][z % 2, y % 4, x % 3, 2]  # ids is 3 x 4 x 2: the coordinates wrap there
    f = np.float32
    ui = np.clip(a % 11 - 2, 0, 6)  # the texel whose centre uv is, clamped to the edge
    vi = np.clip(a % 13 - 2, 0, 5)
    vol = t["vol"][z, y, x]
    got = vol[:, 0] + vol[:, 3] * f(2) + (ids + 2).astype(f) + t["img"][vi, ui, 1] * f(4)
    return got.astype(f)


def _run(backend, text: str = TEXT) -> np.ndarray:
    return backend.run(parse(text), _inputs(), {}, (N // 64, 1, 1))["out"]


#: The text with the coordinates of ids wrapped to its size (3 x 4 x 2).
WRAPPED = TEXT.replace("ids, c)", "ids, c % vec3(3u, 4u, 2u))")


def test_the_interpreter_loads_and_samples_as_numpy_says():
    read_back(WRAPPED)
    np.testing.assert_array_equal(_run(interp, WRAPPED), _want())


def test_the_gpu_loads_and_samples_as_numpy_says(gpu):
    np.testing.assert_array_equal(_run(runtime, WRAPPED), _want())


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(WRAPPED)


def test_a_texel_outside_a_texture_3d_is_out_of_bounds():
    with pytest.raises(OutOfBounds, match=r"ids texel \(\d+, \d+, \d+\) is out of bounds"):
        _run(interp)  # ids is smaller than vol: c runs past it


def test_a_texture_3d_given_as_a_2d_array_is_refused_naming_its_axes():
    k = parse(TEXT)
    bufs = _inputs() | {"vol": np.zeros((5, 6, 4), np.float32)}
    with pytest.raises(TypeError, match=r"expected float32\[depth, height, width, 4\]"):
        interp.run(k, bufs, {}, (N // 64, 1, 1))


#: 1-D textures: a sampled one loaded at a scalar coordinate and sampled, sized by a u32; a
#: storage one stored at an i32 coordinate.
LINE = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var lut: texture_1d<f32>;\n"
    "@group(0) @binding(3) var hist: texture_storage_1d<r32uint, write>;\n"
    "@group(0) @binding(4) var s: sampler;\n"
    + ENTRY
    + "  let n = textureDimensions(lut);\n"
    + "  let u = (f32(a[gid.x] % 41u) - 2.5) / f32(n);\n"
    + "  out[gid.x] = textureLoad(lut, a[gid.x] % n, 0).z + textureSampleLevel(lut, s, u, 0.0).x\n"
    + "    * 10.0;\n"
    + "  if (gid.x < textureDimensions(hist)) {\n"
    + "    textureStore(hist, i32(gid.x), vec4<u32>(gid.x * 7u + a[gid.x]));\n  }\n}\n"
)


def _ran(backend: str, request, text: str, seed: int, **given) -> tuple[dict, dict]:
    """What ``text`` leaves, run on ``backend`` over ``a`` (N random u32 below 1000), ``out`` (N
    f32, poisoned) and ``given`` (a name and the shape of its random f32 texels, or its array),
    drawn in that order from the seed ``seed``; and those buffers. ``text`` reads back from its
    print and Tint takes it."""
    k = read_back(text)
    assert tint_check({"text": text}) == {"text": None}
    rng = np.random.default_rng(seed)
    bufs = {"a": rng.integers(1, 1000, N, dtype=np.uint32), "out": np.full(N, np.nan, np.float32)}
    for name, value in given.items():
        shaped = isinstance(value, tuple)
        bufs[name] = rng.uniform(0.5, 4.0, value).astype(np.float32) if shaped else value
    return backend_run(backend, request)(k, bufs, {}, (N // 64, 1, 1)), bufs


@pytest.mark.parametrize("backend", BACKENDS)
def test_1d_textures_load_sample_and_store_as_numpy_says(backend, request):
    hist = np.full((20, 1), 0xDEADBEEF, np.uint32)
    got, given = _ran(backend, request, LINE, 4410, lut=(37, 4), hist=hist)
    a, lut = given["a"], given["lut"]
    near = np.clip(a.astype(np.int64) % 41 - 3, 0, 36)  # the texel u is in, clamped
    want = lut[a % 37, 2] + lut[near, 0] * np.float32(10)
    assert_as_numpy(got["out"], want, backend)
    np.testing.assert_array_equal(got["hist"].reshape(-1), np.arange(20) * 7 + a[:20])


#: texture_2d_array: a texel of a layer loaded (the array index before the level), sampled (the
#: index clamped to the layers, as WGSL's sampling builtins take it), the layers counted.
LAYERS = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var layers: texture_2d_array<f32>;\n"
    "@group(0) @binding(3) var s: sampler;\n"
    + ENTRY
    + "  let d = textureDimensions(layers);\n  let n = textureNumLayers(layers);\n"
    + "  let c = vec2<u32>(a[gid.x] % d.x, (a[gid.x] / 8u) % d.y);\n"
    + "  let uv = (vec2<f32>(c) + 0.5) / vec2<f32>(d);\n"
    + "  out[gid.x] = textureLoad(layers, c, a[gid.x] % n, 0).y\n"
    + "    + textureSampleLevel(layers, s, uv, i32(a[gid.x] % 7u) - 1, 0.0).w * 10.0\n"
    + "    + f32(n) * 100.0;\n}\n"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_texture_2d_array_loads_samples_and_counts_its_layers_as_numpy_says(backend, request):
    got, given = _ran(backend, request, LAYERS, 4413, layers=(3, 5, 6, 4))  # layers, height, width
    a, layers = given["a"], given["layers"]
    x, y, i = a % 6, (a // 8) % 5, a.astype(np.int64)
    f = np.float32
    want = layers[i % 3, y, x, 1] + layers[np.clip(i % 7 - 1, 0, 2), y, x, 3] * f(10) + f(300)
    assert_as_numpy(got["out"], want, backend)


def test_a_texture_2d_array_without_its_array_index_is_refused_as_tint_refuses_it():
    text = LAYERS.replace("c, a[gid.x] % n, 0)", "c, 0)")
    tints = "no matching call to 'textureLoad(texture_2d_array<f32>"
    assert_refused_in_words("t", text, "is given no array index", tints)
