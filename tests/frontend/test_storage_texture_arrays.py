"""``texture_storage_2d_array<format, access>``: ``textureLoad(t, coords, array_index)`` of a
``read`` or ``read_write`` one, ``textureStore(t, coords, array_index, value)`` of a ``write``
or ``read_write`` one, ``textureDimensions`` and ``textureNumLayers``, on the interpreter and on
the GPU (llvmpipe will do) over random non-zero texels into poisoned outputs, to what numpy
says; Tint and naga take the text and its print; a layer outside the texture is out of bounds
in the interpreter, a store without its array index refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds
from tests.helpers.backends import backend_run
from tests.helpers.textures import (
    BACKENDS,
    assert_compilers_take_it_and_its_print,
    assert_refused_in_words,
    indices_and_poison,
    read_back,
)

N, H, W, L = 64, 4, 5, 3  # invocations; the textures' height, width and layers
TEXT = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var src: texture_storage_2d_array<rgba32float, read>;\n"
    "@group(0) @binding(3) var dst: texture_storage_2d_array<r32uint, write>;\n"
    "@group(0) @binding(4) var acc: texture_storage_2d_array<r32float, read_write>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n  let d = textureDimensions(src);\n  let n = textureNumLayers(src);\n"
    "  if (i >= d.x * d.y * n) { return; }\n"
    "  let c = vec2<u32>(i % d.x, (i / d.x) % d.y);\n  let layer = i / (d.x * d.y);\n"
    "  out[i] = textureLoad(src, c, layer).z + f32(a[i] % n) * 10.0 + f32(n * 100u + d.x);\n"
    "  textureStore(dst, vec2<i32>(c), i32(layer), vec4<u32>(a[i] * 3u + 1u));\n"
    "  let old = textureLoad(acc, c, layer);\n"
    "  textureStore(acc, c, layer, old * 2.0 + vec4<f32>(1.0));\n}\n"
)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4443)
    return indices_and_poison(rng, N, N) | {
        "src": rng.uniform(0.5, 4.0, (L, H, W, 4)).astype(np.float32),
        "dst": np.full((L, H, W, 1), 0xDEADBEEF, np.uint32),
        "acc": rng.uniform(0.5, 4.0, (L, H, W, 1)).astype(np.float32),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_storage_texture_arrays_load_store_and_count_as_numpy_says(backend, request):
    k = read_back(TEXT)
    t = _inputs()
    got = backend_run(backend, request)(k, t, {}, (1, 1, 1))
    texels = H * W * L
    a = t["a"][:texels].astype(np.int64)
    f = np.float32
    want = np.full(N, np.nan, f)
    want[:texels] = t["src"][..., 2].reshape(-1) + (a % L).astype(f) * f(10) + f(L * 100 + W)
    np.testing.assert_array_equal(got["out"], want)
    np.testing.assert_array_equal(got["dst"].reshape(-1), (a * 3 + 1).astype(np.uint32))
    np.testing.assert_array_equal(got["acc"], t["acc"] * f(2) + f(1))


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(TEXT)


def test_a_layer_outside_the_texture_is_out_of_bounds():
    text = TEXT.replace("textureLoad(src, c, layer)", "textureLoad(src, c, layer + 1u)")
    with pytest.raises(OutOfBounds, match=r"src texel \(\d+, \d+, 3\) is out of bounds .*layers 3"):
        interp.run(parse(text), _inputs(), {}, (1, 1, 1))


def test_a_store_without_its_array_index_is_refused_as_tint_refuses_it():
    text = TEXT.replace("vec2<i32>(c), i32(layer), ", "vec2<i32>(c), ")
    tints = "no matching call to 'textureStore(texture_storage_2d_array<r32uint, write>"
    assert_refused_in_words("t", text, "is given no array index", tints)
