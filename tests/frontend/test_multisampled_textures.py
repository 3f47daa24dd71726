"""``texture_multisampled_2d<T>`` and ``texture_depth_multisampled_2d``: ``textureLoad(t,
coords, sample_index)`` (a ``vec4<T>``, an ``f32`` of the depth texture), ``textureNumSamples``
and ``textureDimensions``, on the interpreter and on the GPU (llvmpipe will do; the runtime
writes each sample with a render pass) over random non-zero texels into a poisoned output, to
what numpy says; Tint and naga take the text and its print; a sample index past the samples is
out of bounds in the interpreter; a count of samples WebGPU does not make, or a value the
texture's 16-bit format does not hold, is refused by name."""

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
    assert_compilers_take_it_and_its_print,
    assert_refused_in_words,
    indices_and_poison,
    read_back,
    run_of,
)

N, S, H, W = 128, 4, 5, 7  # invocations; samples, height and width
TEXT = (
    "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;\n"
    "@group(0) @binding(2) var ms: texture_multisampled_2d<f32>;\n"
    "@group(0) @binding(3) var ids: texture_multisampled_2d<u32>;\n"
    "@group(0) @binding(4) var offs: texture_multisampled_2d<i32>;\n"
    "@group(0) @binding(5) var d: texture_depth_multisampled_2d;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n  let o = i * 3u;\n  let v = a[i];\n  let dims = textureDimensions(ms);\n"
    "  let c = vec2<u32>(v % dims.x, (v / 8u) % dims.y);\n"
    "  let k = (v / 64u) % textureNumSamples(ms);\n"
    "  out[o] = textureLoad(ms, c, k);\n"
    "  out[o + 1u] = vec4<f32>(textureLoad(ids, vec2<i32>(c), i32(k))) + vec4<f32>(textureLoad(offs, c, k));\n"
    "  out[o + 2u] = vec4<f32>(textureLoad(d, c, k), f32(textureNumSamples(d)),\n"
    "    vec2<f32>(textureDimensions(d)));\n}\n"
)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4445)
    return indices_and_poison(rng, N, (N * 3, 4)) | {
        # f16 values, as rgba16float holds them
        "ms": rng.uniform(0.5, 4.0, (S, H, W, 4)).astype(np.float16).astype(np.float32),
        "ids": rng.integers(1, 60000, (S, H, W, 4), dtype=np.uint32),
        "offs": rng.integers(-30000, 30000, (S, H, W, 4), dtype=np.int32),
        "d": rng.uniform(0.05, 0.95, (S, H, W)).astype(np.float32),
    }


def _want() -> np.ndarray:
    t = _inputs()
    a = t["a"].astype(np.int64)
    x, y, k = a % W, (a // 8) % H, (a // 64) % S
    f = np.float32
    whole = t["ids"][k, y, x].astype(f) + t["offs"][k, y, x].astype(f)
    depth = np.stack([t["d"][k, y, x], np.full(N, S, f), np.full(N, W, f), np.full(N, H, f)], 1)
    return np.stack([t["ms"][k, y, x], whole, depth], axis=1).reshape(N * 3, 4)


def _run(run, text: str = TEXT, **given) -> np.ndarray:
    return run(parse(text), _inputs() | given, {}, (N // 64, 1, 1))["out"]


def test_the_text_prints_back_as_it_reads():
    read_back(TEXT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_multisampled_textures_load_each_sample_as_numpy_says(backend, request):
    np.testing.assert_array_equal(_run(backend_run(backend, request)), _want())


def test_tint_and_naga_take_the_text_and_its_print():
    assert_compilers_take_it_and_its_print(TEXT)


def test_a_sample_past_the_samples_is_out_of_bounds():
    text = TEXT.replace("textureLoad(ms, c, k)", "textureLoad(ms, c, k + 1u)")
    with pytest.raises(OutOfBounds, match=r"ms texel \(\d+, \d+, 4\) is out of bounds .*samples 4"):
        _run(interp.run, text)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_count_of_samples_webgpu_does_not_make_is_refused_by_name(backend):
    ms = _inputs()["ms"][:2]
    with pytest.raises((TypeError, BufferError), match=r"'ms' .* is given 2 samples a texel: .* 4"):
        _run(run_of(backend), ms=ms)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_the_16_bit_format_does_not_hold_is_refused_by_name(backend):
    ids = _inputs()["ids"]
    ids[1, 2, 3, 0] = 70000
    with pytest.raises((TypeError, BufferError), match=r"'ids' .* holds 70000 at \[1, 2, 3, 0\]"):
        _run(run_of(backend), ids=ids)


def test_a_level_of_a_multisampled_texture_is_refused_as_tint_refuses_it():
    text = TEXT.replace("textureDimensions(ms);", "textureDimensions(ms, 0);")
    tints = "no matching call to 'textureDimensions(texture_multisampled_2d<f32>"
    assert_refused_in_words("t", text, "no matching call to 'textureDimensions", tints)
