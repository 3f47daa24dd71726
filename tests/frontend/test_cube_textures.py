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

from kvdsl import interp
from kvdsl.frontend import parse
from kvdsl.interp import OutOfBounds
from kvdsl.runtime import BufferError
from tests.helpers.backends import backend_run
from tests.helpers.textures import (
    BACKENDS,
    ENTRY,
    GATHER_ORDER,
    assert_compilers_take_it_and_its_print,
    read_back,
    run_of,
)
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


def _run(run, **given) -> np.ndarray:
    return run(parse(TEXT), _inputs()[0] | given, {}, (N // 64, 1, 1))["out"]


def test_the_text_prints_back_as_it_reads():
    read_back(TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cube_textures_sample_in_a_direction_as_numpy_says(backend, request):
    want = _want()
    assert 0 < want[2::K].sum() < N  # both outcomes of the compare
    np.testing.assert_array_equal(_run(backend_run(backend, request)), want)


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cube_of_faces_not_square_is_refused_naming_its_axes(backend):
    sky = np.full((6, S, S + 1, 4), 0.5, np.float32)
    with pytest.raises((TypeError, BufferError), match=r"expected float32\[6, size, size, 4\]"):
        _run(run_of(backend), sky=sky)


#: Gathers of cubes: the four texels a bilinear filter reads in a direction, those past the
#: face's edge on the next face.
GATHER = (
    HEAD
    + ENTRY
    + "  let i = gid.x;\n  let o = i * 4u;\n  let p = dirs[i].xyz;\n  let r = dirs[i].w;\n"
    + "  gathered[o] = textureGather(2, sky, s, p);\n"
    + "  gathered[o + 1u] = textureGather(0u, skies, s, p, i % 2u);\n"
    + "  gathered[o + 2u] = textureGatherCompare(shadow, sc, p, r);\n"
    + "  gathered[o + 3u] = textureGather(shadow, s, p);\n  out[i] = 1.0;\n}\n"
).replace(
    "var<storage, read_write> out: array<f32>;\n",
    "var<storage, read_write> out: array<f32>;\n"
    "@group(0) @binding(8) var<storage, read_write> gathered: array<vec4<f32>>;\n",
)


def _footprints() -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Directions whose footprints reach past a face's edge (never two edges: a corner), and
    for each the face and texel (x, y) of its four texels in WGSL's order, found by the
    geometry of the faces: a texel past an edge is the one its centre's direction points at."""
    rng = np.random.default_rng(4446)
    face = rng.integers(0, 6, N)
    i0, j0 = rng.integers(-1, S, N), rng.integers(-1, S, N)
    at_edge = ((i0 == -1) | (i0 == S - 1)) & ((j0 == -1) | (j0 == S - 1))
    j0 = np.where(at_edge, rng.integers(0, S - 1, N), j0)  # past one edge at most: no corner

    def inside(c):  # a point of (c + 0.5 + f) / S, f away from a texel's edges, on the face
        low = np.where(c == -1, 0.6, 0.2)
        high = np.where(c == S - 1, 0.4, 0.8)
        return (c + 0.5 + rng.uniform(low, high)) / S

    s, t = inside(i0), inside(j0)
    basis = [np.array([f[k] for f in FACES], np.float64) for k in range(3)]
    toward = basis[0][face] + (2 * s - 1)[:, None] * basis[1][face]
    toward += (2 * t - 1)[:, None] * basis[2][face]
    texels = []
    for di, dj in GATHER_ORDER:
        i, j = i0 + di, j0 + dj
        centre = basis[0][face] + (2 * (i + 0.5) / S - 1)[:, None] * basis[1][face]
        centre += (2 * (j + 0.5) / S - 1)[:, None] * basis[2][face]
        # The face of the largest component: its centre's direction; s and t along its axes.
        k = np.argmax(np.abs(centre), axis=1)
        f2 = np.argmax(
            np.stack([centre @ np.array(FACES[q][0], np.float64) for q in range(6)], axis=1), axis=1
        )
        big = np.abs(centre[np.arange(N), k])
        s2 = (centre * basis[1][f2]).sum(1) / (2 * big) + 0.5
        t2 = (centre * basis[2][f2]).sum(1) / (2 * big) + 0.5
        texels.append((f2, np.floor(s2 * S).astype(int), np.floor(t2 * S).astype(int)))
    return toward * rng.uniform(0.5, 3.0, (N, 1)), texels


@pytest.mark.parametrize("backend", BACKENDS)
def test_cube_gathers_reach_the_next_face_as_numpy_says(backend, request):
    k = read_back(GATHER)
    toward, texels = _footprints()
    given, _ = _inputs()
    given["dirs"][:, :3] = toward
    given["gathered"] = np.full((N * 4, 4), np.nan, np.float32)
    got = backend_run(backend, request)(k, given, {}, (N // 64, 1, 1))
    ref = given["dirs"][:, 3:4]
    i = np.arange(N)
    sky, skies, shadow = given["sky"], given["skies"], given["shadow"]
    f = np.float32
    want = np.stack(
        [
            np.stack([sky[fa, y, x, 2] for fa, x, y in texels], 1),
            np.stack([skies[i % 2, fa, y, x, 0] for fa, x, y in texels], 1),
            np.stack([(ref[:, 0] < shadow[fa, y, x]).astype(f) for fa, x, y in texels], 1),
            np.stack([shadow[fa, y, x] for fa, x, y in texels], 1),
        ],
        axis=1,
    )
    np.testing.assert_array_equal(got["gathered"], want.reshape(N * 4, 4))
    assert refused_by_compilers({"text": GATHER}) == {}


def test_a_gather_at_a_cubes_corner_is_out_of_bounds():
    k = parse(GATHER)
    given, _ = _inputs()
    given["dirs"][:, :3] = [1.0, 0.99, 0.99]  # +X, by its corner with +Y and -Z
    given["gathered"] = np.full((N * 4, 4), np.nan, np.float32)
    with pytest.raises(OutOfBounds, match=r"sky: the texels gathered .* take the cube's corner"):
        interp.run(k, given, {}, (N // 64, 1, 1))
