"""``texture_cube<T>``, ``texture_cube_array<T>``, ``texture_depth_cube`` and
``texture_depth_cube_array``: ``textureSampleLevel`` and ``textureSampleCompareLevel`` in a
direction (the face its major axis picks, the face's texel by Vulkan's table, through WebGPU's
default sampler: nearest, clamped), ``textureDimensions`` (a face's size) and
``textureNumLayers``, on the interpreter and on the GPU (llvmpipe will do) over random non-zero
texels and directions into a poisoned output, to what numpy says; Tint and naga take the text
and its print; what WGSL refuses of them is refused as Tint refuses it."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import UnsupportedError, WgslTypeError, parse
from kvdsl.runtime import BufferError, tint_check
from tests.helpers.wgsl import refused_by_compilers

N, K, S, L = 128, 6, 4, 2  # invocations, outputs each, a face's size, the arrays' layers
HEAD = (
    "@group(0) @binding(0) var<storage, read> dirs: array<vec4<f32>>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(2) var sky: texture_cube<f32>;\n"
    "@group(0) @binding(3) var skies: texture_cube_array<f32>;\n"
    "@group(0) @binding(4) var shadow: texture_depth_cube;\n"
    "@group(0) @binding(5) var shadows: texture_depth_cube_array;\n"
    "@group(0) @binding(6) var s: sampler;\n"
    "@group(0) @binding(7) var sc: sampler_comparison;\n"
)
ENTRY = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
BODY = (
    "  let i = gid.x;\n  let o = i * 6u;\n  let p = dirs[i].xyz;\n"
    "  let layer = i32(i % 4u) - 1;\n  let r = dirs[i].w;\n"
    "  out[o] = textureSampleLevel(sky, s, p, 0.0).y;\n"
    "  out[o + 1u] = textureSampleLevel(skies, s, p, layer, 0.0).w;\n"
    "  out[o + 2u] = textureSampleCompareLevel(shadow, sc, p, r);\n"
    "  out[o + 3u] = textureSampleLevel(shadow, s, p, 0);\n"
    "  out[o + 4u] = textureSampleCompareLevel(shadows, sc, p, u32(i % 2u), r);\n"
    "  out[o + 5u] = f32(textureDimensions(sky).x * 100u + textureDimensions(shadows, 0).y * 10u\n"
    "    + textureNumLayers(skies) + textureNumLayers(shadows));\n"
)
TEXT = HEAD + ENTRY + BODY + "}\n"

#: Per face, +X, -X, +Y, -Y, +Z, -Z: the direction of its centre and the directions its face
#: coordinates s and t grow in (Vulkan's cube map face selection table, read backwards).
FACES = (
    ((1, 0, 0), (0, 0, -1), (0, -1, 0)),
    ((-1, 0, 0), (0, 0, 1), (0, -1, 0)),
    ((0, 1, 0), (1, 0, 0), (0, 0, 1)),
    ((0, -1, 0), (1, 0, 0), (0, 0, -1)),
    ((0, 0, 1), (1, 0, 0), (0, -1, 0)),
    ((0, 0, -1), (-1, 0, 0), (0, -1, 0)),
)


def _inputs() -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...]]:
    """The host's arrays, and the face and texel (x, y) each direction points at: a direction
    through a point of that texel at least 0.2 of a texel from its edges, scaled."""
    rng = np.random.default_rng(4441)
    face, x, y = rng.integers(0, 6, N), rng.integers(0, S, N), rng.integers(0, S, N)
    s = (x + rng.uniform(0.2, 0.8, N)) / S
    t = (y + rng.uniform(0.2, 0.8, N)) / S
    centre, ds, dt = (np.array([f[k] for f in FACES], np.float64)[face] for k in range(3))
    toward = centre + (2 * s - 1)[:, None] * ds + (2 * t - 1)[:, None] * dt
    toward *= rng.uniform(0.5, 3.0, (N, 1))
    ref = rng.uniform(0.05, 0.95, (N, 1))
    given = {
        "dirs": np.concatenate([toward, ref], axis=1).astype(np.float32),
        "out": np.full(N * K, np.nan, np.float32),
        "sky": rng.uniform(0.5, 4.0, (6, S, S, 4)).astype(np.float32),
        "skies": rng.uniform(0.5, 4.0, (L, 6, S, S, 4)).astype(np.float32),
        "shadow": rng.uniform(0.05, 0.95, (6, S, S)).astype(np.float32),
        "shadows": rng.uniform(0.05, 0.95, (L, 6, S, S)).astype(np.float32),
    }
    return given, (face, x, y)


def _want() -> np.ndarray:
    t, (face, x, y) = _inputs()
    i, f = np.arange(N), np.float32
    ref = t["dirs"][:, 3]
    layer = np.clip(i % 4 - 1, 0, L - 1)  # the array index, clamped to the layers
    want = np.stack(
        [
            t["sky"][face, y, x, 1],
            t["skies"][layer, face, y, x, 3],
            (ref < t["shadow"][face, y, x]).astype(f),
            t["shadow"][face, y, x],
            (ref < t["shadows"][i % 2, face, y, x]).astype(f),
            np.full(N, S * 100 + S * 10 + L + L, f),
        ],
        axis=1,
    )
    return want.astype(f).reshape(-1)


def _run(backend, text: str = TEXT, **given) -> np.ndarray:
    return backend.run(parse(text), _inputs()[0] | given, {}, (N // 64, 1, 1))["out"]


def test_the_text_prints_back_as_it_reads():
    k = parse(TEXT)
    assert parse(emit(k)) == k


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_cube_textures_sample_in_a_direction_as_numpy_says(backend, request):
    if backend == "gpu":
        request.getfixturevalue("gpu")
    want = _want()
    assert 0 < want[2::K].sum() < N  # both outcomes of the compare
    np.testing.assert_array_equal(_run(interp if backend == "interp" else runtime), want)


def test_tint_and_naga_take_the_text_and_its_print():
    assert refused_by_compilers({"text": TEXT, "printed": emit(parse(TEXT))}) == {}


@pytest.mark.parametrize("backend", ["interp", "gpu"])
def test_a_cube_of_faces_not_square_is_refused_naming_its_axes(backend):
    sky = np.full((6, S, S + 1, 4), 0.5, np.float32)
    with pytest.raises((TypeError, BufferError), match=r"expected float32\[6, size, size, 4\]"):
        _run(interp if backend == "interp" else runtime, sky=sky)


def _k(body: str) -> str:
    return HEAD + ENTRY + "  let i = gid.x;\n" + body + "\n  out[i] = 1.0;\n}\n"


#: What WGSL refuses: name -> (text, the words kvdsl's WgslTypeError holds, Tint's)
REFUSED = {
    "a_cube_loaded": (
        _k("  let v = textureLoad(sky, vec2<u32>(0u), 0);"),
        "no matching call to 'textureLoad(texture_cube<f32>",
        "no matching call to 'textureLoad(texture_cube<f32>",
    ),
    "a_cube_sampled_at_2d_coordinates": (
        _k("  let v = textureSampleLevel(sky, s, vec2<f32>(0.5), 0.0);"),
        "expected vec3<f32>",
        "no matching call to 'textureSampleLevel(texture_cube<f32>, sampler, vec2<f32>",
    ),
    "a_cube_array_without_its_index": (
        _k("  let v = textureSampleLevel(skies, s, vec3<f32>(0.5), 0.0);"),
        "is given no array index",
        "no matching call to 'textureSampleLevel(texture_cube_array<f32>, sampler, vec3<f32>",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_what_wgsl_refuses_of_them_is_refused_as_tint_refuses_it(name):
    text, ours, tints = REFUSED[name]
    with pytest.raises(WgslTypeError) as err:
        parse(text, f"{name}.wgsl")
    assert ours in str(err.value)
    assert tints in tint_check({name: text})[name]


def test_gathering_of_a_depth_cube_is_outside_the_subset_and_tint_takes_it():
    text = _k("  let v = textureGatherCompare(shadow, sc, vec3<f32>(0.5, 1.0, 0.25), 0.5);")
    with pytest.raises(UnsupportedError, match="textureGatherCompare of a texture_depth_cube"):
        parse(text)
    assert tint_check({"gather": text}) == {"gather": None}
